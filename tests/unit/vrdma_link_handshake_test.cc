// How two routers make a link connection: only a key holder's request is taken, once, at the
// router it was made for; only the listener it asked answers it.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "vrdma/router/link_handshake.hh"
#include "link_fixtures.hh"

namespace rb::vrdma {
namespace {

using link_test::at;
using link_test::key;
const proto::RouterAddress kA = at(1), kB = at(2), kC = at(3);

template <class T>
std::span<const uint8_t> bytes_of(const T& v) {
  return {reinterpret_cast<const uint8_t*>(&v), sizeof v};
}

// Routers started a minute ago, all under one key unless a test says otherwise.
struct Routers {
  LinkAuth a_auth{{key(7)}, LinkAuth::wall_ns() - 60'000'000'000};
  LinkAuth b_auth{{key(7)}, LinkAuth::wall_ns() - 60'000'000'000};
  LinkHandshake a{a_auth}, b{b_auth};
};

TEST(VrdmaLinkHandshake, AKeyHoldersRequestIsTakenOnceAndItsAnswerChecks) {
  Routers r;
  ConnectRequest req = r.a.request(kA, kB);
  proto::RouterAddress from;
  std::string why;
  auto answer = r.b.take(bytes_of(req), kB, &from, &why);
  ASSERT_TRUE(answer) << why;
  EXPECT_EQ(from, kA);
  EXPECT_TRUE(r.a.answers(bytes_of(*answer), req, &why)) << why;
  EXPECT_FALSE(r.b.take(bytes_of(req), kB, &from, &why)) << "a replayed request was taken";
  EXPECT_NE(why.find("replay"), std::string::npos) << why;
}

TEST(VrdmaLinkHandshake, ARequestIsRefusedWithoutTheKeyOrAtAnotherRouter) {
  Routers r;
  LinkAuth stranger_auth{{key(9)}};
  LinkHandshake stranger{stranger_auth};
  proto::RouterAddress from;
  std::string why;
  ConnectRequest forged = stranger.request(kA, kB);
  EXPECT_FALSE(r.b.take(bytes_of(forged), kB, &from, &why));
  EXPECT_NE(why.find("MAC does not verify"), std::string::npos) << why;
  LinkAuth none;  // a stranger with no key at all: zeros for a MAC
  LinkHandshake keyless{none};
  ConnectRequest unsigned_req = keyless.request(kA, kB);
  EXPECT_FALSE(r.b.take(bytes_of(unsigned_req), kB, &from, &why));
  ConnectRequest for_c = r.a.request(kA, kC);
  EXPECT_FALSE(r.b.take(bytes_of(for_c), kB, &from, &why)) << "a request made for C was taken at B";
  for (size_t at = 0; at < sizeof(ConnectRequest); at += 7) {
    ConnectRequest changed = r.a.request(kA, kB);
    reinterpret_cast<uint8_t*>(&changed)[at] ^= 1;
    EXPECT_FALSE(r.b.take(bytes_of(changed), kB, &from, &why)) << "byte " << at;
  }
  std::vector<uint8_t> rxm(56, 3);  // anything of another size
  EXPECT_FALSE(r.b.take(rxm, kB, &from, &why));
}

TEST(VrdmaLinkHandshake, AnOldRequestOrOneFromBeforeTheStartIsRefused) {
  Routers r;
  proto::RouterAddress from;
  std::string why;
  ConnectRequest old = r.a.request(kA, kB, LinkAuth::wall_ns() - kLinkSkewNs - 1'000'000'000);
  EXPECT_FALSE(r.b.take(bytes_of(old), kB, &from, &why));
  EXPECT_NE(why.find("a replay, or clocks"), std::string::npos) << why;
  ConnectRequest ahead = r.a.request(kA, kB, LinkAuth::wall_ns() + kLinkSkewNs + 1'000'000'000);
  EXPECT_FALSE(r.b.take(bytes_of(ahead), kB, &from, &why));
  LinkAuth restarted{{key(7)}, LinkAuth::wall_ns() + 1'000'000'000};  // started after the request was made
  LinkHandshake b2{restarted};
  ConnectRequest before = r.a.request(kA, kB);
  EXPECT_FALSE(b2.take(bytes_of(before), kB, &from, &why));
  EXPECT_NE(why.find("before this router started"), std::string::npos) << why;
}

TEST(VrdmaLinkHandshake, AnAnswerFromAnotherListenerOrForAnotherRequestIsRefused) {
  Routers r;
  ConnectRequest req = r.a.request(kA, kB);
  ConnectRequest other = r.a.request(kA, kB);
  proto::RouterAddress from;
  std::string why;
  auto answer = r.b.take(bytes_of(other), kB, &from, &why);
  ASSERT_TRUE(answer) << why;
  EXPECT_FALSE(r.a.answers(bytes_of(*answer), req, &why)) << "an answer to another request was taken";
  LinkAuth stranger_auth{{key(9)}};
  LinkHandshake stranger{stranger_auth};
  auto forged = stranger.take(bytes_of(req), kB, &from, &why);
  EXPECT_FALSE(forged) << "a stranger took a key holder's request";
  ConnectAnswer made;
  EXPECT_FALSE(r.a.answers(bytes_of(made), req, &why));
}

}  // namespace
}  // namespace rb::vrdma
