// The routers' link authentication: a message is taken once, whole, under the cluster's key.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>
#include <fstream>

#include "vrdma/router/link_auth.hh"
#include "link_fixtures.hh"

namespace rb::vrdma {
namespace {

using link_test::at;
using link_test::key;
const proto::RouterAddress kB = at(2), kC = at(3);

std::vector<uint8_t> message(const char* text) { return std::vector<uint8_t>(text, text + std::strlen(text)); }

TEST(VrdmaLinkAuth, AKeyedMacIsHmacSha256) {
  // RFC 4231, test case 1: a key of 20 bytes 0x0b (HMAC pads it with zeros, as a LinkKey32 does).
  LinkKey32 k{};
  std::fill_n(k.begin(), 20, uint8_t(0x0b));
  const char* hi = "Hi There";
  std::span<const uint8_t> data(reinterpret_cast<const uint8_t*>(hi), 8);
  LinkKey32 want = {0xb0, 0x34, 0x4c, 0x61, 0xd8, 0xdb, 0x38, 0x53, 0x5c, 0xa8, 0xaf, 0xce, 0xaf, 0x0b, 0xf1, 0x2b,
                    0x88, 0x1d, 0xc2, 0x00, 0xc9, 0x83, 0x3d, 0xa7, 0x26, 0xe9, 0x37, 0x6c, 0x2e, 0x32, 0xcf, 0xf7};
  KeyedMac mac(k);
  EXPECT_EQ(mac.of({data}), want);
  EXPECT_EQ(mac.of({data.first(3), data.subspan(3)}), want);  // in parts, and again with the same state
  EXPECT_EQ(hmac_sha256(k, data), want);
  EXPECT_NE(KeyedMac(key(1)).of({data}), want);
}

TEST(VrdmaLinkAuth, ASealedMessageOpensOnceAndWhole) {
  LinkAuth a({key(1)}), b({key(1)});
  auto m = message("connect QP 5 to QP 7");
  a.seal(m, kB);
  std::string why;
  auto opened = b.open(m, 42, kB, &why);
  ASSERT_TRUE(opened) << why;
  EXPECT_EQ(std::string(opened->begin(), opened->end()), "connect QP 5 to QP 7");
  EXPECT_FALSE(b.open(m, 42, kB, &why));  // the same message again: a replay
  EXPECT_NE(why.find("replay"), std::string::npos) << why;
}

// Each router keeps a window of numbers per sender, so a message from A to B, overheard and
// replayed to C, was new to C's window for A: the recipient's address is under the MAC.
TEST(VrdmaLinkAuth, AMessageOpensOnlyAtTheRouterItWasFor) {
  LinkAuth a({key(1)}), b({key(1)}), c({key(1)});
  auto to_b = message("op: WRITE 64 B");
  a.seal(to_b, kB);
  std::string why;
  EXPECT_FALSE(c.open(to_b, 42, kC, &why));
  EXPECT_NE(why.find("meant for another router"), std::string::npos) << why;
  EXPECT_TRUE(b.open(to_b, 42, kB, &why)) << why;
}

TEST(VrdmaLinkAuth, AnyChangedByteOrAnotherKeyIsRefused) {
  LinkAuth a({key(1)});
  auto m = message("op: WRITE 64 B");
  a.seal(m, kB);
  for (size_t i = 0; i < m.size(); ++i) {
    auto bad = m;
    bad[i] ^= 0x20;
    LinkAuth b({key(1)}, 0);  // started before the message: only its bytes can refuse it
    std::string why;
    EXPECT_FALSE(b.open(bad, 42, kB, &why)) << "byte " << i;
  }
  LinkAuth stranger({key(2)}, 0);
  std::string why;
  EXPECT_FALSE(stranger.open(m, 42, kB, &why));
  EXPECT_NE(why.find("MAC"), std::string::npos) << why;
  LinkAuth unkeyed;  // --insecure-link takes what a keyed router sends, and the reverse is refused
  auto plain = message("hello");
  unkeyed.seal(plain, kB);
  EXPECT_TRUE(LinkAuth({}, 0).open(m, 42, kB, &why)) << why;
  EXPECT_FALSE(LinkAuth({key(1)}, 0).open(plain, 42, kB, &why));
}

TEST(VrdmaLinkAuth, ASecondKeyVerifiesDuringARotation) {
  LinkAuth old_only({key(1)}), new_first({key(2), key(1)}), both({key(1), key(2)});
  auto from_old = message("a"), from_new = message("b");
  old_only.seal(from_old, kB);
  new_first.seal(from_new, kB);
  std::string why;
  EXPECT_TRUE(both.open(from_old, 1, kB, &why)) << why;
  EXPECT_TRUE(both.open(from_new, 2, kB, &why)) << why;
  EXPECT_FALSE(old_only.open(from_new, 2, kB, &why));
}

TEST(VrdmaLinkAuth, MessagesMayArriveOutOfOrderWithinTheWindowButNeverTwice) {
  LinkAuth a({key(3)}), b({key(3)});
  std::vector<std::vector<uint8_t>> sent;
  for (int i = 0; i < 100; ++i) {
    sent.push_back(message("m"));
    a.seal(sent.back(), kB);
  }
  std::string why;
  EXPECT_TRUE(b.open(sent[99], 7, kB, &why)) << why;
  EXPECT_TRUE(b.open(sent[50], 7, kB, &why)) << why;  // 49 behind: inside the window
  EXPECT_FALSE(b.open(sent[50], 7, kB, &why));
  EXPECT_FALSE(b.open(sent[10], 7, kB, &why));  // 89 behind: older than the window
  EXPECT_TRUE(b.open(sent[10], 8, kB, &why)) << why;  // each sender has its own numbers
}

TEST(VrdmaLinkAuth, AMessageSentLongAgoIsRefused) {
  // A replay older than the skew bound is refused even where the window has forgotten its sender.
  LinkAuth a({key(4)}), b({key(4)}, LinkAuth::wall_ns() - 120'000'000'000);  // b has run 2 minutes
  auto late = message("late"), recent = message("recent");
  a.seal(late, kB, LinkAuth::wall_ns() - 60'000'000'000);
  a.seal(recent, kB, LinkAuth::wall_ns() - 20'000'000'000);
  std::string why;
  EXPECT_FALSE(b.open(late, 9, kB, &why));
  EXPECT_NE(why.find("replay, or clocks"), std::string::npos) << why;
  EXPECT_TRUE(b.open(recent, 9, kB, &why)) << why;
  // Any time a sender writes is compared without overflow (the fuzzer found the subtraction).
  auto far = message("far"), before = message("before");
  a.seal(far, kB, INT64_MIN);
  a.seal(before, kB, INT64_MAX);
  EXPECT_FALSE(b.open(far, 9, kB, &why));
  EXPECT_FALSE(b.open(before, 9, kB, &why));
}

TEST(VrdmaLinkAuth, KeyFilesAreCheckedAndNamedInErrors) {
  char dir[] = "/tmp/vrdma-keys-XXXXXX";
  ASSERT_TRUE(mkdtemp(dir));
  std::string path = std::string(dir) + "/link.key";
  std::ofstream(path) << "# the cluster's key\n" << std::string(64, 'a') << "\n" << std::string(64, 'B') << "\n";
  chmod(path.c_str(), 0644);
  auto open_to_all = load_link_keys(path);
  ASSERT_FALSE(open_to_all);
  EXPECT_NE(open_to_all.status().message().find("chmod 600"), std::string::npos) << open_to_all.status().message();
  chmod(path.c_str(), 0600);
  auto keys = load_link_keys(path);
  ASSERT_TRUE(keys) << keys.status().message();
  ASSERT_EQ(keys->size(), 2u);
  EXPECT_EQ((*keys)[0][0], 0xaa);
  EXPECT_EQ((*keys)[1][31], 0xbb);
  std::ofstream(path) << "not a key\n";
  auto bad = load_link_keys(path);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.status().message().find("line 1"), std::string::npos) << bad.status().message();
  unlink(path.c_str());
  // A FIFO in the key's place (probe 20): opening it blocked the router's thread at SIGHUP until
  // someone wrote to it. It is refused without being opened.
  ASSERT_EQ(mkfifo(path.c_str(), 0600), 0);
  auto fifo = load_link_keys(path);
  ASSERT_FALSE(fifo);
  EXPECT_NE(fifo.status().message().find("not a regular file"), std::string::npos) << fifo.status().message();
  unlink(path.c_str());
  rmdir(dir);
}

}  // namespace
TEST(VrdmaLinkAuth, ARestartedRouterRefusesWhatWasSentToItsLastRun) {
  // Probe 9 E7: a restarted router's windows start empty, so a message captured on its last run
  // (a few seconds old, within the skew bound) was taken again.
  LinkAuth a({key(5)}), b({key(5)});
  auto old = message("before the restart"), fresh = message("after");
  a.seal(old, kB, LinkAuth::wall_ns() - 5'000'000'000);
  a.seal(fresh, kB);
  std::string why;
  EXPECT_FALSE(b.open(old, 3, kB, &why));
  EXPECT_NE(why.find("before this router started"), std::string::npos) << why;
  EXPECT_TRUE(b.open(fresh, 3, kB, &why)) << why;
}

TEST(VrdmaLinkAuth, WhatWasSentInTheLastSecondBeforeARestartIsRefusedToo) {
  // Probe 11: a start slack of 1 s let what was sent in the last second of a router's run be
  // replayed to its next once (its windows start empty). Only the clocks' own disagreement is
  // left (a message stamped before the start, by the recipient's clock, is refused).
  int64_t started = LinkAuth::wall_ns();
  LinkAuth a({key(5)}), b({key(5)}, started);
  auto last = message("in the run's last second");
  a.seal(last, kB, started - 500'000'000);
  std::string why;
  EXPECT_FALSE(b.open(last, 3, kB, &why));
  EXPECT_NE(why.find("before this router started"), std::string::npos) << why;
}

}  // namespace rb::vrdma
