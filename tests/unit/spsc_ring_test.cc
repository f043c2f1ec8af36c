// The shared SPSC ring: queue behaviour in one process, a header check that refuses what is not a
// ring of the expected layout, and the ring used across two processes that map one memfd at
// different addresses.
#include "core/spsc_ring.hh"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "core/buffer.hh"
#include "core/shm.hh"
#include "forked_child.hh"

namespace rb {
namespace {

std::span<uint8_t> span_of(const AlignedBuffer& b) { return {b.data(), b.size()}; }

TEST(SpscRing, PopsInPushOrderUntilEmpty) {
  AlignedBuffer mem(SpscRing<int>::bytes_for(8));
  auto r = SpscRing<int>::create(span_of(mem), 8);
  ASSERT_TRUE(bool(r)) << r.status().message();
  int v = -1;
  EXPECT_TRUE(r->empty());
  EXPECT_FALSE(r->pop(v));
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(r->push(i * 3));
  EXPECT_EQ(r->size(), 5u);
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(r->pop(v));
    EXPECT_EQ(v, i * 3);
  }
  EXPECT_FALSE(r->pop(v));
  EXPECT_TRUE(r->empty());
}

TEST(SpscRing, RefusesAPushWhenFull) {
  AlignedBuffer mem(SpscRing<int>::bytes_for(5));
  auto r = SpscRing<int>::create(span_of(mem), 5);
  ASSERT_TRUE(bool(r));
  ASSERT_EQ(r->capacity(), 8u);  // rounded up to a power of two
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(r->push(i));
  EXPECT_FALSE(r->push(8));
  EXPECT_EQ(r->size(), 8u);
  int v;
  ASSERT_TRUE(r->pop(v));
  EXPECT_EQ(v, 0);
  EXPECT_TRUE(r->push(8));  // one slot freed, one taken
  EXPECT_FALSE(r->push(9));
}

TEST(SpscRing, KeepsOrderAcrossManyWraparounds) {
  AlignedBuffer mem(SpscRing<uint64_t>::bytes_for(4));
  auto r = SpscRing<uint64_t>::create(span_of(mem), 4);
  ASSERT_TRUE(bool(r));
  uint64_t in = 0, out = 0, v;
  for (int round = 0; round < 1000; ++round) {
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(r->push(in++));
    for (int i = 0; i < 3; ++i) {
      ASSERT_TRUE(r->pop(v));
      ASSERT_EQ(v, out++);
    }
  }
  EXPECT_TRUE(r->empty());
}

TEST(SpscRing, LocalRingWorksBetweenThreads) {
  LocalSpscRing<uint64_t> r(64);
  constexpr uint64_t n = 200000;
  std::thread producer([&] {
    for (uint64_t i = 0; i < n; ++i)
      while (!r.push(i)) std::this_thread::yield();
  });
  uint64_t expect = 0, v, wrong = 0;
  auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (expect < n && std::chrono::steady_clock::now() < give_up) {
    if (!r.pop(v)) continue;
    wrong += v != expect;
    ++expect;
  }
  producer.join();  // it has pushed all: nothing popped is what was lost
  EXPECT_EQ(expect, n) << "lost items";
  EXPECT_EQ(wrong, 0u) << "reordered items";
  EXPECT_TRUE(r.empty());
}

TEST(SpscRing, CreateRefusesMemoryThatCannotHoldIt) {
  AlignedBuffer mem(SpscRing<uint64_t>::bytes_for(16));
  std::span<uint8_t> all = span_of(mem);
  EXPECT_EQ(SpscRing<uint64_t>::create(all.first(SpscRing<uint64_t>::bytes_for(16) - 1), 16).status().code(),
            Errc::invalid_argument);
  EXPECT_EQ(SpscRing<uint64_t>::create(all.subspan(8), 4).status().code(), Errc::invalid_argument);  // misaligned
  EXPECT_EQ(SpscRing<uint64_t>::create(all, 0).status().code(), Errc::invalid_argument);
}

TEST(SpscRing, AttachSharesTheCreatorsRing) {
  AlignedBuffer mem(SpscRing<uint64_t>::bytes_for(16));
  auto producer = SpscRing<uint64_t>::create(span_of(mem), 16);
  ASSERT_TRUE(bool(producer));
  ASSERT_TRUE(producer->push(41));
  auto consumer = SpscRing<uint64_t>::attach(span_of(mem));
  ASSERT_TRUE(bool(consumer)) << consumer.status().message();
  EXPECT_EQ(consumer->capacity(), 16u);
  uint64_t v = 0;
  ASSERT_TRUE(consumer->pop(v));
  EXPECT_EQ(v, 41u);
  EXPECT_TRUE(producer->empty());  // the two views share head and tail
}

class SpscRingAttach : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(bool(SpscRing<uint64_t>::create(span_of(mem_), 16))); }
  SpscRingHeader& header() { return *reinterpret_cast<SpscRingHeader*>(mem_.data()); }
  Status attach() {
    auto r = SpscRing<uint64_t>::attach(span_of(mem_));
    return r ? Status{} : r.status();
  }
  AlignedBuffer mem_{SpscRing<uint64_t>::bytes_for(16)};
};

