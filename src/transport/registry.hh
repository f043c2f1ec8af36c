#pragma once
// The explicit list of transports. Each entry names itself, describes its options, opens a
// Domain and can say whether it is usable on this machine (for --list).
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "transport/transport.hh"

namespace rb::transport {

// What every transport may be told; each one documents which fields it reads.
struct TransportOptions {
  std::string provider;   // ofi: libfabric provider name ("shm", "tcp", "verbs"); empty = auto
  std::string domain;     // ofi: libfabric domain (a NIC or interface name); empty = derived
  std::string local_ip;   // the local address the out-of-band connection uses
  bool for_validation = false;
  std::map<std::string, std::string> params;  // -o KEY=VALUE, each transport validates its own
};

struct Availability {
  std::string name;        // e.g. "ofi:shm"
  bool usable = false;
  std::string detail;      // capabilities when usable, the reason when not
};

struct TransportEntry {
  std::string name;
  std::string description;
  std::string options_help;
  std::function<Result<std::unique_ptr<Domain>>(const TransportOptions&)> open;
  std::function<std::vector<Availability>()> probe;
  // Removes what this transport leaves behind for a process killed before it could (shared
  // memory files named after it); may be empty.
  std::function<void(int pid)> remove_leftovers_of;
};

const std::vector<TransportEntry>& registry();
const TransportEntry* find_transport(const std::string& name);
// Every transport's remove_leftovers_of, for a process that was killed.
void remove_leftovers_of(int pid);

// "ofi:shm" -> {"ofi", "shm"}; "ofi" -> {"ofi", ""}.
std::pair<std::string, std::string> split_transport(const std::string& spec);

}  // namespace rb::transport
