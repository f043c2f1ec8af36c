// One conformance suite over every transport in the registry: for each instance an entry names
// in test_variants, two domains of it in this process, one endpoint each, connected both ways.
// Both sides are polled throughout because some providers (tcp) only move data while the target
// drives progress.
#include <gtest/gtest.h>
#include <unistd.h>

#include <sys/epoll.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <optional>
#include <thread>
#include <vector>

#include "core/buffer.hh"
#include "transport/inproc/inproc.hh"
#include "registry/registry.hh"
#include "registry_instances.hh"

namespace rb::transport {
namespace {

struct Side {
  std::unique_ptr<Domain> dom;
  std::unique_ptr<HostMemory> mem;
  std::unique_ptr<MemoryRegion> mr;
  std::unique_ptr<Endpoint> ep;
  std::vector<Completion> got;
};

class Conformance : public ::testing::TestWithParam<Instance> {
 protected:
  void SetUp() override {
    for (Side* s : {&a_, &b_}) {
      auto d = GetParam().open();
      if (!d) {
        if (auto why = why_unusable_here(GetParam())) GTEST_SKIP() << GetParam().label() << " is not usable here: " << *why;
        FAIL() << GetParam().label() << " did not open although the registry reports it usable here: " << d.status().message();
      }
      s->dom = std::move(d.value());
      auto m = s->dom->allocate(1 << 20);
      ASSERT_TRUE(m.is_ok()) << m.status().message();
      s->mem = std::move(m.value());
      auto mr = s->dom->register_memory(s->mem->data(), s->mem->size());
      ASSERT_TRUE(mr.is_ok()) << mr.status().message();
      s->mr = std::move(mr.value());
    }
    open_endpoints(false);
  }

  void open_endpoints(bool event) {
    for (Side* s : {&a_, &b_}) {
      s->ep.reset();
      s->got.clear();
      EndpointOptions eo;
      eo.depth = 64;
      eo.rx_slots = 16;
      eo.selective = true;
      eo.event = event;
      auto ep = s->dom->open_endpoint(eo);
      ASSERT_TRUE(ep.is_ok()) << ep.status().message();
      s->ep = std::move(ep.value());
    }
    ASSERT_TRUE(a_.ep->connect(b_.ep->address()).is_ok());
    ASSERT_TRUE(b_.ep->connect(a_.ep->address()).is_ok());
    ASSERT_TRUE(a_.ep->set_remote(b_.mr->remote()).is_ok());
    ASSERT_TRUE(b_.ep->set_remote(a_.mr->remote()).is_ok());
  }

  // Polls both sides until `done` holds or `limit` passes.
  bool pump(const std::function<bool()>& done, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
    auto end = std::chrono::steady_clock::now() + limit;
    Completion c[16];
    while (std::chrono::steady_clock::now() < end) {
      for (Side* s : {&a_, &b_}) {
        int n = s->ep->poll(c);
        EXPECT_GE(n, 0) << s->ep->last_error();
        for (int i = 0; i < n; ++i) s->got.push_back(c[i]);
      }
      if (done()) return true;
    }
    return false;
  }

  // Posts, retrying while the queue answers busy.
  void post(Side& s, const WorkRequest& w) {
    ASSERT_TRUE(pump([&] {
      int r = s.ep->post({&w, 1});
      EXPECT_GE(r, 0) << s.ep->last_error();
      return r == 1;
    }));
  }

