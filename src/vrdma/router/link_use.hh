#pragma once
// What is in flight on the links to other hosts' routers: each tenant's requests and bytes, and
// the router's, all tenants together; and who may put more there. The fabric's queue to a peer
// is one for every tenant, first come first served, so a request waits behind all the bytes
// before it: held to a tenant's share alone, 40 tenants with 8 MiB each kept another's 4 KiB
// round trip waiting 109-145 ms (probe 17). The control thread's.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>

namespace rb::vrdma {

// A tenant's requests on the links and their bytes: past kTenantLinkOps or kTenantLinkBytes its
// QPs wait (16,384 fetch-adds in flight, far under the bytes, stalled another tenant for seconds:
// each is a message the peer's router carries out).
inline constexpr uint64_t kTenantLinkBytes = 8 << 20;
inline constexpr uint64_t kTenantLinkOps = 256;
// And everyone's: past these, a tenant that has something on the links waits while its part is
// over an even share. One that has nothing there may always send one request (or a request's
// next piece), so each tenant moves and the whole stays under these plus a piece a tenant.
// At the link's 1-3 GB/s, 16 MiB is 5-15 ms.
inline constexpr uint64_t kLinkBytes = 16 << 20;
inline constexpr uint64_t kLinkOps = 1024;

struct LinkUse {
  uint64_t ops = 0, bytes = 0;
  uint64_t tenants = 0;     // the router's: tenants with a request on the links
  uint64_t peak_bytes = 0;  // the router's: the most bytes on the links at once
};

// One request's part of its tenant's LinkUse and of the router's, given back when the request
// goes (answered, failed, or its QP destroyed).
class LinkCharge {
 public:
  LinkCharge() = default;
  LinkCharge(std::shared_ptr<LinkUse> tenant, std::shared_ptr<LinkUse> all)
      : of_(std::move(tenant)), all_(std::move(all)) {
    if (!of_->ops++) ++all_->tenants;
    ++all_->ops;
  }
  LinkCharge(LinkCharge&& o) noexcept : of_(std::move(o.of_)), all_(std::move(o.all_)), bytes_(o.bytes_) {}
  LinkCharge& operator=(LinkCharge&& o) noexcept {
    std::swap(of_, o.of_);
    std::swap(all_, o.all_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  LinkCharge(const LinkCharge&) = delete;
  LinkCharge& operator=(const LinkCharge&) = delete;
  ~LinkCharge() {
    if (!of_) return;
    shrink(bytes_);
    if (!--of_->ops) --all_->tenants;
    --all_->ops;
  }
  // A request cut in pieces is charged for those in flight only.
  void grow(uint64_t n) {
    bytes_ += n;
    of_->bytes += n;
    all_->bytes += n;
    all_->peak_bytes = std::max(all_->peak_bytes, all_->bytes);
  }
  void shrink(uint64_t n) {
    n = std::min(n, bytes_);
    bytes_ -= n;
    of_->bytes -= n;
    all_->bytes -= n;
  }
  const LinkUse* tenant() const { return of_.get(); }
  uint64_t bytes() const { return bytes_; }

 private:
  std::shared_ptr<LinkUse> of_, all_;
  uint64_t bytes_ = 0;
};

// Whether everyone's use leaves a tenant using `mine` room for more: yes under the router's
// bounds while its part is under an even share of them.
inline bool within_even_share(const LinkUse& mine, const LinkUse& all, uint64_t piece) {
  uint64_t n = std::max<uint64_t>(all.tenants, 1);
  return all.bytes < kLinkBytes && all.ops < kLinkOps && mine.bytes < std::max(piece, kLinkBytes / n) &&
         mine.ops < std::max<uint64_t>(4, kLinkOps / n);
}

// Whether a tenant using `mine` may send one more request (not yet charged).
inline bool room_for_request(const LinkUse& mine, const LinkUse& all, uint64_t piece) {
  if (mine.bytes >= kTenantLinkBytes || mine.ops >= kTenantLinkOps) return false;
  return !mine.ops || within_even_share(mine, all, piece);
}

// Whether it may send the next piece of a request of its already charged.
inline bool room_for_piece(const LinkUse& mine, const LinkUse& all, uint64_t piece) {
  if (mine.bytes >= kTenantLinkBytes) return false;
  return !mine.bytes || (all.bytes < kLinkBytes && mine.bytes < std::max(piece, kLinkBytes / std::max<uint64_t>(all.tenants, 1)));
}

}  // namespace rb::vrdma
