#include "bench/session.hh"

#include <algorithm>

#include <fmt/format.h>

namespace rb::bench {

Result<std::unique_ptr<Session>> open_session(const RunSpec& s, const std::vector<transport::DomainSite>& sites,
                                              uint64_t bytes, uint32_t rx_slots) {
  auto session = std::make_unique<Session>();
  session->ept = s.eps_per_thread();
  session->qps = s.qps;
  for (const auto& site : sites) {
    auto dom = transport::open_selected(s.transport, site);
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
    auto ep = session->domains[session->domain_of_endpoint(size_t(t))]->open_endpoint(eo);
    if (!ep) return ep.status();
    session->eps.push_back(std::move(ep.value()));
  }
  return session;
}

std::string to_hex(const std::vector<uint8_t>& b) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (uint8_t c : b) {
    s += d[c >> 4];
    s += d[c & 15];
  }
  return s;
}

Result<std::vector<uint8_t>> from_hex(const std::string& s) {
  if (s.size() % 2) return Status(Errc::io, "control protocol error: odd hex string");
  std::vector<uint8_t> b(s.size() / 2);
  for (size_t i = 0; i < b.size(); ++i) {
    unsigned v;
    if (std::sscanf(s.c_str() + 2 * i, "%2x", &v) != 1) return Status(Errc::io, "control protocol error: bad hex");
    b[i] = uint8_t(v);
  }
  return b;
}

nlohmann::json region_json(const transport::RemoteRegion& r) {
  return {{"base", r.base}, {"key", r.key}, {"len", r.len}, {"handle", to_hex(r.handle)}};
}

transport::RemoteRegion region_from_json(const nlohmann::json& j) {
  transport::RemoteRegion r{j.at("base").get<uint64_t>(), j.at("key").get<uint64_t>(), j.at("len").get<uint64_t>(), {}};
  auto h = from_hex(j.value("handle", std::string()));
  if (h) r.handle = std::move(h.value());
  return r;
}

nlohmann::json info_json(const transport::DomainInfo& i) {
  return {{"transport", i.transport}, {"provider", i.provider}, {"fabric", i.fabric}, {"domain", i.domain},
          {"library_version", i.library_version}};
}

nlohmann::json endpoint_addresses(const Session& s) {
  nlohmann::json a = nlohmann::json::array();
  for (auto& ep : s.eps) a.push_back(to_hex(ep->address()));
  return a;
}

nlohmann::json regions_json(const Session& s) {
  nlohmann::json a = nlohmann::json::array();
  for (auto& mr : s.mrs) a.push_back(region_json(mr->remote()));
  return a;
}

Status connect_endpoints(Session& s, const nlohmann::json& addrs, const nlohmann::json& peer_regions) {
  if (!addrs.is_array() || addrs.size() != s.eps.size())
    return {Errc::io, "control protocol error: endpoint count differs between client and server"};
  if (!peer_regions.is_array() || peer_regions.empty())
    return {Errc::io, "control protocol error: no peer region"};
  for (size_t i = 0; i < s.eps.size(); ++i) {
    auto a = from_hex(addrs[i].get<std::string>());
    if (!a) return a.status();
    Status c = s.eps[i]->connect(*a);
    if (!c) return c;
    // A peer with one domain has one region for every rail; with one per rail, each has its own.
    size_t rail = (i % size_t(s.ept)) / size_t(s.qps);
    const auto& r = peer_regions.size() == 1 ? peer_regions[0] : peer_regions.at(rail);
    Status st = s.eps[i]->set_remote(region_from_json(r));
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

}  // namespace rb::bench