  Side a_, b_;
};

TEST_P(Conformance, CapsAreSane) {
  const Caps& c = a_.dom->caps();
  EXPECT_TRUE(c.write && c.read);
  EXPECT_GE(c.max_msg, 4096u);
  EXPECT_GE(c.tx_depth, 64u);
  EXPECT_FALSE(a_.dom->info().transport.empty());
}

TEST_P(Conformance, WriteThenReadBackRoundTrips) {
  for (int i = 0; i < 8192; ++i) a_.mem->data()[i] = uint8_t(i * 13 + 5);
  WorkRequest w{Op::write, wr_flag::signal | wr_flag::delivery, 8192, a_.mr.get(), 0, 65536, 1};
  post(a_, w);
  ASSERT_TRUE(pump([&] { return a_.got.size() == 1; }));
  WorkRequest r{Op::read, wr_flag::signal, 8192, a_.mr.get(), 16384, 65536, 2};
  post(a_, r);
  ASSERT_TRUE(pump([&] { return a_.got.size() == 2; }));
  for (auto& c : a_.got) EXPECT_EQ(c.status, WcStatus::success);
  EXPECT_EQ(std::memcmp(a_.mem->data(), a_.mem->data() + 16384, 8192), 0);
}

TEST_P(Conformance, WriteLandsAtTheRightOffset) {
  if (!a_.dom->caps().peer_memory_readable) GTEST_SKIP() << "the peer's memory is not host visible";
  for (int i = 0; i < 4096; ++i) a_.mem->data()[i] = uint8_t(i * 7 + 1);
  WorkRequest w{Op::write, wr_flag::signal | wr_flag::delivery, 4096, a_.mr.get(), 0, 8192, 11};
  post(a_, w);
  ASSERT_TRUE(pump([&] { return !a_.got.empty() && std::memcmp(b_.mem->data() + 8192, a_.mem->data(), 4096) == 0; }));
  EXPECT_EQ(a_.got[0].wr_id, 11u);
  EXPECT_EQ(a_.got[0].op, Op::write);
  EXPECT_EQ(a_.got[0].status, WcStatus::success);
  EXPECT_EQ(b_.mem->data()[8191], 0);  // nothing before the target
  EXPECT_EQ(b_.mem->data()[8192 + 4096], 0);  // nothing after it
}

TEST_P(Conformance, ReadFetchesRemoteBytes) {
  if (!a_.dom->caps().peer_memory_readable) GTEST_SKIP() << "the peer's memory is not host visible";
  for (int i = 0; i < 1000; ++i) b_.mem->data()[64 + i] = uint8_t(i ^ 0x5a);
  WorkRequest w{Op::read, wr_flag::signal, 1000, a_.mr.get(), 4096, 64, 5};
  post(a_, w);
  ASSERT_TRUE(pump([&] { return !a_.got.empty(); }));
  EXPECT_EQ(a_.got[0].status, WcStatus::success);
  EXPECT_EQ(std::memcmp(a_.mem->data() + 4096, b_.mem->data() + 64, 1000), 0);
}

TEST_P(Conformance, SendMatchesPostedReceive) {
  if (!a_.dom->caps().send) GTEST_SKIP() << "no send/recv";
  WorkRequest r{Op::recv, wr_flag::signal, 512, b_.mr.get(), 0, 0, 77};
  post(b_, r);
  std::memset(a_.mem->data(), 0xab, 300);
  WorkRequest s{Op::send, wr_flag::signal, 300, a_.mr.get(), 0, 0, 3};
  post(a_, s);
  ASSERT_TRUE(pump([&] { return !a_.got.empty() && !b_.got.empty(); }));
  EXPECT_EQ(b_.got[0].op, Op::recv);
  EXPECT_EQ(b_.got[0].wr_id, 77u);
  EXPECT_EQ(b_.got[0].len, 300u);
  EXPECT_EQ(b_.mem->data()[299], 0xab);
  EXPECT_EQ(b_.mem->data()[300], 0);
}

TEST_P(Conformance, SelectiveSignalingGivesOneCompletionPerSignal) {
  std::vector<WorkRequest> batch;
  for (uint64_t i = 0; i < 16; ++i) {
    uint8_t f = (i % 8 == 7 ? wr_flag::signal : 0) | (i < 15 ? wr_flag::more : 0);
    batch.push_back({Op::write, f, 64, a_.mr.get(), 0, i * 64, i});
  }
  size_t posted = 0;
  ASSERT_TRUE(pump([&] {
    int r = a_.ep->post({batch.data() + posted, batch.size() - posted});
    EXPECT_GE(r, 0);
    posted += size_t(std::max(r, 0));
    return posted == batch.size();
  }));
  ASSERT_TRUE(pump([&] { return a_.got.size() >= 2; }));
  pump([&] { return false; }, std::chrono::milliseconds(300));  // nothing more may arrive
  ASSERT_EQ(a_.got.size(), 2u);
  EXPECT_EQ(a_.got[0].wr_id, 7u);
  EXPECT_EQ(a_.got[1].wr_id, 15u);
}

TEST_P(Conformance, QuiesceCancelsPostedReceives) {
  if (!a_.dom->caps().send) GTEST_SKIP() << "no send/recv";
  WorkRequest r{Op::recv, wr_flag::signal, 64, b_.mr.get(), 0, 0, 1};
  post(b_, r);
  Status q = b_.ep->quiesce(5);
  EXPECT_TRUE(q.is_ok()) << q.message();
  // A new receive of a larger size now gets the next message whole.
  WorkRequest r2{Op::recv, wr_flag::signal, 4096, b_.mr.get(), 8192, 0, 2};
  post(b_, r2);
  WorkRequest s{Op::send, wr_flag::signal, 2048, a_.mr.get(), 0, 0, 9};
  post(a_, s);
  ASSERT_TRUE(pump([&] {
    for (auto& c : b_.got)
      if (c.op == Op::recv && c.ok()) return true;
    return false;
  }));
  Completion last{};
  for (auto& c : b_.got)
    if (c.op == Op::recv && c.ok()) last = c;
  EXPECT_EQ(last.wr_id, 2u);
  EXPECT_EQ(last.len, 2048u);
}

TEST_P(Conformance, OutOfBoundsOpsFailAndTouchNothing) {
  if (!a_.dom->caps().checks_bounds) GTEST_SKIP() << "this transport does not check bounds (see docs/transports.md)";
  std::memset(a_.mem->data(), 0x77, 4096);
  uint64_t past_end = b_.mr->remote().len - 100;
  WorkRequest w{Op::write, wr_flag::signal | wr_flag::delivery, 4096, a_.mr.get(), 0, past_end, 41};
  post(a_, w);
  WorkRequest r{Op::read, wr_flag::signal, 4096, a_.mr.get(), 8192, past_end, 42};
  post(a_, r);
  ASSERT_TRUE(pump([&] { return a_.got.size() >= 2; }));
  for (auto& c : a_.got) {
    EXPECT_EQ(c.status, WcStatus::remote_access) << "wr " << c.wr_id << ": " << a_.ep->describe_error(c);
    EXPECT_NE(a_.ep->describe_error(c).find(wc_status_name(WcStatus::remote_access)), std::string::npos);
  }
  if (a_.dom->caps().peer_memory_readable) {
    for (size_t i = 0; i < b_.mem->size(); ++i) ASSERT_EQ(b_.mem->data()[i], 0) << "byte " << i << " was touched";
  }
  // The endpoint stays usable after a protection error.
  WorkRequest ok{Op::write, wr_flag::signal | wr_flag::delivery, 64, a_.mr.get(), 0, 0, 43};
  post(a_, ok);
  ASSERT_TRUE(pump([&] { return a_.got.size() >= 3; }));
  EXPECT_EQ(a_.got.back().status, WcStatus::success);
}

TEST_P(Conformance, WrongKeyOpsFailAndTouchNothing) {
  if (!a_.dom->caps().checks_keys) GTEST_SKIP() << "this transport does not check keys (see docs/transports.md)";
  std::memset(a_.mem->data(), 0x55, 4096);
  RemoteRegion wrong = b_.mr->remote();
  wrong.key ^= 0x5a5a5a;
  ASSERT_TRUE(a_.ep->set_remote(wrong).is_ok());
  WorkRequest w{Op::write, wr_flag::signal | wr_flag::delivery, 256, a_.mr.get(), 0, 0, 51};
  post(a_, w);
  WorkRequest r{Op::read, wr_flag::signal, 256, a_.mr.get(), 8192, 0, 52};
  post(a_, r);
  ASSERT_TRUE(pump([&] { return a_.got.size() >= 2; }));
  for (auto& c : a_.got) EXPECT_EQ(c.status, WcStatus::remote_access) << "wr " << c.wr_id << ": " << a_.ep->describe_error(c);
  for (size_t i = 8192; i < 8192 + 256; ++i) ASSERT_EQ(a_.mem->data()[i], 0) << "a read with a wrong key brought data";
  if (a_.dom->caps().peer_memory_readable)
    for (size_t i = 0; i < b_.mem->size(); ++i) ASSERT_EQ(b_.mem->data()[i], 0) << "byte " << i << " was touched";
  // The right key works again on the same endpoint.
  ASSERT_TRUE(a_.ep->set_remote(b_.mr->remote()).is_ok());
  WorkRequest ok{Op::write, wr_flag::signal | wr_flag::delivery, 64, a_.mr.get(), 0, 0, 53};
  post(a_, ok);
  ASSERT_TRUE(pump([&] { return a_.got.size() >= 3; }));
  EXPECT_EQ(a_.got.back().status, WcStatus::success);
}

TEST_P(Conformance, ManyOutstandingWritesAllComplete) {
  const int n = 2000;
  int posted = 0;
  ASSERT_TRUE(pump([&] {
    while (posted < n && posted - int(a_.got.size()) < 32) {
      WorkRequest w{Op::write, wr_flag::signal, 256, a_.mr.get(), 0, uint64_t(posted % 64) * 256, uint64_t(posted)};
      int r = a_.ep->post({&w, 1});
      EXPECT_GE(r, 0);
      if (r == 0) break;
      ++posted;
    }
    return posted == n && int(a_.got.size()) == n;
  }));
  for (auto& c : a_.got) EXPECT_EQ(c.status, WcStatus::success);
}

TEST_P(Conformance, AtomicsApplyAndReturnThePreviousValue) {
  if (!a_.dom->caps().atomics) GTEST_SKIP() << "no atomics";
  uint64_t seed = 5;
  std::memcpy(a_.mem->data(), &seed, 8);
  post(a_, {Op::write, wr_flag::signal | wr_flag::delivery, 8, a_.mr.get(), 0, 4096, 1});
  ASSERT_TRUE(pump([&] { return a_.got.size() == 1; }));
  // fetch-and-add 3: sees 5, leaves 8; cswap 8->100 matches; cswap 7->1 does not and leaves 100.
  post(a_, {Op::fadd, wr_flag::signal, 8, a_.mr.get(), 64, 4096, 2, 3});
  post(a_, {Op::cswap, wr_flag::signal, 8, a_.mr.get(), 128, 4096, 3, 100, 8});
  post(a_, {Op::cswap, wr_flag::signal, 8, a_.mr.get(), 192, 4096, 4, 1, 7});
  ASSERT_TRUE(pump([&] { return a_.got.size() == 4; }));
  uint64_t seen[3];
  for (int i = 0; i < 3; ++i) std::memcpy(&seen[i], a_.mem->data() + 64 * (i + 1), 8);
  EXPECT_EQ(seen[0], 5u);
  EXPECT_EQ(seen[1], 8u);
  EXPECT_EQ(seen[2], 100u);
  for (size_t i = 1; i < 4; ++i) {
    EXPECT_EQ(a_.got[i].status, WcStatus::success) << a_.ep->describe_error(a_.got[i]);
    EXPECT_EQ(a_.got[i].op, i == 1 ? Op::fadd : Op::cswap);
    EXPECT_EQ(a_.got[i].wr_id, i + 1);
  }
  post(a_, {Op::read, wr_flag::signal, 8, a_.mr.get(), 256, 4096, 5});
  ASSERT_TRUE(pump([&] { return a_.got.size() == 5; }));
  uint64_t final_value;
  std::memcpy(&final_value, a_.mem->data() + 256, 8);
  EXPECT_EQ(final_value, 100u);
}

TEST_P(Conformance, ManyAddsCountExactly) {
  if (!a_.dom->caps().atomics) GTEST_SKIP() << "no atomics";
  const uint64_t n = 500;
  uint64_t posted = 0;
  ASSERT_TRUE(pump([&] {
    while (posted < n && posted - a_.got.size() < 16) {
      WorkRequest w{Op::fadd, wr_flag::signal, 8, a_.mr.get(), 8 * (posted % 64), 8192, posted, 1};
      int r = a_.ep->post({&w, 1});
      EXPECT_GE(r, 0) << a_.ep->last_error();
      if (r <= 0) break;
      ++posted;
    }
    return posted == n && a_.got.size() == n;
  }));
  for (auto& c : a_.got) ASSERT_EQ(c.status, WcStatus::success) << a_.ep->describe_error(c);
  post(a_, {Op::read, wr_flag::signal, 8, a_.mr.get(), 4096, 8192, 9999});
  ASSERT_TRUE(pump([&] { return a_.got.size() == n + 1; }));
  uint64_t counter;
  std::memcpy(&counter, a_.mem->data() + 4096, 8);
  EXPECT_EQ(counter, n);
}

TEST_P(Conformance, WriteWithImmediateGivesTheTargetACompletion) {
  if (!a_.dom->caps().imm_data) GTEST_SKIP() << "no immediate data";
  for (int i = 0; i < 256; ++i) a_.mem->data()[i] = uint8_t(i + 9);
  WorkRequest w{Op::write_imm, wr_flag::signal, 256, a_.mr.get(), 0, 1024, 21};
  w.imm = 0xabcd1234;
  post(a_, w);
  ASSERT_TRUE(pump([&] { return !a_.got.empty() && !b_.got.empty(); }));
  EXPECT_EQ(a_.got[0].op, Op::write_imm);
  EXPECT_EQ(a_.got[0].status, WcStatus::success);
  const Completion& t = b_.got[0];
  EXPECT_EQ(t.op, Op::remote_write);
  EXPECT_TRUE(t.has_imm);
  EXPECT_EQ(t.imm, 0xabcd1234u);
  EXPECT_EQ(t.len, 256u);
  // The completion means the data is there.
  if (a_.dom->caps().peer_memory_readable) EXPECT_EQ(std::memcmp(b_.mem->data() + 1024, a_.mem->data(), 256), 0);
}

TEST_P(Conformance, SendWithImmediateCarriesItToTheReceive) {
  if (!a_.dom->caps().imm_data || !a_.dom->caps().send) GTEST_SKIP() << "no immediate data on sends";
  post(b_, {Op::recv, wr_flag::signal, 512, b_.mr.get(), 0, 0, 31});
  std::memset(a_.mem->data(), 0x3c, 100);
  WorkRequest s{Op::send_imm, wr_flag::signal, 100, a_.mr.get(), 0, 0, 32};
  s.imm = 77;
  post(a_, s);
  ASSERT_TRUE(pump([&] { return !a_.got.empty() && !b_.got.empty(); }));
  EXPECT_EQ(a_.got[0].op, Op::send_imm);
  EXPECT_EQ(b_.got[0].op, Op::recv);
  EXPECT_TRUE(b_.got[0].has_imm);
  EXPECT_EQ(b_.got[0].imm, 77u);
  EXPECT_EQ(b_.got[0].len, 100u);
  EXPECT_EQ(b_.mem->data()[99], 0x3c);
  // A plain send carries none.
  post(b_, {Op::recv, wr_flag::signal, 512, b_.mr.get(), 0, 0, 33});
  post(a_, {Op::send, wr_flag::signal, 10, a_.mr.get(), 0, 0, 34});
  ASSERT_TRUE(pump([&] { return a_.got.size() == 2 && b_.got.size() == 2; }));
  EXPECT_FALSE(b_.got[1].has_imm);
}

// Sleeps on `ep` until arm_wait says a completion may be ready (0) or its descriptor fires.
// Returns false if neither happened within `limit`.
bool sleep_until_ready(Endpoint& ep, std::chrono::milliseconds limit) {
  WaitHandle h;
  int armed = ep.arm_wait(h);
  EXPECT_GE(armed, 0) << ep.last_error();
  if (armed <= 0) return armed == 0;
  int efd = epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = h.events;
  epoll_ctl(efd, EPOLL_CTL_ADD, h.fd, &ev);
  int n = epoll_wait(efd, &ev, 1, int(limit.count()));
  close(efd);
  return n == 1;
}

// The target sleeps in arm_wait while a thread of its own drives the initiator: the arrival
// must wake it, and the completion must then be there to poll.
TEST_P(Conformance, AWaitingTargetWakesForAnArrival) {
  if (!a_.dom->caps().can_wait) GTEST_SKIP() << "cannot wait";
  open_endpoints(true);
  bool imm = a_.dom->caps().imm_data, send = a_.dom->caps().send;
  if (!imm && !send) GTEST_SKIP() << "nothing gives the target a completion";
  if (!imm) post(b_, {Op::recv, wr_flag::signal, 512, b_.mr.get(), 0, 0, 41});
  // Nothing has arrived: the target may sleep.
  WaitHandle h;
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  int armed = 0;
  Completion c[8];
  while (std::chrono::steady_clock::now() < end && (armed = b_.ep->arm_wait(h)) == 0) ASSERT_GE(b_.ep->poll(c), 0);
  ASSERT_EQ(armed, 1) << "arm_wait keeps reporting a completion on an idle endpoint";
  EXPECT_GE(h.fd, 0);
  std::atomic<bool> stop{false};
  std::thread initiator([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    WorkRequest w{imm ? Op::write_imm : Op::send, wr_flag::signal, 64, a_.mr.get(), 0, 0, 42};
    w.imm = 5;
    while (!stop && a_.ep->post({&w, 1}) == 0) a_.ep->poll(c);
    Completion mine[8];
    while (!stop) a_.ep->poll(mine);
  });
  bool woke = false;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!woke && std::chrono::steady_clock::now() < deadline) {
    if (!sleep_until_ready(*b_.ep, std::chrono::milliseconds(5000))) continue;
    int n = b_.ep->poll(c);
    ASSERT_GE(n, 0) << b_.ep->last_error();
    for (int i = 0; i < n; ++i) woke = woke || (c[i].op == (imm ? Op::remote_write : Op::recv));
  }
  stop = true;
  initiator.join();
  EXPECT_TRUE(woke) << "the arrival did not wake the sleeping target";
}

// The initiator sleeps for its own completion while a thread drives the target.
TEST_P(Conformance, AWaitingInitiatorWakesForItsCompletion) {
  if (!a_.dom->caps().can_wait) GTEST_SKIP() << "cannot wait";
  open_endpoints(true);
  std::atomic<bool> stop{false};
  std::thread target([&] {
    Completion c[8];
    while (!stop) b_.ep->poll(c);
  });
  WorkRequest r{Op::read, wr_flag::signal, 4096, a_.mr.get(), 0, 0, 51};
  Completion c[8];
  bool done = false;
  while (a_.ep->post({&r, 1}) == 0) a_.ep->poll(c);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done && std::chrono::steady_clock::now() < deadline) {
    if (!sleep_until_ready(*a_.ep, std::chrono::milliseconds(5000))) continue;
    int n = a_.ep->poll(c);
    ASSERT_GE(n, 0) << a_.ep->last_error();
    for (int i = 0; i < n; ++i) done = done || c[i].wr_id == 51;
  }
  stop = true;
  target.join();
  EXPECT_TRUE(done) << "the read's completion did not wake the initiator";
}

