#include "transport/ucx/ucx_context.hh"

#include <fmt/format.h>

#include "transport/ucx/ucx_status.hh"

namespace rb::transport::ucx {
namespace {

struct ConfigDeleter {
  void operator()(ucp_config_t* c) const { ucp_config_release(c); }
};
using ConfigPtr = std::unique_ptr<ucp_config_t, ConfigDeleter>;

Status apply(ucp_config_t* cfg, const Settings& s) {
  const std::pair<const char*, const std::string*> knobs[] = {
      {"TLS", &s.tls}, {"NET_DEVICES", &s.net_devices}, {"RNDV_THRESH", &s.rndv_thresh}, {"ZCOPY_THRESH", &s.zcopy_thresh}};
  for (auto [name, value] : knobs) {
    if (value->empty()) continue;
    ucs_status_t st = ucp_config_modify(cfg, name, value->c_str());
    if (st != UCS_OK)
      return {Errc::invalid_argument, fmt::format("UCX refused {}={}: {}", name, *value, ucx_error(st))};
  }
  return {};
}

}  // namespace

Result<std::shared_ptr<Context>> open_context(const Settings& s) {
  ucp_config_t* raw = nullptr;
  ucs_status_t st = ucp_config_read(nullptr, nullptr, &raw);
  if (st != UCS_OK) return Status(Errc::unavailable, "ucp_config_read: " + ucx_error(st));
  ConfigPtr cfg(raw);
  if (Status a = apply(cfg.get(), s); !a) return a;
  ucp_params_t p{};
  p.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED | UCP_PARAM_FIELD_NAME;
  p.features = kFeatures;
  p.mt_workers_shared = 1;  // one worker per endpoint, each driven by its own thread
  p.name = "rdmabench";
  ucp_context_h h = nullptr;
  st = ucp_init(&p, cfg.get(), &h);
  if (st != UCS_OK)
    return Status(Errc::unavailable, fmt::format("ucp_init with transports '{}': {}", s.tls.empty() ? "(all)" : s.tls,
                                                 ucx_error(st)));
  return std::make_shared<Context>(h);
}

std::string ucx_version() { return ucp_get_version_string(); }

}  // namespace rb::transport::ucx
