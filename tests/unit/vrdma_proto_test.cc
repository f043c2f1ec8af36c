// The vrdma control protocol's parser: every packet is checked before a field is used.
#include <gtest/gtest.h>

#include <random>

#include "vrdma/proto/control.hh"

namespace rb::vrdma::proto {
namespace {

TEST(VrdmaProto, RoundTripsEveryFixedBody) {
  RegMr r{7, local_write | remote_read, 4096};
  auto bytes = encode(Type::reg_mr, 42, r);
  Parsed p = parse(bytes);
  ASSERT_TRUE(p.msg) << p.error;
  EXPECT_EQ(p.msg->type(), Type::reg_mr);
  EXPECT_EQ(p.msg->h.seq, 42u);
  auto back = p.msg->as<RegMr>();
  EXPECT_EQ(back.pd, 7u);
  EXPECT_EQ(back.access, uint32_t(local_write | remote_read));
  EXPECT_EQ(back.len, 4096u);
}

TEST(VrdmaProto, StatsTextCarriesExactlyItsLength) {
  std::string text = "tenant a\n";
  auto ok = encode(Type::stats_text, 1, StatsText{uint32_t(text.size())},
                   {reinterpret_cast<const uint8_t*>(text.data()), text.size()});
  Parsed p = parse(ok);
  ASSERT_TRUE(p.msg) << p.error;
  EXPECT_EQ(std::string(p.msg->tail.begin(), p.msg->tail.end()), text);
  auto lying = encode(Type::stats_text, 1, StatsText{uint32_t(text.size() + 1)},
                      {reinterpret_cast<const uint8_t*>(text.data()), text.size()});
  EXPECT_FALSE(parse(lying).msg);
}

TEST(VrdmaProto, RefusesWhatIsNotExactlyAMessage) {
  auto good = encode(Type::alloc_pd, 1);
  ASSERT_TRUE(parse(good).msg);
  EXPECT_NE(parse({good.data(), good.size() - 1}).error.find("shorter than the header"), std::string::npos);

  auto bad_magic = good;
  bad_magic[0] ^= 1;
  EXPECT_NE(parse(bad_magic).error.find("magic"), std::string::npos);

  auto other_version = encode(Type::alloc_pd, 1);
  Header h;
  std::memcpy(&h, other_version.data(), sizeof h);
  h.version = kVersion + 1;
  std::memcpy(other_version.data(), &h, sizeof h);
  EXPECT_NE(parse(other_version).error.find("version"), std::string::npos);

  auto unknown = encode(Type(999), 1);
  EXPECT_NE(parse(unknown).error.find("unknown message type 999"), std::string::npos);

  auto extra = encode(Type::alloc_pd, 1, Handle{3});  // alloc_pd has no body
  EXPECT_FALSE(parse(extra).msg);
  auto short_body = encode(Type::reg_mr, 1, Handle{3});  // reg_mr needs a RegMr
  EXPECT_NE(parse(short_body).error.find("reg_mr"), std::string::npos);
}

TEST(VrdmaProto, RandomPacketsAreRefusedOrParsedWithinBounds) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 20000; ++i) {
    std::vector<uint8_t> p(rng() % 96);
    for (auto& b : p) b = uint8_t(rng());
    if (p.size() >= sizeof(Header) && (i & 1)) {  // half of them with a valid header start
      Header h;
      h.type = uint16_t(rng() % 24);
      h.body = uint32_t(p.size() - sizeof h);
      std::memcpy(p.data(), &h, sizeof h);
    }
    Parsed r = parse(p);
    if (!r.msg) {
      EXPECT_FALSE(r.error.empty());
      continue;
    }
    EXPECT_LE(r.msg->body.size() + r.msg->tail.size() + sizeof(Header), p.size());
  }
}

TEST(VrdmaProto, TextFieldsAreCutAndTerminated) {
  char f[8];
  put_text(f, sizeof f, "a-very-long-name");
  EXPECT_EQ(get_text(f, sizeof f), "a-very-");
  put_text(f, sizeof f, "ab");
  EXPECT_EQ(get_text(f, sizeof f), "ab");
}

}  // namespace
}  // namespace rb::vrdma::proto