TEST_P(Conformance, CapsMatchWhatPostAccepts) {
  // A transport that does not claim an op refuses it at post with an error, never silently.
  const Caps& caps = a_.dom->caps();
  std::vector<WorkRequest> unclaimed;
  if (!caps.atomics) unclaimed.push_back({Op::fadd, wr_flag::signal, 8, a_.mr.get(), 0, 0, 61, 1});
  if (!caps.imm_data) unclaimed.push_back({Op::write_imm, wr_flag::signal, 8, a_.mr.get(), 0, 0, 62});
  for (auto& w : unclaimed) {
    EXPECT_EQ(a_.ep->post({&w, 1}), -1) << op_name(w.op) << " was accepted by a transport that does not claim it";
    EXPECT_FALSE(a_.ep->last_error().empty());
  }
}

TEST_P(Conformance, EventEndpointsOnlyWhereTheTransportCanWait) {
  if (a_.dom->caps().can_wait) GTEST_SKIP() << "can wait";
  EndpointOptions eo;
  eo.event = true;
  auto ep = a_.dom->open_endpoint(eo);
  ASSERT_FALSE(ep.is_ok()) << "an event endpoint opened on a transport that does not claim can_wait";
  EXPECT_NE(ep.status().message().find("event"), std::string::npos) << ep.status().message();
}

