#pragma once
// One UCP context per rdmabench domain. The UCX settings a run chose (the transport list, the
// network device, the thresholds) go onto the configuration read from UCX with ucp_config_modify,
// never into the environment, so two domains of one process can differ and nothing leaks into
// the rest of the process.
#include <ucp/api/ucp.h>

#include <memory>
#include <string>

#include "core/status.hh"

namespace rb::transport::ucx {

struct Settings {
  std::string tls;          // UCX_TLS-style transport list; empty: UCX's default (every transport)
  std::string net_devices;  // NET_DEVICES; empty: every network device
  std::string rndv_thresh, zcopy_thresh;  // RNDV_THRESH, ZCOPY_THRESH in bytes; empty: UCX's choice
};

// Tag matching (send/recv), RMA (write/read), 64-bit atomics, active messages (the notice of a
// write with immediate data) and wakeup (--event). Wakeup costs a polling worker nothing: UCX
// arms its interfaces only in ucp_worker_arm.
constexpr uint64_t kFeatures = UCP_FEATURE_TAG | UCP_FEATURE_RMA | UCP_FEATURE_AMO64 | UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;

class Context {
 public:
  explicit Context(ucp_context_h h) : h_(h) {}
  ~Context() { ucp_cleanup(h_); }
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  ucp_context_h get() const { return h_; }

 private:
  ucp_context_h h_;
};

// Reads UCX's configuration, applies `s` and initialises a context whose workers may each be
// driven by a thread of their own. Errors say which setting UCX refused.
Result<std::shared_ptr<Context>> open_context(const Settings& s);

// "1.13.1"
std::string ucx_version();

}  // namespace rb::transport::ucx
