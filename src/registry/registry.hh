#pragma once
// The list of transports this build has, and the ones it left out (a library missing when it was
// configured). Adding a transport is one folder with its CMakeLists.txt and one name in the list
// in src/transport/CMakeLists.txt (see docs/transports.md).
#include <memory>
#include <string>
#include <vector>

#include "transport/entry.hh"

namespace rb::transport {

const std::vector<TransportEntry>& registry();
const TransportEntry* find_transport(const std::string& name);
const TransportEntry& default_transport();
// Every transport's remove_leftovers_of, for a process that was killed.
void remove_leftovers_of(int pid);

enum class Use { run, test };  // test: the in-process, test-only transports may be chosen too

// Checks a selection against its entry before anything starts: the name, the variant, --domain
// and every -o. Returns what open() will be given (local_ip still empty).
Result<OpenArgs> check_selection(const Selection& s, Use use = Use::run);
// Checks the selection and opens one domain at `site`.
Result<std::unique_ptr<Domain>> open_selected(const Selection& s, const DomainSite& site, Use use = Use::run);

// A transport this build does not have, and why: "ucx", "UCX not found (pkg-config ucx) when this
// build was configured; install libucx-dev and rebuild".
struct LeftOut {
  std::string name;
  std::string reason;
};
const std::vector<LeftOut>& left_out();

}  // namespace rb::transport
