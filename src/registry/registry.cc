#include "registry/registry.hh"

#include "registry/built_transports.hh"

namespace rb::transport {

// The one list, in src/transport/CMakeLists.txt's order: --help and --list show entries so.
const std::vector<TransportEntry>& registry() {
  static const std::vector<TransportEntry> entries = {RB_BUILT_TRANSPORT_ENTRIES};
  return entries;
}

const std::vector<LeftOut>& left_out() {
  static const std::vector<LeftOut> missing = {RB_LEFT_OUT_TRANSPORTS};
  return missing;
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

const TransportEntry& default_transport() {
  for (auto& e : registry())
    if (e.is_default) return e;
  return registry().front();
}

}  // namespace rb::transport
