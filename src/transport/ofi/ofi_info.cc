#include "transport/ofi/ofi_info.hh"

#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>

#include <cstring>
#include <set>

#include <fmt/format.h>

namespace rb::transport::ofi {

std::string fi_error(int rc) { return fmt::format("{} ({})", fi_strerror(rc < 0 ? -rc : rc), rc); }

InfoPtr make_hints(const std::string& provider, uint64_t extra_caps) {
  InfoPtr h(fi_allocinfo());
  h->caps = FI_MSG | FI_RMA | extra_caps;
  h->mode = FI_CONTEXT | FI_CONTEXT2;
  h->ep_attr->type = FI_EP_RDM;
  // Offer every MR mode we can honour; the provider answers with the ones it needs.
  h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  h->tx_attr->msg_order = FI_ORDER_SAS;
  h->rx_attr->msg_order = FI_ORDER_SAS;
  if (!provider.empty()) h->fabric_attr->prov_name = strdup(provider.c_str());
  return h;
}

namespace {

InfoPtr getinfo(const std::string& provider, uint64_t extra_caps, int* rc) {
  InfoPtr hints = make_hints(provider, extra_caps);
  fi_info* out = nullptr;
  *rc = fi_getinfo(FI_VERSION(1, 9), nullptr, nullptr, 0, hints.get(), &out);
  return InfoPtr(*rc == 0 ? out : nullptr);
}

bool lists_provider(const fi_info* list, const char* prov) {
  for (auto* i = list; i; i = i->next)
    if (std::strcmp(i->fabric_attr->prov_name, prov) == 0) return true;
  return false;
}

// The plain list in libfabric's order of preference, where each provider that also answers the
// FI_ATOMIC hints is represented by those entries instead (at its first place).
InfoPtr prefer_atomic_entries(const fi_info* plain, const fi_info* atomic) {
  fi_info* head = nullptr;
  fi_info** tail = &head;
  auto append = [&](const fi_info* i) {
    *tail = fi_dupinfo(i);  // a copy of this one entry, its `next` cleared
    if (*tail) tail = &(*tail)->next;
  };
  std::set<std::string> placed;
  for (auto* p = plain; p; p = p->next) {
    const char* prov = p->fabric_attr->prov_name;
    if (!lists_provider(atomic, prov)) {
      append(p);
      continue;
    }
    if (!placed.insert(prov).second) continue;
    for (auto* a = atomic; a; a = a->next)
      if (std::strcmp(a->fabric_attr->prov_name, prov) == 0) append(a);
  }
  return InfoPtr(head);
}

}  // namespace

// A provider need not enable a primary capability nobody asked for, so FI_ATOMIC goes into the
// hints; but a provider without atomics must not disappear for that, so its plain entries stay.
// (shm and tcp;ofi_rxm answer both; only shm's FI_HMEM entry, inject_size 0, lacks atomics.)
Result<InfoPtr> query(const std::string& provider, std::string* why) {
  int rc = 0;
  InfoPtr plain = getinfo(provider, 0, &rc);
  if (!plain) {
    std::string msg = rc ? fi_error(rc) : "no matching endpoint";
    if (why) *why = msg;
    return Status(Errc::unavailable, msg);
  }
  InfoPtr atomic = getinfo(provider, FI_ATOMIC, &rc);
  if (!atomic) return plain;
  InfoPtr merged = prefer_atomic_entries(plain.get(), atomic.get());
  if (!merged) return plain;
  return merged;
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
