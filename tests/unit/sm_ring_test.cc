// The descriptor ring of dma:cuda -o engine=sm (src/transport/dma/sm_ring.h), driven by CPU
// threads on both sides: producers post with the host code, emulated consumers run the same
// consumer functions the GPU kernel runs (smr_claim, smr_consume_one, smr_publish_done). Every
// test checks the bytes each descriptor copied and how many times each was consumed, so a lost,
// doubled, torn or misplaced copy fails.
#include "transport/dma/sm_ring.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;

// A ring in ordinary host memory, as the tests' consumers need it (the engine's is pinned).
class HostRing {
 public:
  explicit HostRing(uint64_t capacity) : slots_(capacity), ctrl_(std::make_unique<smr_ctrl>()) {
    ring_ = {slots_.data(), capacity, ctrl_.get(), &head_};
    smr_init(&ring_);
  }
  const smr_ring* get() const { return &ring_; }

 private:
  std::vector<smr_slot> slots_;
  std::unique_ptr<smr_ctrl> ctrl_;
  uint64_t head_ = 0;
  smr_ring ring_{};
};

// Threads on a ring that are stopped and joined however the test ends (a failed ASSERT too).
class Crew {
 public:
  explicit Crew(const smr_ring* r) : r_(r) {}
  ~Crew() { stop_and_join(); }
  template <class F>
  void add(F&& f) { threads_.emplace_back(std::forward<F>(f)); }
  void stop_and_join() {
    smr_stop(r_);
    for (auto& t : threads_)
      if (t.joinable()) t.join();
  }

 private:
  const smr_ring* r_;
  std::vector<std::thread> threads_;
};

// Descriptor i copies len(i) bytes of a pattern of its own into a destination of its own.
class Payloads {
 public:
  explicit Payloads(uint64_t count) : src_(count * kStride), dst_(count * kStride), seen_(count) {
    for (uint64_t i = 0; i < src_.size(); ++i) src_[i] = uint8_t((i * 131 + i / kStride * 7 + 1) & 0xff);
  }
  static uint64_t len(uint64_t i) { return 1 + (i * 37) % kStride; }  // 1..64: odd sizes, both copy paths
  uint64_t src(uint64_t i) const { return uint64_t(uintptr_t(&src_[i * kStride])); }
  uint64_t dst(uint64_t i) { return uint64_t(uintptr_t(&dst_[i * kStride])); }
  uint64_t count() const { return seen_.size(); }
  std::atomic<int>& seen(uint64_t id) { return seen_[id]; }

  // Descriptor i's bytes landed, and nothing past its length was written.
  ::testing::AssertionResult copied(uint64_t i) const {
    for (uint64_t b = 0; b < kStride; ++b) {
      uint8_t want = b < len(i) ? src_[i * kStride + b] : 0;
      if (dst_[i * kStride + b] != want)
        return ::testing::AssertionFailure() << "descriptor " << i << " byte " << b << ": " << int(dst_[i * kStride + b])
                                             << " != " << int(want);
    }
    return ::testing::AssertionSuccess();
  }

 private:
  static constexpr uint64_t kStride = 64;
  std::vector<uint8_t> src_, dst_;
  std::vector<std::atomic<int>> seen_;
};

// An emulated consumer: claims `batch` positions at a time like a warp claims 32, consumes each
// with the kernel's own function, counts on its own counter; records what it consumed, in order.
struct Consumer {
  std::vector<uint64_t> positions, ids;
  void run(const smr_ring* r, unsigned index, uint64_t batch, Payloads& p) {
    uint64_t total = 0;
    for (;;) {
      uint64_t base = smr_claim(r, batch), copied = 0;
      bool stopped = false;
      for (uint64_t i = 0; i < batch && !stopped; ++i) {
        uint64_t id = 0;
        if (!smr_consume_one_observed(r, base + i, &id)) {
          stopped = true;
          break;
        }
        positions.push_back(base + i);
        ids.push_back(id);
        p.seen(id).fetch_add(1);
        ++copied;
      }
      total += copied;
      smr_publish_done(r, index, total);
      if (stopped) return;
    }
  }
  // smr_consume_one, with the descriptor's id handed out (the protocol's own steps, in its order).
  static int smr_consume_one_observed(const smr_ring* r, uint64_t pos, uint64_t* id) {
    smr_slot d;
    if (!smr_wait_filled(r, pos, &d)) return 0;
    smr_copy(&d);
    *id = d.id;
    smr_release(r, pos);
    return 1;
  }
};

