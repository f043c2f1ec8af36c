#pragma once
// What both sides hold for the length of one client's run: the transport domain, the memory
// they registered and one endpoint per thread; plus the wire helpers for exchanging them.
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/spec.hh"
#include "transport/registry.hh"

namespace rb::bench {

struct Session {
  std::unique_ptr<transport::Domain> domain;
  std::unique_ptr<transport::HostMemory> memory;
  std::unique_ptr<transport::MemoryRegion> mr;
  std::vector<std::unique_ptr<transport::Endpoint>> eps;  // destroyed before mr and domain
  ~Session() {
    eps.clear();
    mr.reset();
  }
};

// Opens the transport named by the spec, checks the spec against its capabilities, registers
// `bytes` of memory and opens one endpoint per thread.
Result<std::unique_ptr<Session>> open_session(const RunSpec& s, const transport::TransportOptions& topt, uint64_t bytes,
                                              uint32_t rx_slots);

std::string to_hex(const std::vector<uint8_t>& b);
Result<std::vector<uint8_t>> from_hex(const std::string& s);
nlohmann::json region_json(const transport::RemoteRegion& r);
transport::RemoteRegion region_from_json(const nlohmann::json& j);
nlohmann::json info_json(const transport::DomainInfo& i);
nlohmann::json endpoint_addresses(const Session& s);
Status connect_endpoints(Session& s, const nlohmann::json& addrs, const transport::RemoteRegion& peer_region);
// Receives rx_slots needed by the server for send phases of this spec.
uint32_t rx_slots_for(const RunSpec& s, uint64_t size, const transport::Caps& caps);

}  // namespace rb::bench
