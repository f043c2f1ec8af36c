#pragma once
// QP (and SRQ) numbers that are never issued twice in a router's life. Verbs gives a QP number
// 24 bits, and programs print and parse it as six hex digits, so the number cannot simply grow
// wider. Instead the n-th number is a keyed permutation of n over the 24-bit space: numbers look
// random (an address learned from one QP says nothing about the next), no two are ever equal, and
// after 2^24 - 1 of them the router refuses further QPs rather than reuse one. A peer that still
// names a destroyed QP's number therefore names nothing, never somebody's new QP.
//
// The space is the router's, so its pace is too: besides each tenant's (TenantUsage), all
// tenants together get kBurst numbers at once, then kRate a second. However many uids churn QPs
// together, spending the space takes (2^24 - kBurst) / kRate, over two hours. That pace is shared
// fairly (take): a few uids churning together once left a well-behaved tenant's create_qp failing
// one time in three.
#include <array>
#include <cstdint>
#include <optional>

#include "vrdma/router/pace.hh"

namespace rb::vrdma {

class QpNumbers {
 public:
  static constexpr uint32_t kBits = 24;
  static constexpr uint32_t kMask = (1u << kBits) - 1;

  // Keys the permutation from the kernel's random source.
  QpNumbers();
  // With a given key (tests).
  explicit QpNumbers(const std::array<uint16_t, 4>& key) : key_(key) {}
  static constexpr double kBurst = 16384, kRate = 2000;

  // The next number, never 0 and never one issued before; nullopt once the space is spent.
  std::optional<uint32_t> next();
  // Whether a tenant, one of `tenants` that hold clients now, may have one more number. While
  // over half the router-wide burst is left, anyone may; past half, a tenant only within its
  // `share`, an equal part of the router's rate and of half its burst. All shares together never
  // drain the rest, so each tenant always gets at least its part, however the others churn.
  bool take(Pace& share, int tenants, int64_t now_ns);
  Pace pace{kBurst, kRate};  // router-wide
  uint64_t issued() const { return counter_; }

 private:
  uint32_t permute(uint32_t n) const;  // a bijection on [0, 2^24)
  std::array<uint16_t, 4> key_{};
  uint32_t counter_ = 0;
};

}  // namespace rb::vrdma
