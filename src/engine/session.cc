#include "engine/session.hh"

#include "core/netif.hh"

#include <algorithm>

#include <fmt/format.h>

namespace rb::engine {

Result<std::vector<transport::DomainSite>> domain_sites(const RunSpec& s, const transport::DomainSite& whole,
                                                         const std::function<Result<std::string>(int rail)>& nic_of_rail) {
  if (s.domains.empty()) return std::vector<transport::DomainSite>{whole};
  std::vector<transport::DomainSite> sites;
  for (int r = 0; r < s.rails; ++r) {
    auto nic = nic_of_rail(r);
    if (!nic) return nic.status();
    sites.push_back({*nic, interface_named(*nic).ip});
  }
  return sites;
}

Result<std::unique_ptr<Session>> open_session(const RunSpec& s, const std::vector<transport::DomainSite>& sites,
                                              uint64_t bytes, uint32_t rx_slots, transport::Use use) {
  auto session = std::make_unique<Session>();
  session->ept = s.eps_per_thread();
  session->qps = s.qps;
  for (const auto& site : sites) {
    auto dom = transport::open_selected(s.transport, site, use);
    if (!dom) return dom.status();
    Status c = check_caps(s, dom.value()->caps(), s.transport.label());
    if (!c) return c;
    session->domains.push_back(std::move(dom.value()));
  }
  auto mem = session->domain().allocate(bytes);
  if (!mem) return mem.status();
  session->memory = std::move(mem.value());
  for (auto& d : session->domains) {
    auto mr = d->register_memory(session->memory->data(), session->memory->size());
    if (!mr) return mr.status();
    session->mrs.push_back(std::move(mr.value()));
  }
  for (int t = 0; t < s.threads * s.eps_per_thread(); ++t) {
    transport::EndpointOptions eo;
    eo.index = t;
    eo.depth = s.depth;
    eo.rx_slots = rx_slots;
    eo.selective = true;  // the runner marks every op that needs a completion
    eo.event = s.event;
    eo.validate = s.validate;
    auto ep = session->domains[session->domain_of_endpoint(size_t(t))]->open_endpoint(eo);
    if (!ep) return ep.status();
    session->eps.push_back(std::move(ep.value()));
  }
  return session;
}

std::vector<std::vector<uint8_t>> endpoint_addresses(const Session& s) {
  std::vector<std::vector<uint8_t>> a;
  for (auto& ep : s.eps) a.push_back(ep->address());
  return a;
}

std::vector<transport::RemoteRegion> regions_of(const Session& s) {
  std::vector<transport::RemoteRegion> a;
  for (auto& mr : s.mrs) a.push_back(mr->remote());
  return a;
}

Status connect_endpoints(Session& s, const std::vector<std::vector<uint8_t>>& addrs,
                         const std::vector<transport::RemoteRegion>& peer_regions) {
  if (addrs.size() != s.eps.size())
    return {Errc::io, fmt::format("control protocol error: the peer has {} endpoints, this side {}", addrs.size(),
                                  s.eps.size())};
  // A peer with one domain has one region for every rail; with one per rail, each has its own.
  const size_t rails = size_t(s.ept / s.qps);
  if (peer_regions.size() != 1 && peer_regions.size() != rails)
    return {Errc::io, fmt::format("control protocol error: the peer has {} regions for {} rails", peer_regions.size(), rails)};
  for (size_t i = 0; i < s.eps.size(); ++i) {
    Status c = s.eps[i]->connect(addrs[i]);
    if (!c) return c;
    size_t rail = (i % size_t(s.ept)) / size_t(s.qps);
    Status st = s.eps[i]->set_remote(peer_regions[peer_regions.size() == 1 ? 0 : rail]);
    if (!st) return st;
  }
  return {};
}

uint32_t rx_slots_for(const RunSpec& s, uint64_t size, const transport::Caps& caps) {
  // Enough receives to keep a stream of depth sends flowing, capped to 256 MiB of ring per thread.
  uint64_t want = std::max<uint64_t>(2, s.depth);
  uint64_t by_mem = std::max<uint64_t>(2, (256ull << 20) / align_up(size));
  uint64_t cap = caps.rx_depth ? caps.rx_depth : want;
  return uint32_t(std::min({want, by_mem, cap}));
}

}  // namespace rb::engine
