#pragma once
// What both sides hold for the length of one client's run: the transport domain, the memory
// they registered and one endpoint per thread; plus the wire helpers for exchanging them.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/model.hh"
#include "registry/registry.hh"

namespace rb::engine {

// One domain per rail when rails run over different NICs (--domains), else one for all. The
// memory is shared and registered in every domain; endpoint e of thread t is eps[t*ept + e] and
// sits on rail e / qps.
struct Session {
  std::vector<std::unique_ptr<transport::Domain>> domains;
  std::unique_ptr<transport::HostMemory> memory;
  std::vector<std::unique_ptr<transport::MemoryRegion>> mrs;  // one per domain
  std::vector<std::unique_ptr<transport::Endpoint>> eps;      // destroyed before mrs and domains
  int ept = 1, qps = 1;

  transport::Domain& domain() const { return *domains[0]; }
  const transport::MemoryRegion* mr() const { return mrs[0].get(); }
  size_t domain_of_endpoint(size_t e) const {
    return domains.size() == 1 ? 0 : (e % size_t(ept)) / size_t(qps);
  }
  ~Session() {
    eps.clear();
    mrs.clear();
  }
};

// Where each domain of the run opens: all rails at `whole`, or, when the run names a NIC per
// rail (--domains), rail r on the NIC nic_of_rail(r) and that NIC's address.
Result<std::vector<transport::DomainSite>> domain_sites(const RunSpec& s, const transport::DomainSite& whole,
                                                         const std::function<Result<std::string>(int rail)>& nic_of_rail);

// Opens the transport named by the spec (one domain per entry of `topts`: one, or one per rail),
// checks the spec against its capabilities, registers `bytes` of memory in every domain and opens
// rails x qps endpoints per thread. `use` says whether the test-only transports may be opened.
Result<std::unique_ptr<Session>> open_session(const RunSpec& s, const std::vector<transport::DomainSite>& sites,
                                              uint64_t bytes, uint32_t rx_slots, transport::Use use);
std::vector<std::vector<uint8_t>> endpoint_addresses(const Session& s);
std::vector<transport::RemoteRegion> regions_of(const Session& s);  // one per domain
// Connects endpoint e to the peer's endpoint e and points it at the peer's region of its rail.
Status connect_endpoints(Session& s, const std::vector<std::vector<uint8_t>>& addrs,
                         const std::vector<transport::RemoteRegion>& peer_regions);
// Receives rx_slots needed by the server for send phases of this spec.
uint32_t rx_slots_for(const RunSpec& s, uint64_t size, const transport::Caps& caps);

}  // namespace rb::engine