TEST_F(SpscRingAttach, AcceptsAnIntactHeader) { EXPECT_TRUE(bool(attach())) << attach().message(); }

TEST_F(SpscRingAttach, RefusesMemoryWithoutTheMagic) {
  std::memset(mem_.data(), 0, mem_.size());
  Status s = attach();
  EXPECT_EQ(s.code(), Errc::validation);
  EXPECT_NE(s.message().find("no ring"), std::string::npos) << s.message();
}

TEST_F(SpscRingAttach, RefusesAnotherLayoutVersion) {
  header().version = SpscRingHeader::kVersion + 1;
  EXPECT_EQ(attach().code(), Errc::validation);
}

TEST_F(SpscRingAttach, RefusesSlotsOfAnotherType) {
  struct Wide {
    uint64_t a, b;
  };
  auto r = SpscRing<Wide>::attach(span_of(mem_));
  ASSERT_FALSE(bool(r));
  EXPECT_EQ(r.status().code(), Errc::validation);
}

TEST_F(SpscRingAttach, RefusesACapacityThatIsNotAPowerOfTwo) {
  header().capacity = 12;
  EXPECT_EQ(attach().code(), Errc::validation);
  header().capacity = 0;
  EXPECT_EQ(attach().code(), Errc::validation);
}

TEST_F(SpscRingAttach, RefusesACapacityLargerThanTheMemory) {
  header().capacity = 32;
  EXPECT_EQ(attach().code(), Errc::validation);
}

TEST_F(SpscRingAttach, RefusesMemoryTooShortForTheHeader) {
  auto r = SpscRing<uint64_t>::attach(span_of(mem_).first(sizeof(SpscRingHeader) - 1));
  ASSERT_FALSE(bool(r));
  EXPECT_EQ(r.status().code(), Errc::validation);
}

TEST_F(SpscRingAttach, RefusesIndicesFartherApartThanTheCapacity) {
  header().tail.store(17);
  EXPECT_EQ(attach().code(), Errc::validation);
}

// A slot whose halves must agree: a torn or stale slot shows as a mismatch.
struct Numbered {
  uint64_t seq, inverse;
};

enum ChildCode { kPushedAll = 0, kNoMapping = 10, kSameAddress, kNoAttach, kStuck };

int push_sequence(int fd, size_t len, const uint8_t* parents_address, uint64_t n) {
  auto map = Mapping::map(fd, len);
  if (!map) return kNoMapping;
  if (map->data() == parents_address) return kSameAddress;
  auto ring = SpscRing<Numbered>::attach(map->bytes());
  if (!ring) return kNoAttach;
  auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (uint64_t i = 0; i < n; ++i) {
    while (!ring->push({i, ~i})) {
      if (std::chrono::steady_clock::now() > give_up) return kStuck;
      std::this_thread::yield();
    }
  }
  return kPushedAll;
}

