// One conformance suite over every transport in the registry: for each instance an entry names
// in test_variants, two domains of it in this process, one endpoint each, connected both ways.
// Both sides are polled throughout because some providers (tcp) only move data while the target
// drives progress.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <optional>
#include <vector>

#include "core/buffer.hh"
#include "transport/inproc/inproc.hh"
#include "transport/registry.hh"
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
      EndpointOptions eo;
      eo.depth = 64;
      eo.rx_slots = 16;
      eo.selective = true;
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
