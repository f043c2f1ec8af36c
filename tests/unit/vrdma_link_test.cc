// Messages between routers of different hosts, and the addresses routers listen at: parsed with
// bounds checks before a field is used.
#include <gtest/gtest.h>

#include <random>

#include "vrdma/proto/link.hh"

namespace rb::vrdma::proto {
namespace {

LinkHeader header() {
  LinkHeader h;
  h.from_router = 0x1122334455667788;
  std::string why;
  h.from = *parse_router_address("10.77.1.1:7480", &why);
  h.req = 99;
  return h;
}

TEST(VrdmaLink, OpRoundTripsWithItsInlinePayload) {
  LinkOp op;
  op.from_qp = 1;
  op.to_qp = 2;
  op.len = 5;
  std::vector<uint8_t> bytes;
  const uint8_t payload[5] = {1, 2, 3, 4, 5};
  encode_link(bytes, header(), LinkType::op, op, payload);
  std::string why;
  auto m = parse_link(bytes, &why);
  ASSERT_TRUE(m) << why;
  EXPECT_EQ(m->type(), LinkType::op);
  EXPECT_EQ(m->h.req, 99u);
  EXPECT_EQ(to_string(m->h.from), "10.77.1.1:7480");
  EXPECT_EQ(m->as<LinkOp>().to_qp, 2u);
  EXPECT_EQ(std::vector<uint8_t>(m->tail.begin(), m->tail.end()), std::vector<uint8_t>(payload, payload + 5));
}

TEST(VrdmaLink, RefusesPayloadsThatDoNotMatchTheOp) {
  LinkOp op;
  op.len = 6;  // says 6, carries 5
  std::vector<uint8_t> bytes;
  const uint8_t payload[5] = {};
  encode_link(bytes, header(), LinkType::op, op, payload);
  std::string why;
  EXPECT_FALSE(parse_link(bytes, &why));
  op.len = 5;
  op.npieces = 1;  // pulled ops carry no payload
  encode_link(bytes, header(), LinkType::op, op, payload);
  EXPECT_FALSE(parse_link(bytes, &why));
  op.npieces = kMaxSge + 1;
  op.len = 0;
  encode_link(bytes, header(), LinkType::op, op);
  EXPECT_FALSE(parse_link(bytes, &why));
  // Only an op has a tail.
  encode_link(bytes, header(), LinkType::revoke, LinkRevoke{5}, payload);
  EXPECT_FALSE(parse_link(bytes, &why));
  EXPECT_NE(why.find("too many"), std::string::npos) << why;
}

TEST(VrdmaLink, RandomBytesAreRefusedOrParsedWithinBounds) {
  std::mt19937 rng(7);
  std::vector<uint8_t> good;
  encode_link(good, header(), LinkType::key_reply, LinkKey{});
  for (int i = 0; i < 20000; ++i) {
    std::vector<uint8_t> b = good;
    b[rng() % b.size()] ^= uint8_t(1u << (rng() % 8));
    if (rng() % 4 == 0) b.resize(rng() % (b.size() + 8));
    std::string why;
    auto m = parse_link(b, &why);
    if (m) EXPECT_LE(sizeof(LinkHeader) + m->body.size() + m->tail.size(), b.size());
    else EXPECT_FALSE(why.empty());
  }
}

TEST(VrdmaLink, RouterAddressesAreNumericHostAndPort) {
  std::string why;
  auto v4 = parse_router_address("127.0.0.1:7480", &why);
  ASSERT_TRUE(v4) << why;
  EXPECT_EQ(v4->port, 7480);
  EXPECT_EQ(to_string(*v4), "127.0.0.1:7480");
  auto v6 = parse_router_address("[::1]:9", &why);
  ASSERT_TRUE(v6) << why;
  EXPECT_EQ(to_string(*v6), "[::1]:9");
  for (const char* bad : {"localhost:7480", "127.0.0.1", "127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:x", ":7480"}) {
    EXPECT_FALSE(parse_router_address(bad, &why)) << bad;
    EXPECT_NE(why.find(bad), std::string::npos) << why;
  }
}

TEST(VrdmaLink, RouterNetworksHoldTheirAddressesOnly) {
  std::string why;
  auto at = [&](const char* s) { return *parse_router_address(s, &why); };
  auto net16 = parse_router_network("10.1.0.0/16", &why);
  ASSERT_TRUE(net16) << why;
  EXPECT_EQ(to_string(*net16), "10.1.0.0/16");
  EXPECT_TRUE(net16->contains(at("10.1.255.7:7480")));
  EXPECT_FALSE(net16->contains(at("10.2.0.1:7480")));
  EXPECT_FALSE(net16->contains(at("[::1]:7480")));
  auto odd = parse_router_network("10.0.0.128/25", &why);
  ASSERT_TRUE(odd) << why;
  EXPECT_TRUE(odd->contains(at("10.0.0.200:1")));
  EXPECT_FALSE(odd->contains(at("10.0.0.127:1")));
  auto one = parse_router_network("127.0.0.1", &why);
  ASSERT_TRUE(one) << why;
  EXPECT_EQ(to_string(*one), "127.0.0.1/32");
  EXPECT_FALSE(one->contains(at("127.0.0.2:1")));
  auto v6 = parse_router_network("fd00::/8", &why);
  ASSERT_TRUE(v6) << why;
  EXPECT_TRUE(v6->contains(at("[fd12::1]:7480")));
  EXPECT_FALSE(v6->contains(at("10.1.0.1:7480")));
  auto all = parse_router_network("0.0.0.0/0", &why);
  ASSERT_TRUE(all) << why;
  EXPECT_TRUE(all->contains(at("192.168.1.1:1")));
  EXPECT_FALSE(all->contains(at("[fd12::1]:1")));  // IPv4's everything is not IPv6's
  for (const char* bad : {"10.1.0.1/16", "10.1.0.0/33", "fd00::/129", "host/8", "10.1.0.0/", "10.1.0.0/x",
                          "10.0.0.0/+8", "10.0.0.0/ 8", "10.0.0.0/08x"}) {
    EXPECT_FALSE(parse_router_network(bad, &why)) << bad;
    EXPECT_NE(why.find(bad), std::string::npos) << why;
  }
  // Probe 9 E3: what follows a NUL was never looked at.
  EXPECT_FALSE(parse_router_network(std::string("10.0.0.0/8\0xyz", 14), &why));
  EXPECT_FALSE(parse_router_network(std::string("10.0.0.0\0junk/8", 15), &why));
}

}  // namespace
}  // namespace rb::vrdma::proto