INSTANTIATE_TEST_SUITE_P(Registry, Conformance, ::testing::ValuesIn(registry_instances()),
                         [](const auto& info) { return instance_test_name(info.param); });

TEST(Registry, EveryEntryIsTested) {
  for (const auto& e : registry()) EXPECT_FALSE(e.test_variants.empty()) << e.name << " names no test_variants";
}

// Keys, which the suite above cannot test generically (not every transport checks them), and
// busy sends, on the transport that enforces both like a NIC would.
TEST(InprocProtection, BadKeyAndOutOfBoundsCompleteWithErrors) {
  auto da = inproc::open_domain(), db = inproc::open_domain();
  AlignedBuffer ma(4096), mb(4096);
  auto ra = da->register_memory(ma.data(), 4096);
  auto rb = db->register_memory(mb.data(), 4096);
  auto ea = da->open_endpoint({}).value().release();
  std::unique_ptr<Endpoint> a(ea);
  auto b = std::move(db->open_endpoint({}).value());
  a->connect(b->address());
  RemoteRegion wrong = (*rb)->remote();
  wrong.key += 100;
  a->set_remote(wrong);
  WorkRequest w{Op::write, wr_flag::signal, 64, ra->get(), 0, 0, 1};
  ASSERT_EQ(a->post({&w, 1}), 1);
  Completion c[4];
  ASSERT_EQ(a->poll(c), 1);
  EXPECT_EQ(c[0].status, WcStatus::remote_access);
  a->set_remote((*rb)->remote());
  w.remote_off = 4096 - 32;
  ASSERT_EQ(a->post({&w, 1}), 1);
  ASSERT_EQ(a->poll(c), 1);
  EXPECT_EQ(c[0].status, WcStatus::remote_access);
  for (int i = 0; i < 4096; ++i) ASSERT_EQ(mb.data()[i], 0);
  // A send with no receive posted is "busy" (0 accepted), not an error.
  WorkRequest s{Op::send, wr_flag::signal, 64, ra->get(), 0, 0, 2};
  EXPECT_EQ(a->post({&s, 1}), 0);
}

}  // namespace
}  // namespace rb::transport