// smr_post with a deadline, so a ring that never frees a slot fails the test instead of hanging it.
void post_range(const smr_ring* r, Payloads& p, uint64_t from, uint64_t to, std::vector<uint64_t>* positions) {
  auto end = std::chrono::steady_clock::now() + 20s;
  for (uint64_t i = from; i < to; ++i) {
    uint64_t pos = 0;
    int rc;
    while ((rc = smr_try_post(r, p.src(i), p.dst(i), Payloads::len(i), i, &pos)) == SMR_FULL)
      ASSERT_LT(std::chrono::steady_clock::now(), end) << "descriptor " << i << ": the ring stayed full";
    ASSERT_EQ(rc, SMR_POSTED);
    if (positions) positions->push_back(pos);
  }
}

bool wait_done(const smr_ring* r, uint64_t count, std::chrono::milliseconds limit = 20s) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (smr_done_total(r) < count)
    if (std::chrono::steady_clock::now() > end) return false;
  return true;
}

TEST(SmRing, OneConsumerCopiesInPostOrderAndCountsEach) {
  HostRing ring(64);
  Payloads p(1000);
  Consumer c;
  Crew crew(ring.get());
  crew.add([&] { c.run(ring.get(), 0, 1, p); });
  std::vector<uint64_t> posted;
  post_range(ring.get(), p, 0, p.count(), &posted);
  ASSERT_TRUE(wait_done(ring.get(), p.count()));
  crew.stop_and_join();
  ASSERT_EQ(c.ids.size(), p.count());
  for (uint64_t i = 0; i < p.count(); ++i) {
    EXPECT_EQ(posted[i], i) << "one producer takes positions in order";
    EXPECT_EQ(c.ids[i], i) << "one consumer copies in post order";
    EXPECT_TRUE(p.copied(i));
    EXPECT_EQ(p.seen(i).load(), 1);
  }
  EXPECT_EQ(ring.get()->ctrl->done[0].value, p.count());
  EXPECT_EQ(smr_done_total(ring.get()), p.count());
}

TEST(SmRing, ManyProducersAndConsumersLoseAndDoubleNothing) {
  constexpr unsigned kProducers = 4, kConsumers = 3;
  constexpr uint64_t kEach = 20000;
  HostRing ring(64);  // 80000 descriptors through 64 slots: 1250 laps, full most of the time
  Payloads p(kProducers * kEach);
  std::vector<Consumer> consumers(kConsumers);
  Crew crew(ring.get());
  for (unsigned c = 0; c < kConsumers; ++c) crew.add([&, c] { consumers[c].run(ring.get(), c, 8, p); });
  std::vector<std::vector<uint64_t>> posted(kProducers);
  std::vector<std::thread> producers;
  for (unsigned w = 0; w < kProducers; ++w)
    producers.emplace_back([&, w] { post_range(ring.get(), p, w * kEach, (w + 1) * kEach, &posted[w]); });
  for (auto& t : producers) t.join();
  ASSERT_TRUE(wait_done(ring.get(), p.count())) << "copied " << smr_done_total(ring.get()) << " of " << p.count();
  crew.stop_and_join();

  std::vector<int> taken(p.count(), 0);
  uint64_t total = 0;
  for (unsigned c = 0; c < kConsumers; ++c) {
    EXPECT_EQ(ring.get()->ctrl->done[c].value, consumers[c].ids.size()) << "consumer " << c << "'s own counter";
    for (size_t k = 1; k < consumers[c].positions.size(); ++k)
      EXPECT_LT(consumers[c].positions[k - 1], consumers[c].positions[k]) << "a consumer's claims only move forward";
    for (uint64_t pos : consumers[c].positions) ++taken.at(pos);
    total += consumers[c].ids.size();
  }
  EXPECT_EQ(total, p.count());
  for (uint64_t pos = 0; pos < p.count(); ++pos) EXPECT_EQ(taken[pos], 1) << "position " << pos;
  for (uint64_t i = 0; i < p.count(); ++i) {
    ASSERT_EQ(p.seen(i).load(), 1) << "descriptor " << i << " consumed " << p.seen(i).load() << " times";
    ASSERT_TRUE(p.copied(i));
  }
  for (auto& ps : posted)
    for (size_t k = 1; k < ps.size(); ++k) EXPECT_LT(ps[k - 1], ps[k]) << "a producer's positions only move forward";
}

