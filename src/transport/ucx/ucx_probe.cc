#include "transport/ucx/ucx_probe.hh"

#include <uct/api/uct.h>

#include <algorithm>

#include <fmt/format.h>

#include "transport/ucx/log_capture.hh"
#include "transport/ucx/ucx_context.hh"
#include "transport/ucx/ucx_status.hh"
#include "transport/ucx/ucx_variants.hh"

namespace rb::transport::ucx {
namespace {

struct Resource {
  std::string tl, dev;
  std::string label() const { return tl + "/" + dev; }
};

// The transports of one memory domain, as UCT lists them (what `ucx_info -d` shows).
void add_md_resources(uct_component_h comp, const char* md_name, std::vector<Resource>& out) {
  uct_md_config_t* cfg = nullptr;
  if (uct_md_config_read(comp, nullptr, nullptr, &cfg) != UCS_OK) return;
  uct_md_h md = nullptr;
  ucs_status_t st = uct_md_open(comp, md_name, cfg, &md);
  uct_config_release(cfg);
  if (st != UCS_OK) return;
  uct_tl_resource_desc_t* res = nullptr;
  unsigned n = 0;
  if (uct_md_query_tl_resources(md, &res, &n) == UCS_OK) {
    for (unsigned i = 0; i < n; ++i) out.push_back({res[i].tl_name, res[i].dev_name});
    uct_release_tl_resource_list(res);
  }
  uct_md_close(md);
}

std::vector<Resource> uct_resources() {
  std::vector<Resource> out;
  uct_component_h* comps = nullptr;
  unsigned n = 0;
  if (uct_query_components(&comps, &n) != UCS_OK) return out;
  for (unsigned c = 0; c < n; ++c) {
    uct_component_attr_t attr{};
    attr.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT;
    if (uct_component_query(comps[c], &attr) != UCS_OK) continue;
    std::vector<uct_md_resource_desc_t> mds(attr.md_resource_count);
    attr.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
    attr.md_resources = mds.data();
    if (uct_component_query(comps[c], &attr) != UCS_OK) continue;
    for (auto& md : mds) add_md_resources(comps[c], md.md_name, out);
  }
  uct_release_component_list(comps);
  return out;
}

// Whether two workers of one context over `tls` connect: UCX picks its lanes (active messages,
// RMA, atomics) when the endpoint is created, and says there what it lacks. The probe stays on
// the loopback interface, so it never opens a socket on any other address.
Status try_connect(const std::string& tls) {
  LogCapture log;
  auto ctx = open_context({tls, "lo", "", ""});
  if (!ctx) return ctx.status();
  ucp_worker_params_t wp{};
  ucp_worker_h w[2] = {nullptr, nullptr};
  ucs_status_t st = UCS_OK;
  for (auto& x : w)
    if (st == UCS_OK) st = ucp_worker_create(ctx.value()->get(), &wp, &x);
  ucp_address_t* addr = nullptr;
  size_t len = 0;
  if (st == UCS_OK) st = ucp_worker_get_address(w[1], &addr, &len);
  if (st == UCS_OK) {
    ucp_ep_params_t ep{};
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    ep.address = addr;
    ucp_ep_h e = nullptr;
    st = ucp_ep_create(w[0], &ep, &e);
    ucp_worker_release_address(w[1], addr);
    if (st == UCS_OK) {
      ucp_request_param_t p{};
      p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      p.flags = UCP_EP_CLOSE_FLAG_FORCE;  // never used: nothing to flush
      void* r = ucp_ep_close_nbx(e, &p);
      while (r && !UCS_PTR_IS_ERR(r) && ucp_request_check_status(r) == UCS_INPROGRESS) ucp_worker_progress(w[0]);
      if (r && !UCS_PTR_IS_ERR(r)) ucp_request_free(r);
    }
  }
  for (auto& x : w)
    if (x) ucp_worker_destroy(x);
  if (st == UCS_OK) return {};
  return {Errc::unavailable, log.first().empty() ? ucx_error(st) : log.first()};
}

std::string labels(const std::vector<Resource>& rs) {
  std::string out;
  for (auto& r : rs) out += (out.empty() ? "" : " ") + r.label();
  return out;
}

Availability instance(const std::string& variant, const std::vector<Resource>& found) {
  std::string name = variant.empty() ? "ucx" : "ucx:" + variant;
  Status st = try_connect(variant);
  if (!st) return {name, false, fmt::format("UCX {} cannot connect two workers over {}: {}", ucx_version(),
                                            variant.empty() ? "its default transports" : variant, st.message())};
  std::string detail = variant.empty() ? fmt::format("UCX {}, transports here: {}", ucx_version(), labels(found))
                                       : fmt::format("over {}", labels(found));
  return {name, true, detail, caps_for(variant)};
}

}  // namespace

Availability probe_variant(const std::string& tls) {
  // Resources the list names by transport; an alias (shm, sm, ib) names none, and then all are shown.
  auto all = uct_resources();
  std::vector<Resource> named;
  for (auto& r : all)
    for (const auto& t : split_list(tls))
      if (r.tl == t) named.push_back(r);
  return instance(tls, named.empty() ? all : named);
}

std::vector<Availability> probe() {
  auto all = uct_resources();
  std::vector<Availability> out{instance("", all)};
  for (const auto& v : known_variants()) {
    std::vector<Resource> mine;
    for (auto& r : all)
      if (std::find(v.tls.begin(), v.tls.end(), r.tl) != v.tls.end()) mine.push_back(r);
    if (mine.empty()) {
      out.push_back({"ucx:" + v.name, false, fmt::format("UCX {} finds no {} here", ucx_version(), fmt::join(v.tls, " or "))});
      continue;
    }
    out.push_back(instance(v.name, mine));
  }
  return out;
}

}  // namespace rb::transport::ucx
