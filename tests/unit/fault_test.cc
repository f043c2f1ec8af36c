// The fault wrapper over the in-process transport: each kind does exactly its damage to the nth
// op of its kind on an endpoint, and nothing to the ops before or after it.
#include <gtest/gtest.h>

#include <vector>

#include "fault/faulty.hh"
#include "registry/registry.hh"

namespace rb::transport::fault {
namespace {

constexpr uint32_t kLen = 256;
constexpr size_t kRegion = 1 << 16;

struct Side {
  std::unique_ptr<Domain> dom;
  std::unique_ptr<HostMemory> mem;
  std::unique_ptr<MemoryRegion> mr;
  std::unique_ptr<Endpoint> ep;
  uint8_t* at(uint64_t off) const { return mem->data() + off; }
};

uint8_t byte_of(uint64_t i) { return uint8_t(i * 31 + 7); }

// Side a has the plan; b is a plain inproc peer. a's memory holds a known pattern, b's is zero.
class Faulty : public ::testing::Test {
 protected:
  void open(const FaultPlan& plan) {
    for (Side* s : {&a_, &b_}) {
      auto d = open_selected({"inproc", "", "", {}}, {"", "127.0.0.1"}, Use::test);
      ASSERT_TRUE(d.is_ok()) << d.status().message();
      s->dom = s == &a_ ? with_faults(std::move(d.value()), plan) : std::move(d.value());
      s->mem = std::move(s->dom->allocate(kRegion).value());
      s->mr = std::move(s->dom->register_memory(s->mem->data(), kRegion).value());
      EndpointOptions eo;
      eo.depth = 64;
      eo.rx_slots = 16;
      eo.selective = true;
      s->ep = std::move(s->dom->open_endpoint(eo).value());
    }
    ASSERT_TRUE(a_.ep->connect(b_.ep->address()).is_ok());
    ASSERT_TRUE(b_.ep->connect(a_.ep->address()).is_ok());
    ASSERT_TRUE(a_.ep->set_remote(b_.mr->remote()).is_ok());
    ASSERT_TRUE(b_.ep->set_remote(a_.mr->remote()).is_ok());
    for (size_t i = 0; i < kRegion; ++i) *a_.at(i) = byte_of(i);
  }

  // Op i (0-based) of a run of `n`: its own local and remote offsets, 1 KiB apart.
  WorkRequest op(Op o, uint64_t i, uint8_t flags = wr_flag::signal) {
    return {o, flags, kLen, a_.mr.get(), i * 1024, i * 1024, 100 + i};
  }
  int post(Side& s, std::vector<WorkRequest> wrs) { return s.ep->post(wrs); }
  std::vector<Completion> drain(Side& s) {
    std::vector<Completion> got;
    Completion c[16];
    for (int n; (n = s.ep->poll(c)) > 0;) got.insert(got.end(), c, c + n);
    return got;
  }
  void post_receives(int n) {
    for (int i = 0; i < n; ++i) {
      WorkRequest r{Op::recv, wr_flag::signal, kLen, b_.mr.get(), uint64_t(i) * 1024, 0, 200 + uint64_t(i)};
      ASSERT_EQ(post(b_, {r}), 1);
    }
  }
  // Whether b's bytes [off, off+len) are a's bytes from `src`.
  bool b_holds(uint64_t off, uint64_t src, uint64_t len = kLen) {
    for (uint64_t i = 0; i < len; ++i)
      if (*b_.at(off + i) != byte_of(src + i)) return false;
    return true;
  }
  bool b_zero(uint64_t off, uint64_t len = kLen) {
    for (uint64_t i = 0; i < len; ++i)
      if (*b_.at(off + i)) return false;
    return true;
  }
  void expect_completions(const std::vector<Completion>& got, Op o, std::vector<uint64_t> ids) {
    ASSERT_EQ(got.size(), ids.size());
    for (size_t i = 0; i < ids.size(); ++i) {
      EXPECT_EQ(got[i].wr_id, ids[i]);
      EXPECT_EQ(got[i].op, o);
      EXPECT_EQ(got[i].len, kLen) << "the initiator sees the length it asked for";
      EXPECT_TRUE(got[i].ok());
    }
  }

