#include "transport/ofi/ofi_transport.hh"

#include <map>
#include <set>

#include "transport/ofi/ofi_domain.hh"
#include "transport/ofi/ofi_info.hh"
#include "transport/ofi/shm_names.hh"

namespace rb::transport::ofi {

std::vector<Availability> probe() {
  std::vector<Availability> out;
  std::set<std::string> seen_layers;
  if (auto all = query("")) {
    // One line per (provider, domain): a NIC or interface is what --domain picks.
    std::map<std::pair<std::string, std::string>, const fi_info*> first;
    for (auto* i = all->get(); i; i = i->next) first.emplace(std::pair{i->fabric_attr->prov_name, i->domain_attr->name}, i);
    for (auto& [key, info] : first) {
      const std::string& name = key.first;
      out.push_back({"ofi:" + name, true, describe(info), domain_caps(info)});
      size_t p = 0;
      while (p <= name.size()) {
        size_t e = name.find(';', p);
        if (e == std::string::npos) e = name.size();
        seen_layers.insert(name.substr(p, e - p));
        p = e + 1;
      }
    }
  }
  fi_info* provs = nullptr;
  if (fi_getinfo(FI_VERSION(1, 9), nullptr, nullptr, FI_PROV_ATTR_ONLY, nullptr, &provs) == 0) {
    std::set<std::string> names;
    for (auto* i = provs; i; i = i->next) names.insert(i->fabric_attr->prov_name);
    fi_freeinfo(provs);
    for (auto& n : names) {
      if (seen_layers.count(n)) continue;
      std::string why;
      auto r = query(n, &why);
      out.push_back({"ofi:" + n, false,
                     r ? "no RDM endpoint with MSG+RMA and SAS ordering" : "no usable device or endpoint (" + why + ")"});
    }
  }
  return out;
}

TransportEntry registry_entry() {
  TransportEntry e;
  e.name = "ofi";
  e.description = "libfabric RDM endpoints with MSG and RMA, on any provider";
  e.is_default = true;
  e.variant_help = "a libfabric provider; none: shm for a peer on this host, else libfabric's choice";
  e.variants = {{"shm", "shared memory between processes on one host"},
                {"tcp", "libfabric's tcp provider, with rxm"},
                {"verbs", "InfiniBand and RoCE NICs"},
                {"efa", "AWS Elastic Fabric Adapter"},
                {"cxi", "HPE Slingshot"}};
  e.any_variant = true;
  e.domain_help = "a libfabric domain (NIC or interface) of this side; default: the interface carrying --addr";
  e.test_variants = {"shm", "tcp"};
  e.open = open_domain;
  e.probe = probe;
  e.remove_leftovers_of = [](int pid) { remove_shm_names_of(pid); };
  return e;
}

}  // namespace rb::transport::ofi
