// Moving a request's bytes (vrdma/proto/copy.hh): every length lands whole, nothing past it is
// touched, across the sizes where copy_bytes changes how it moves them.
#include <gtest/gtest.h>

#include <vector>

#include "vrdma/proto/copy.hh"

namespace rb::vrdma {
namespace {

TEST(VrdmaCopy, EveryLengthLandsWholeAndNothingBeyond) {
  for (uint64_t n = 1; n <= 200; ++n) {
    for (uint64_t shift : {0u, 1u, 7u}) {  // unaligned ends too
      std::vector<uint8_t> from(n + shift), to(n + 16, 0xEE);
      for (uint64_t k = 0; k < from.size(); ++k) from[k] = uint8_t(k * 31 + n);
      copy_one(to.data(), from.data() + shift, n);
      for (uint64_t k = 0; k < n; ++k) ASSERT_EQ(to[k], from[shift + k]) << "n=" << n << " shift=" << shift << " at " << k;
      for (uint64_t k = n; k < to.size(); ++k) ASSERT_EQ(to[k], 0xEE) << "n=" << n << " wrote past the end at " << k;
    }
  }
}

TEST(VrdmaCopy, PiecesGatherIntoOneAndScatterBack) {
  std::vector<uint8_t> a(40), b(23), whole(63), back_a(40), back_b(23);
  for (size_t k = 0; k < a.size(); ++k) a[k] = uint8_t(k + 1);
  for (size_t k = 0; k < b.size(); ++k) b[k] = uint8_t(200 - k);
  Piece from[] = {{a.data(), a.size()}, {b.data(), b.size()}}, one{whole.data(), whole.size()};
  copy_pieces(from, 2, &one, 1);
  Piece to[] = {{back_a.data(), back_a.size()}, {back_b.data(), back_b.size()}};
  copy_pieces(&one, 1, to, 2);
  EXPECT_EQ(back_a, a);
  EXPECT_EQ(back_b, b);
}

}  // namespace
}  // namespace rb::vrdma
