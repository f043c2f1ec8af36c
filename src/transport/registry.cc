#include "transport/registry.hh"

#include "transport/loopback/loopback.hh"
#include "transport/ofi/ofi_transport.hh"

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

const std::vector<TransportEntry>& registry() {
  static const std::vector<TransportEntry> entries = {
      ofi::registry_entry(),
      loopback::registry_entry(),
  };
  return entries;
}

const TransportEntry* find_transport(const std::string& name) {
  for (auto& e : registry())
    if (e.name == name) return &e;
  return nullptr;
}

std::pair<std::string, std::string> split_transport(const std::string& spec) {
  auto colon = spec.find(':');
  if (colon == std::string::npos) return {spec, ""};
  return {spec.substr(0, colon), spec.substr(colon + 1)};
}

}  // namespace rb::transport