TEST(SpscRingShared, TwoProcessesAtDifferentAddressesPassEveryItemInOrder) {
  constexpr uint64_t n = 1000000;
  auto shm = SharedMemory::create("rdmabench-ring-test", SpscRing<Numbered>::bytes_for(256));
  ASSERT_TRUE(bool(shm)) << shm.status().message();
  auto ring = SpscRing<Numbered>::create(shm->bytes(), 256);
  ASSERT_TRUE(bool(ring)) << ring.status().message();

  // The child maps the memfd afresh: its ring sits at another address than ours.
  test::ForkedChild child([&] { return push_sequence(shm->fd(), shm->mapped_size(), shm->data(), n); });
  ASSERT_TRUE(child.started());

  auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  uint64_t expect = 0;
  Numbered v{};
  while (expect < n && std::chrono::steady_clock::now() < give_up) {
    if (!ring->pop(v)) {
      std::this_thread::yield();
      continue;
    }
    ASSERT_EQ(v.seq, expect) << "lost or reordered";
    ASSERT_EQ(v.inverse, ~expect) << "slot read before it was fully written";
    ++expect;
  }
  EXPECT_EQ(expect, n) << "timed out";
  EXPECT_EQ(child.wait(10), kPushedAll);
  EXPECT_FALSE(ring->pop(v)) << "more items than were pushed";
}

// The producer may be another process that writes the tail as it likes: a tail further ahead
// than the ring holds gives the consumer nothing, never slots that were not pushed.
TEST_F(SpscRingAttach, ATailPastTheCapacityGivesTheConsumerNothing) {
  auto ring = SpscRing<uint64_t>::attach(span_of(mem_));
  ASSERT_TRUE(bool(ring));
  ASSERT_TRUE(ring->push(7));
  header().tail.store(header().head.load() + (uint64_t(1) << 63));
  uint64_t v = 0;
  EXPECT_FALSE(ring->peek(v));
  EXPECT_FALSE(ring->pop(v));
  EXPECT_EQ(ring->skip(5), 0u);
  EXPECT_TRUE(ring->empty());
  EXPECT_EQ(ring->waiting(), 0u);
  EXPECT_GE(ring->size(), ring->capacity());  // to its producer it is full: nothing more goes in
  EXPECT_FALSE(ring->push(8));
  header().tail.store(header().head.load() + 1);  // back to what was pushed
  ASSERT_TRUE(ring->pop(v));
  EXPECT_EQ(v, 7u);
}

// An SRQ's ring: one producer, several consumers that claim. Every item is taken exactly once,
// whichever consumer gets it.
TEST(SpscRing, ClaimingConsumersTakeEachItemOnce) {
  AlignedBuffer mem(SpscRing<uint64_t>::bytes_for(64));
  auto ring = SpscRing<uint64_t>::create(span_of(mem), 64);
  ASSERT_TRUE(bool(ring));
  constexpr uint64_t kItems = 200000;
  std::vector<uint8_t> seen(kItems, 0);
  std::atomic<uint64_t> taken{0};
  auto consume = [&] {
    auto view = SpscRing<uint64_t>::attach(span_of(mem));
    uint64_t v;
    while (taken.load() < kItems)
      if (view->claim(v)) {
        ++seen[v];  // each index is written by the one consumer that claimed it
        taken.fetch_add(1);
      }
  };
  std::thread a(consume), b(consume);
  for (uint64_t i = 0; i < kItems;)
    if (ring->push(i)) ++i;
  a.join();
  b.join();
  EXPECT_EQ(taken.load(), kItems);
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), std::ptrdiff_t(kItems));
  EXPECT_TRUE(ring->empty());
}

}  // namespace
}  // namespace rb
