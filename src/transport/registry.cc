#include "transport/registry.hh"

#include "core/buffer.hh"

#include "transport/dma/dma_transport.hh"
#include "transport/loopback/loopback.hh"
#include "transport/ofi/ofi_transport.hh"
#include "transport/tcp/tcp_transport.hh"

namespace rb::transport {

const char* op_name(Op op) {
  switch (op) {
    case Op::write: return "write";
    case Op::read: return "read";
    case Op::send: return "send";
    case Op::recv: return "recv";
  }
  return "?";
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

std::unique_ptr<HostMemory> allocate_heap(size_t len) {
  auto m = std::make_unique<HeapMemory>(len);
  if (!m->ok()) return nullptr;
  return m;
}

const std::vector<TransportEntry>& registry() {
  static const std::vector<TransportEntry> entries = {
      ofi::registry_entry(),
      tcp::registry_entry(),
      dma::registry_entry(),
      loopback::registry_entry(),
  };
  return entries;
}

const TransportEntry* find_transport(const std::string& name) {
  for (auto& e : registry())
    if (e.name == name) return &e;
  return nullptr;
}

void remove_leftovers_of(int pid) {
  for (auto& e : registry())
    if (e.remove_leftovers_of) e.remove_leftovers_of(pid);
}

std::pair<std::string, std::string> split_transport(const std::string& spec) {
  auto colon = spec.find(':');
  if (colon == std::string::npos) return {spec, ""};
  return {spec.substr(0, colon), spec.substr(colon + 1)};
}

}  // namespace rb::transport
