#include "transport/vrdma/vrdma_memory.hh"

#include <algorithm>

#include <fmt/format.h>

namespace rb::transport::vrdma {
namespace {

constexpr unsigned kAllAccess = VRDMA_ACCESS_LOCAL_WRITE | VRDMA_ACCESS_REMOTE_WRITE | VRDMA_ACCESS_REMOTE_READ |
                                VRDMA_ACCESS_REMOTE_ATOMIC;

class VrdmaMemory final : public HostMemory {
 public:
  VrdmaMemory(vrdma_mr* mr, std::shared_ptr<Regions> regions) : mr_(mr), regions_(std::move(regions)) {
    regions_->add(mr_);
  }
  ~VrdmaMemory() override {
    regions_->remove(mr_);
    vrdma_dereg_mr(mr_);
  }
  uint8_t* data() const override { return static_cast<uint8_t*>(mr_->addr); }
  size_t size() const override { return mr_->length; }

 private:
  vrdma_mr* mr_;
  std::shared_ptr<Regions> regions_;
};

// A range of an allocated region: the region's keys, this range's address. Remote addresses
// are the owner's virtual addresses, as in verbs.
class VrdmaMr final : public MemoryRegion {
 public:
  VrdmaMr(vrdma_mr* mr, void* addr, size_t len, bool owns = false) : mr_(mr), addr_(addr), len_(len), owns_(owns) {}
  ~VrdmaMr() override {
    if (owns_) vrdma_dereg_mr(mr_);
  }
  void* addr() const override { return addr_; }
  size_t len() const override { return len_; }
  void* desc() const override { return mr_; }
  RemoteRegion remote() const override { return {reinterpret_cast<uint64_t>(addr_), mr_->rkey, len_, {}}; }

 private:
  vrdma_mr* mr_;
  void* addr_;
  size_t len_;
  bool owns_;  // registered here (vrdma_reg_mr), not a range of an allocation
};

}  // namespace

void Regions::add(vrdma_mr* mr) {
  std::lock_guard lk(mu_);
  list_.push_back(mr);
}

void Regions::remove(vrdma_mr* mr) {
  std::lock_guard lk(mu_);
  list_.erase(std::remove(list_.begin(), list_.end(), mr), list_.end());
}

vrdma_mr* Regions::covering(const void* addr, size_t len) const {
  std::lock_guard lk(mu_);
  auto* p = static_cast<const uint8_t*>(addr);
  for (vrdma_mr* mr : list_) {
    auto* base = static_cast<const uint8_t*>(mr->addr);
    if (p >= base && len <= mr->length && size_t(p - base) <= mr->length - len) return mr;
  }
  return nullptr;
}

Result<std::unique_ptr<HostMemory>> allocate(vrdma_pd* pd, std::shared_ptr<Regions> regions, size_t len) {
  vrdma_mr* mr = vrdma_alloc_mr(pd, len, kAllAccess);
  if (!mr) return Status(Errc::unavailable, fmt::format("vrdma: a region of {} B: {}", len, vrdma_last_error()));
  return std::unique_ptr<HostMemory>(new VrdmaMemory(mr, std::move(regions)));
}

Result<std::unique_ptr<MemoryRegion>> register_range(vrdma_pd* pd, const Regions& regions, void* addr, size_t len) {
  if (vrdma_mr* mr = regions.covering(addr, len)) return std::unique_ptr<MemoryRegion>(new VrdmaMr(mr, addr, len));
  // Memory of the caller's: registered as it is (page aligned), its pages made shared.
  vrdma_mr* mr = vrdma_reg_mr(pd, addr, len, kAllAccess);
  if (!mr) return Status(Errc::unavailable, fmt::format("vrdma: registering {} B at {}: {}", len, addr, vrdma_last_error()));
  return std::unique_ptr<MemoryRegion>(new VrdmaMr(mr, addr, len, true));
}

}  // namespace rb::transport::vrdma