TEST(SmRing, FullRingPushesBackUntilASlotIsConsumed) {
  HostRing ring(8);
  Payloads p(20);
  uint64_t pos = 0;
  for (uint64_t i = 0; i < 8; ++i) ASSERT_EQ(smr_try_post(ring.get(), p.src(i), p.dst(i), Payloads::len(i), i, &pos), SMR_POSTED);
  EXPECT_EQ(smr_try_post(ring.get(), p.src(8), p.dst(8), Payloads::len(8), 8, &pos), SMR_FULL);
  EXPECT_EQ(ring.get()->ctrl->tail.value, 8u) << "a refused post takes no position";
  EXPECT_FALSE(smr_is_done(ring.get(), 0));
  // Consume exactly one position, as a consumer would: the ring takes exactly one more.
  uint64_t base = smr_claim(ring.get(), 1);
  ASSERT_EQ(base, 0u);
  ASSERT_EQ(smr_consume_one(ring.get(), base), 1);
  smr_publish_done(ring.get(), 0, 1);
  EXPECT_TRUE(smr_is_done(ring.get(), 0));
  EXPECT_TRUE(p.copied(0));
  EXPECT_FALSE(p.copied(1)) << "position 1 is not consumed yet";
  ASSERT_EQ(smr_try_post(ring.get(), p.src(8), p.dst(8), Payloads::len(8), 8, &pos), SMR_POSTED);
  EXPECT_EQ(pos, 8u);
  EXPECT_EQ(smr_try_post(ring.get(), p.src(9), p.dst(9), Payloads::len(9), 9, &pos), SMR_FULL);
  EXPECT_TRUE(smr_is_done(ring.get(), 0)) << "done stays done after its slot is refilled";
  EXPECT_EQ(smr_done_total(ring.get()), 1u);
}

