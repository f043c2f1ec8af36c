#include "transport/registry.hh"

#include "transport/dma/dma_transport.hh"
#include "transport/inproc/inproc.hh"
#include "transport/ofi/ofi_transport.hh"
#include "transport/skeleton/skeleton.hh"
#include "transport/tcp/tcp_transport.hh"
#include "transport/ucx/ucx_transport.hh"
#include "transport/vrdma/vrdma_transport.hh"

namespace rb::transport {

// The one list. A new transport adds its line here; --help and --list show entries in this order.
const std::vector<TransportEntry>& registry() {
  static const std::vector<TransportEntry> entries = {
      ofi::registry_entry(),
      tcp::registry_entry(),
      dma::registry_entry(),
      ucx::registry_entry(),
      vrdma::registry_entry(),
      inproc::registry_entry(),
      skeleton::registry_entry(),
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

const TransportEntry& default_transport() {
  for (auto& e : registry())
    if (e.is_default) return e;
  return registry().front();
}

}  // namespace rb::transport
