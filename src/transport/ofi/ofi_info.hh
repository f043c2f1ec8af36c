#pragma once
// Choosing a libfabric provider and domain: hints, printable summaries.
#include <rdma/fabric.h>

#include <memory>
#include <string>
#include <vector>

#include "core/status.hh"

namespace rb::transport::ofi {

struct InfoDeleter {
  void operator()(fi_info* i) const { fi_freeinfo(i); }
};
using InfoPtr = std::unique_ptr<fi_info, InfoDeleter>;

// Hints for RDM endpoints that can SEND/RECV, WRITE and READ, and whatever `extra_caps` adds.
InfoPtr make_hints(const std::string& provider, uint64_t extra_caps = 0);
// All fi_info entries matching the hints, with FI_ATOMIC where the provider offers it (empty
// list and a reason on failure).
Result<InfoPtr> query(const std::string& provider, std::string* why = nullptr);
std::string describe(const fi_info* info);
std::string fi_error(int rc);

}  // namespace rb::transport::ofi
