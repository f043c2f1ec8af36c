#pragma once
// What a transport declares about itself: its name, what it is, its variants (-t NAME:VARIANT),
// what --domain means for it, its typed -o options, the instances the tests run, how to open it
// and how to say whether it is usable here. Each transport's folder makes one entry; the registry
// (src/registry) lists them. --help, --list, the -o checks, the conformance suite and the e2e
// parametrisation are all generated from these entries; nothing else names a transport.
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "transport/options.hh"
#include "transport/selection.hh"
#include "transport/transport.hh"

namespace rb::transport {

// What a transport's open() is given: the selection, checked and typed.
struct OpenArgs {
  std::string variant;   // after the colon; empty = the transport's default
  std::string domain;    // --domain (or this rail's NIC); empty = the transport's default
  std::string local_ip;  // the local address the out-of-band connection uses; empty = none (tests)
  OptionValues options;  // every declared option: given, or its default
};

// Where one domain of a run opens: the NIC (--domain, or a rail's) and the local address.
struct DomainSite {
  std::string domain;
  std::string local_ip;
};

struct Availability {
  std::string name;        // e.g. "ofi:shm"
  bool usable = false;
  std::string detail;      // capabilities when usable, the reason when not
  std::optional<Caps> caps;  // the capability record, when known without opening
};

struct Variant {
  std::string name;  // -t NAME:<name>
  std::string help;  // what it picks
};

struct TransportEntry {
  std::string name;
  std::string description;  // one line
  bool is_default = false;  // -t without a value
  bool test_only = false;   // in-process, for the conformance suite: hidden from --help and --list, refused by -t

  std::string variant_help;       // what the part after the colon means; empty: the transport takes none
  std::vector<Variant> variants;  // the known variants, the default first
  bool any_variant = false;       // names beyond `variants` are passed to open() (ofi: any libfabric provider)
  std::string domain_help;        // what --domain means; empty: --domain is refused
  std::vector<OptionSpec> options;

  // The instances the conformance suite opens in one process, and the e2e tests run between two
  // (those --list reports usable): variant names, "" for the default.
  std::vector<std::string> test_variants;

  // Required: opens one domain. Errors name the flag at fault (-t, --domain, -o) and the fix.
  std::function<Result<std::unique_ptr<Domain>>(const OpenArgs&)> open;
  // Required: what --list says, one line per usable or unusable instance.
  std::function<std::vector<Availability>()> probe;
  // Optional: probe() as a run's -o options say, for a transport whose options decide what there
  // is to find (vrdma: -o socket names the router to ask). The pre-run check uses it when given.
  std::function<std::vector<Availability>(const OptionValues& options)> probe_with;
  // Optional, with any_variant: whether a variant probe() does not list is usable here (ucx: any
  // UCX_TLS list), so the pre-run check can judge it instead of refusing it as unknown.
  std::function<Availability(const std::string& variant)> probe_variant;
  // Removes what this transport leaves behind for a process killed before it could (shared
  // memory files named after it); may be empty.
  std::function<void(int pid)> remove_leftovers_of;
};

}  // namespace rb::transport
