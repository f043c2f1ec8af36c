#include "transport/transport.hh"

#include <atomic>
#include <cstring>
#include <utility>

#include "core/buffer.hh"

namespace rb::transport {

const char* op_name(Op op) {
  switch (op) {
    case Op::write: return "write";
    case Op::read: return "read";
    case Op::send: return "send";
    case Op::recv: return "recv";
    case Op::write_imm: return "write-imm";
    case Op::send_imm: return "send-imm";
    case Op::fadd: return "fadd";
    case Op::cswap: return "cswap";
    case Op::remote_write: return "remote-write";
  }
  return "?";
}

const char* wc_status_name(WcStatus s) {
  switch (s) {
    case WcStatus::success: return "success";
    case WcStatus::local_length: return "local length error";
    case WcStatus::local_protection: return "local protection error";
    case WcStatus::remote_access: return "remote access error";
    case WcStatus::remote_operation: return "remote operation error";
    case WcStatus::flushed: return "flushed";
    case WcStatus::retry_exceeded: return "retry exceeded";
    case WcStatus::rnr: return "receiver not ready";
    case WcStatus::fatal: return "fatal error";
  }
  return "?";
}

std::string caps_flags(const Caps& c) {
  std::pair<bool, const char*> flags[] = {
      {c.write, "write"}, {c.read, "read"}, {c.send, "send"}, {c.target_progress, "target_progress"},
      {c.virtual_addressing, "virtual_addressing"}, {c.selective_completion, "selective_completion"},
      {c.peer_sees_writes, "peer_sees_writes"}, {c.peer_memory_readable, "peer_memory_readable"},
      {c.peer_memory_at_quiesce, "peer_memory_at_quiesce"},
      {c.checks_bounds, "checks_bounds"}, {c.checks_keys, "checks_keys"}, {c.engine_thread, "engine_thread"},
      {c.atomics, "atomics"}, {c.imm_data, "imm_data"}, {c.can_wait, "can_wait"}};
  std::string out;
  for (auto [on, name] : flags)
    if (on) out += (out.empty() ? "" : " ") + std::string(name);
  return out;
}

namespace {
class HeapMemory final : public HostMemory {
 public:
  explicit HeapMemory(size_t len) : buf_(len) {}
  uint8_t* data() const override { return buf_.data(); }
  size_t size() const override { return buf_.size(); }
  bool ok() const { return bool(buf_); }

 private:
  AlignedBuffer buf_;
};
}  // namespace

void copy_last_byte_last(void* dst, const void* src, size_t len) {
  if (len == 0) return;
  auto* d = static_cast<uint8_t*>(dst);
  const auto* s = static_cast<const uint8_t*>(src);
  std::memcpy(d, s, len - 1);
  std::atomic_ref<uint8_t>(d[len - 1]).store(s[len - 1], std::memory_order_release);
}

std::unique_ptr<HostMemory> allocate_heap(size_t len) {
  auto m = std::make_unique<HeapMemory>(len);
  if (!m->ok()) return nullptr;
  return m;
}

}  // namespace rb::transport