TEST(SmRing, BlockedProducerWaitsForRoomThenPosts) {
  HostRing ring(4);
  Payloads p(8);
  post_range(ring.get(), p, 0, 4, nullptr);
  auto blocked = std::async(std::launch::async, [&] {
    uint64_t pos = 0;
    return smr_post(ring.get(), p.src(4), p.dst(4), Payloads::len(4), 4, &pos);
  });
  Crew stop_on_exit(ring.get());  // destroyed before `blocked`, so a failure here cannot hang on it
  EXPECT_EQ(blocked.wait_for(50ms), std::future_status::timeout) << "a full ring holds the producer back";
  ASSERT_EQ(smr_consume_one(ring.get(), smr_claim(ring.get(), 1)), 1);
  ASSERT_EQ(blocked.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(blocked.get(), SMR_POSTED);
}

TEST(SmRing, StopReleasesBlockedProducersAndWaitingConsumers) {
  HostRing ring(4);
  Payloads p(16);
  post_range(ring.get(), p, 0, 4, nullptr);  // full, and nobody consuming
  std::vector<std::future<int>> producers;
  for (uint64_t i = 4; i < 7; ++i)
    producers.push_back(std::async(std::launch::async, [&, i] {
      uint64_t pos = 0;
      return smr_post(ring.get(), p.src(i), p.dst(i), Payloads::len(i), i, &pos);
    }));
  // A consumer waiting on a position nobody will fill (it claims past the ring's end).
  HostRing empty(4);
  auto consumer = std::async(std::launch::async, [&] { return smr_consume_one(empty.get(), smr_claim(empty.get(), 1)); });
  Crew stop_on_exit(ring.get()), stop_empty_on_exit(empty.get());
  std::this_thread::sleep_for(30ms);
  for (auto& f : producers) EXPECT_EQ(f.wait_for(0ms), std::future_status::timeout);
  EXPECT_EQ(consumer.wait_for(0ms), std::future_status::timeout);
  smr_stop(ring.get());
  smr_stop(empty.get());
  for (auto& f : producers) {
    ASSERT_EQ(f.wait_for(10s), std::future_status::ready) << "a producer hung on a stopped ring";
    EXPECT_EQ(f.get(), SMR_STOPPED);
  }
  ASSERT_EQ(consumer.wait_for(10s), std::future_status::ready) << "a consumer hung on a stopped ring";
  EXPECT_EQ(consumer.get(), 0);
  uint64_t pos = 0;
  EXPECT_EQ(smr_try_post(ring.get(), p.src(9), p.dst(9), 1, 9, &pos), SMR_STOPPED);
  EXPECT_EQ(ring.get()->ctrl->tail.value, 4u) << "nothing was posted after the stop";
}

TEST(SmRing, StopMidRunLeavesEveryCompletedCopyWholeAndCounted) {
  constexpr unsigned kProducers = 3, kConsumers = 2;
  constexpr uint64_t kEach = 200000;
  HostRing ring(32);
  Payloads p(kProducers * kEach);
  std::vector<Consumer> consumers(kConsumers);
  Crew crew(ring.get());
  for (unsigned c = 0; c < kConsumers; ++c) crew.add([&, c] { consumers[c].run(ring.get(), c, 4, p); });
  std::vector<std::vector<uint64_t>> posted(kProducers);
  std::vector<std::future<uint64_t>> producers;
  for (unsigned w = 0; w < kProducers; ++w)
    producers.push_back(std::async(std::launch::async, [&, w] {
      uint64_t n = 0, pos = 0;
      for (uint64_t i = w * kEach; i < (w + 1) * kEach; ++i, ++n)
        if (smr_post(ring.get(), p.src(i), p.dst(i), Payloads::len(i), i, &pos) != SMR_POSTED) break;
      return n;
    }));
  Crew stop_on_exit(ring.get());
  while (smr_done_total(ring.get()) < 1000) std::this_thread::yield();
  smr_stop(ring.get());
  uint64_t posted_total = 0;
  for (auto& f : producers) {
    ASSERT_EQ(f.wait_for(10s), std::future_status::ready) << "a producer hung on a stopped ring";
    posted_total += f.get();
  }
  crew.stop_and_join();
  EXPECT_LT(posted_total, kProducers * kEach) << "the stop came mid-run";
  EXPECT_EQ(ring.get()->ctrl->tail.value, posted_total);
  uint64_t consumed = 0;
  for (unsigned c = 0; c < kConsumers; ++c) {
    EXPECT_EQ(ring.get()->ctrl->done[c].value, consumers[c].ids.size());
    consumed += consumers[c].ids.size();
    for (uint64_t id : consumers[c].ids) ASSERT_TRUE(p.copied(id));
  }
  EXPECT_LE(consumed, posted_total);
  EXPECT_GE(consumed + 32, posted_total) << "at most a ring's worth is left unconsumed";
  uint64_t done_positions = 0;
  for (uint64_t pos = 0; pos < posted_total; ++pos) done_positions += smr_is_done(ring.get(), pos);
  EXPECT_EQ(done_positions, consumed) << "the slots' state and the counters agree";
  for (uint64_t i = 0; i < p.count(); ++i) ASSERT_LE(p.seen(i).load(), 1) << "descriptor " << i << " doubled";
}

TEST(SmRing, WrapsAroundManyTimesWithoutLosingOrder) {
  HostRing ring(4);
  Payloads p(100000);  // 25000 laps of a 4-slot ring
  Consumer c;
  Crew crew(ring.get());
  crew.add([&] { c.run(ring.get(), 5, 2, p); });
  post_range(ring.get(), p, 0, p.count(), nullptr);
  ASSERT_TRUE(wait_done(ring.get(), p.count()));
  crew.stop_and_join();
  ASSERT_EQ(c.ids.size(), p.count());
  for (uint64_t i = 0; i < p.count(); ++i) {
    ASSERT_EQ(c.ids[i], i);
    ASSERT_TRUE(p.copied(i));
    ASSERT_TRUE(smr_is_done(ring.get(), i));
  }
  EXPECT_EQ(ring.get()->ctrl->done[5].value, p.count());
  EXPECT_EQ(smr_done_total(ring.get()), p.count());
}

}  // namespace
