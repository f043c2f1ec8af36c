#include "transport/ofi/ofi_memory.hh"

namespace rb::transport::ofi {
namespace {

class OfiMr final : public MemoryRegion {
 public:
  OfiMr(std::shared_ptr<Fabric> f, fid_mr* mr, void* a, size_t l, bool virt)
      : f_(std::move(f)), mr_(mr), addr_(a), len_(l), virt_(virt) {}
  ~OfiMr() override { close_fid(mr_); }
  void* addr() const override { return addr_; }
  size_t len() const override { return len_; }
  void* desc() const override { return fi_mr_desc(mr_); }
  RemoteRegion remote() const override {
    return {virt_ ? reinterpret_cast<uint64_t>(addr_) : 0, fi_mr_key(mr_), len_};
  }

 private:
  std::shared_ptr<Fabric> f_;
  fid_mr* mr_;
  void* addr_;
  size_t len_;
  bool virt_;
};

}  // namespace

std::unique_ptr<MemoryRegion> make_memory_region(std::shared_ptr<Fabric> f, fid_mr* mr, void* addr, size_t len, bool virt) {
  return std::make_unique<OfiMr>(std::move(f), mr, addr, len, virt);
}

}  // namespace rb::transport::ofi
