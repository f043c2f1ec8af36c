#include "transport/ofi/ofi_info.hh"

#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>

#include <cstring>

#include <fmt/format.h>

namespace rb::transport::ofi {

std::string fi_error(int rc) { return fmt::format("{} ({})", fi_strerror(rc < 0 ? -rc : rc), rc); }

InfoPtr make_hints(const std::string& provider) {
  InfoPtr h(fi_allocinfo());
  h->caps = FI_MSG | FI_RMA;
  h->mode = FI_CONTEXT | FI_CONTEXT2;
  h->ep_attr->type = FI_EP_RDM;
  // Offer every MR mode we can honour; the provider answers with the ones it needs.
  h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  h->tx_attr->msg_order = FI_ORDER_SAS;
  h->rx_attr->msg_order = FI_ORDER_SAS;
  if (!provider.empty()) h->fabric_attr->prov_name = strdup(provider.c_str());
  return h;
}

Result<InfoPtr> query(const std::string& provider, std::string* why) {
  InfoPtr hints = make_hints(provider);
  fi_info* out = nullptr;
  int rc = fi_getinfo(FI_VERSION(1, 9), nullptr, nullptr, 0, hints.get(), &out);
  if (rc != 0 || !out) {
    std::string msg = rc ? fi_error(rc) : "no matching endpoint";
    if (why) *why = msg;
    return Status(Errc::unavailable, msg);
  }
  return InfoPtr(out);
}

std::string describe(const fi_info* i) {
  std::string mr;
  if (i->domain_attr->mr_mode & FI_MR_VIRT_ADDR) mr += "virt_addr ";
  if (i->domain_attr->mr_mode & FI_MR_PROV_KEY) mr += "prov_key ";
  if (i->domain_attr->mr_mode & FI_MR_LOCAL) mr += "local ";
  if (mr.empty()) mr = "basic(offsets) ";
  mr.pop_back();
  return fmt::format("fabric={} domain={} max_msg={} inject={} tx_size={} rx_size={} mr_mode={} progress={}",
                     i->fabric_attr->name, i->domain_attr->name, i->ep_attr->max_msg_size, i->tx_attr->inject_size,
                     i->tx_attr->size, i->rx_attr->size, mr,
                     i->domain_attr->data_progress == FI_PROGRESS_AUTO ? "auto" : "manual");
}

}  // namespace rb::transport::ofi
