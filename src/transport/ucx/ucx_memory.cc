#include "transport/ucx/ucx_memory.hh"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "transport/ucx/ucx_status.hh"

namespace rb::transport::ucx {

void Allocations::add(void* addr, size_t len, ucp_mem_h memh) {
  std::lock_guard g(mu_);
  entries_.push_back({static_cast<const uint8_t*>(addr), len, memh});
}

void Allocations::remove(ucp_mem_h memh) {
  std::lock_guard g(mu_);
  std::erase_if(entries_, [&](const Entry& e) { return e.memh == memh; });
}

ucp_mem_h Allocations::covering(const void* addr, size_t len) const {
  auto* p = static_cast<const uint8_t*>(addr);
  std::lock_guard g(mu_);
  for (const auto& e : entries_)
    if (p >= e.addr && len <= e.len && size_t(p - e.addr) <= e.len - len) return e.memh;
  return nullptr;
}

namespace {

// A ucp_mem_h, unmapped when the last user lets go of it (unless it is borrowed).
class MemHandle {
 public:
  MemHandle(std::shared_ptr<Context> ctx, ucp_mem_h h, bool owned) : ctx_(std::move(ctx)), h_(h), owned_(owned) {}
  ~MemHandle() {
    if (owned_) ucp_mem_unmap(ctx_->get(), h_);
  }
  MemHandle(const MemHandle&) = delete;
  MemHandle& operator=(const MemHandle&) = delete;
  ucp_mem_h get() const { return h_; }
  ucp_context_h context() const { return ctx_->get(); }

 private:
  std::shared_ptr<Context> ctx_;
  ucp_mem_h h_;
  bool owned_;
};

class UcxMemory final : public HostMemory {
 public:
  UcxMemory(std::shared_ptr<Context> ctx, std::shared_ptr<Allocations> allocs, ucp_mem_h h, uint8_t* addr, size_t len)
      : handle_(std::move(ctx), h, true), allocs_(std::move(allocs)), addr_(addr), len_(len) {
    allocs_->add(addr_, len_, h);
  }
  ~UcxMemory() override { allocs_->remove(handle_.get()); }
  uint8_t* data() const override { return addr_; }
  size_t size() const override { return len_; }

 private:
  MemHandle handle_;
  std::shared_ptr<Allocations> allocs_;
  uint8_t* addr_;
  size_t len_;
};

class UcxMr final : public MemoryRegion {
 public:
  UcxMr(std::unique_ptr<MemHandle> h, void* addr, size_t len, std::vector<uint8_t> rkey)
      : h_(std::move(h)), addr_(addr), len_(len), rkey_(std::move(rkey)) {}
  void* addr() const override { return addr_; }
  size_t len() const override { return len_; }
  void* desc() const override { return h_->get(); }
  // Remote addresses are virtual addresses; the peer unpacks the key from `handle`.
  RemoteRegion remote() const override { return {reinterpret_cast<uint64_t>(addr_), 0, len_, rkey_}; }

 private:
  std::unique_ptr<MemHandle> h_;
  void* addr_;
  size_t len_;
  std::vector<uint8_t> rkey_;
};

Result<std::vector<uint8_t>> packed_rkey(ucp_context_h ctx, ucp_mem_h memh) {
  void* buf = nullptr;
  size_t size = 0;
  ucs_status_t st = ucp_rkey_pack(ctx, memh, &buf, &size);
  if (st != UCS_OK) return Status(Errc::io, "ucp_rkey_pack: " + ucx_error(st));
  auto* p = static_cast<const uint8_t*>(buf);
  std::vector<uint8_t> out(p, p + size);
  ucp_rkey_buffer_release(buf);
  return out;
}

}  // namespace

Result<std::unique_ptr<HostMemory>> allocate(std::shared_ptr<Context> ctx, std::shared_ptr<Allocations> allocs, size_t len) {
  ucp_mem_map_params_t p{};
  p.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS;
  p.address = nullptr;
  p.length = std::max<size_t>(len, 1);
  p.flags = UCP_MEM_MAP_ALLOCATE;
  ucp_mem_h h = nullptr;
  ucs_status_t st = ucp_mem_map(ctx->get(), &p, &h);
  if (st != UCS_OK) return Status(Errc::unavailable, fmt::format("ucp_mem_map of {} B: {}", len, ucx_error(st)));
  ucp_mem_attr_t attr{};
  attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS;
  st = ucp_mem_query(h, &attr);
  if (st != UCS_OK) {
    ucp_mem_unmap(ctx->get(), h);
    return Status(Errc::io, "ucp_mem_query: " + ucx_error(st));
  }
  auto* addr = static_cast<uint8_t*>(attr.address);
  std::memset(addr, 0, len);  // the contract's memory is zeroed; a heap fallback of UCP's is not
  return std::unique_ptr<HostMemory>(new UcxMemory(std::move(ctx), std::move(allocs), h, addr, len));
}

Result<std::unique_ptr<MemoryRegion>> register_region(std::shared_ptr<Context> ctx, const Allocations& allocs, void* addr,
                                                      size_t len) {
  std::unique_ptr<MemHandle> handle;
  if (ucp_mem_h mine = allocs.covering(addr, len)) {
    handle = std::make_unique<MemHandle>(ctx, mine, false);
  } else {
    ucp_mem_map_params_t p{};
    p.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    p.address = addr;
    p.length = len;
    ucp_mem_h h = nullptr;
    ucs_status_t st = ucp_mem_map(ctx->get(), &p, &h);
    if (st != UCS_OK) return Status(Errc::io, fmt::format("ucp_mem_map of {} B at {}: {}", len, addr, ucx_error(st)));
    handle = std::make_unique<MemHandle>(ctx, h, true);
  }
  auto rkey = packed_rkey(ctx->get(), handle->get());
  if (!rkey) return rkey.status();
  return std::unique_ptr<MemoryRegion>(new UcxMr(std::move(handle), addr, len, std::move(rkey.value())));
}

}  // namespace rb::transport::ucx