  Side a_, b_;
};

TEST_F(Faulty, CorruptWriteFlipsTheSourceOfTheNthWriteOnly) {
  open({Kind::corrupt, Op::write, 2});
  ASSERT_EQ(post(a_, {op(Op::write, 0), op(Op::write, 1), op(Op::write, 2)}), 3);
  expect_completions(drain(a_), Op::write, {100, 101, 102});
  EXPECT_TRUE(b_holds(0, 0) && b_holds(2048, 2048));
  EXPECT_EQ(*b_.at(1024), uint8_t(~byte_of(1024)));
  EXPECT_TRUE(b_holds(1025, 1025, kLen - 1));
}

TEST_F(Faulty, CountsOnlyOpsOfItsKindAndFindsTheNthInsideABatch) {
  open({Kind::corrupt, Op::write, 2});
  ASSERT_EQ(post(a_, {op(Op::read, 0), op(Op::write, 1), op(Op::read, 3), op(Op::write, 2), op(Op::write, 4)}), 5);
  EXPECT_EQ(drain(a_).size(), 5u);
  EXPECT_TRUE(b_holds(1024, 1024) && b_holds(4096, 4096));
  EXPECT_EQ(*b_.at(2048), uint8_t(~byte_of(2048)));
  for (uint64_t k = 0; k < kLen; ++k)  // the reads brought b's zeros back, none of them flipped
    ASSERT_TRUE(*a_.at(k) == 0 && *a_.at(3072 + k) == 0) << k;
}

TEST_F(Faulty, CorruptReadFlipsTheDestinationWhenItsCompletionIsPolled) {
  open({Kind::corrupt, Op::read, 2});
  for (uint64_t i = 0; i < kRegion; ++i) *b_.at(i) = byte_of(i + 7);
  for (uint64_t i = 0; i < 3; ++i) ASSERT_EQ(post(a_, {op(Op::read, i)}), 1);
  EXPECT_EQ(*a_.at(1024), byte_of(1024 + 7)) << "landed intact; damaged only at the poll";
  expect_completions(drain(a_), Op::read, {100, 101, 102});
  for (uint64_t i : {0, 1, 2})
    for (uint64_t k = 0; k < kLen; ++k) {
      uint8_t want = byte_of(i * 1024 + k + 7);
      EXPECT_EQ(*a_.at(i * 1024 + k), i == 1 && k == 0 ? uint8_t(~want) : want) << i << " " << k;
    }
}

TEST_F(Faulty, CorruptSendFlipsOneByteOfTheNthMessage) {
  open({Kind::corrupt, Op::send, 2});
  post_receives(3);
  ASSERT_EQ(post(a_, {op(Op::send, 0), op(Op::send, 1), op(Op::send, 2)}), 3);
  expect_completions(drain(a_), Op::send, {100, 101, 102});
  EXPECT_TRUE(b_holds(0, 0) && b_holds(2048, 2048));
  EXPECT_EQ(*b_.at(1024), uint8_t(~byte_of(1024)));
}

TEST_F(Faulty, ACorruptedPostThatIsRefusedStaysCorruptedWhenRetried) {
  open({Kind::corrupt, Op::send, 1});
  EXPECT_EQ(post(a_, {op(Op::send, 0)}), 0) << "inproc is busy without a posted receive";
  post_receives(1);
  ASSERT_EQ(post(a_, {op(Op::send, 0)}), 1);
  EXPECT_EQ(*b_.at(0), uint8_t(~byte_of(0)));
}

TEST_F(Faulty, MisplaceMovesTheNthWriteOneGranuleOn) {
  open({Kind::misplace, Op::write, 2});
  ASSERT_EQ(post(a_, {op(Op::write, 0), op(Op::write, 1), op(Op::write, 2)}), 3);
  expect_completions(drain(a_), Op::write, {100, 101, 102});
  EXPECT_TRUE(b_holds(0, 0) && b_holds(2048, 2048));
  EXPECT_TRUE(b_zero(1024, 64));
  EXPECT_TRUE(b_holds(1024 + 64, 1024));
}

TEST_F(Faulty, MisplaceMovesBackAtTheEndOfTheRegion) {
  open({Kind::misplace, Op::write, 1});
  WorkRequest last{Op::write, wr_flag::signal, kLen, a_.mr.get(), 0, kRegion - kLen, 1};
  ASSERT_EQ(post(a_, {last}), 1);
  expect_completions(drain(a_), Op::write, {1});
  EXPECT_TRUE(b_holds(kRegion - kLen - 64, 0));
  EXPECT_TRUE(b_zero(kRegion - 64, 64));
}

TEST_F(Faulty, MisplaceReadsFromOneGranuleOn) {
  open({Kind::misplace, Op::read, 1});
  for (uint64_t i = 0; i < kRegion; ++i) *b_.at(i) = byte_of(i + 7);
  ASSERT_EQ(post(a_, {op(Op::read, 0), op(Op::read, 1)}), 2);
  expect_completions(drain(a_), Op::read, {100, 101});
  for (uint64_t k = 0; k < kLen; ++k) {
    EXPECT_EQ(*a_.at(k), byte_of(64 + k + 7));
    EXPECT_EQ(*a_.at(1024 + k), byte_of(1024 + k + 7));
  }
}

TEST_F(Faulty, DropSkipsTheNthWriteButCompletesItWithSuccess) {
  open({Kind::drop, Op::write, 2});
  ASSERT_EQ(post(a_, {op(Op::write, 0), op(Op::write, 1), op(Op::write, 2)}), 3);
  auto got = drain(a_);
  ASSERT_EQ(got.size(), 3u);
  std::vector<uint64_t> ids;
  for (auto& c : got) ids.push_back(c.wr_id);
  EXPECT_EQ(ids, (std::vector<uint64_t>{101, 100, 102})) << "the owed completion comes first";
  EXPECT_TRUE(b_holds(0, 0) && b_holds(2048, 2048));
  EXPECT_TRUE(b_zero(1024));
}

TEST_F(Faulty, DropOfAnUnsignaledOpAddsNoCompletion) {
  open({Kind::drop, Op::send, 1});
  post_receives(2);
  ASSERT_EQ(post(a_, {op(Op::send, 0, 0), op(Op::send, 1)}), 2);
  expect_completions(drain(a_), Op::send, {101});
  auto arrived = drain(b_);
  ASSERT_EQ(arrived.size(), 1u);
  EXPECT_TRUE(b_holds(0, 1024)) << "only the second message arrived, in the first receive";
}

TEST_F(Faulty, DuplicateSendsTheNthMessageTwiceWithOneCompletion) {
  open({Kind::duplicate, Op::send, 2});
  post_receives(4);
  ASSERT_EQ(post(a_, {op(Op::send, 0), op(Op::send, 1), op(Op::send, 2)}), 3);
  expect_completions(drain(a_), Op::send, {100, 101, 102});
  EXPECT_EQ(drain(b_).size(), 4u);
  EXPECT_TRUE(b_holds(0, 0) && b_holds(1024, 1024) && b_holds(2048, 1024) && b_holds(3072, 2048));
}

TEST_F(Faulty, DuplicateWhoseOriginalIsRefusedPostsItOnRetry) {
  open({Kind::duplicate, Op::send, 1});
  post_receives(1);
  EXPECT_EQ(post(a_, {op(Op::send, 0)}), 0) << "the copy took the only receive";
  post_receives(1);
  ASSERT_EQ(post(a_, {op(Op::send, 0)}), 1);
  expect_completions(drain(a_), Op::send, {100});
  EXPECT_EQ(drain(b_).size(), 2u);
}

TEST_F(Faulty, DuplicateWriteLandsTheSameBytesTwice) {
  open({Kind::duplicate, Op::write, 1});
  ASSERT_EQ(post(a_, {op(Op::write, 0)}), 1);
  expect_completions(drain(a_), Op::write, {100});
  EXPECT_TRUE(b_holds(0, 0));
}

TEST_F(Faulty, TruncateSendsOneByteLessAndReportsTheFullLength) {
  open({Kind::truncate, Op::send, 2});
  post_receives(3);
  ASSERT_EQ(post(a_, {op(Op::send, 0), op(Op::send, 1), op(Op::send, 2)}), 3);
  expect_completions(drain(a_), Op::send, {100, 101, 102});
  auto arrived = drain(b_);
  ASSERT_EQ(arrived.size(), 3u);
  EXPECT_EQ(arrived[0].len, kLen);
  EXPECT_EQ(arrived[1].len, kLen - 1);
  EXPECT_EQ(arrived[2].len, kLen);
}

TEST_F(Faulty, TruncateWriteLeavesItsLastByteUnwritten) {
  open({Kind::truncate, Op::write, 1});
  ASSERT_EQ(post(a_, {op(Op::write, 0), op(Op::write, 1)}), 2);
  expect_completions(drain(a_), Op::write, {100, 101});
  EXPECT_TRUE(b_holds(0, 0, kLen - 1) && b_zero(kLen - 1, 1));
  EXPECT_TRUE(b_holds(1024, 1024));
}

TEST_F(Faulty, OnlyTheFirstNthOpIsDamagedOnEachEndpoint) {
  open({Kind::corrupt, Op::write, 1});
  for (uint64_t i = 0; i < 4; ++i) ASSERT_EQ(post(a_, {op(Op::write, i)}), 1);
  EXPECT_EQ(*b_.at(0), uint8_t(~byte_of(0)));
  for (uint64_t i = 1; i < 4; ++i) EXPECT_TRUE(b_holds(i * 1024, i * 1024));
}

}  // namespace
}  // namespace rb::transport::fault
