#include "vrdma/router/tenants.hh"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "core/bytes.hh"

namespace rb::vrdma {
namespace {

Status bad(const std::string& where, const std::string& what) {
  return {Errc::invalid_argument, fmt::format("{}: {}", where, what)};
}

// A size field: an integer of bytes, or a string with a unit ("4G"); `absent` when not given.
Result<uint64_t> size_field(const toml::node* n, const std::string& where, uint64_t absent = 0) {
  if (!n) return absent;
  if (auto i = n->value<int64_t>()) {
    if (*i < 0) return bad(where, fmt::format("{} is negative; give bytes (0: unlimited)", *i));
    return uint64_t(*i);
  }
  if (auto s = n->value<std::string>()) {
    auto r = parse_bytes(*s, where.c_str());
    if (!r) return r.status();
    return *r;
  }
  return bad(where, "must be bytes: an integer or a string such as \"4G\"");
}

Result<uint64_t> count_field(const toml::node* n, const std::string& where, uint64_t max, uint64_t absent = 0) {
  if (!n) return absent;
  auto i = n->value<int64_t>();
  if (!i || *i < 0 || uint64_t(*i) > max)
    return bad(where, fmt::format("must be an integer from 0 (unlimited) to {}", max));
  return uint64_t(*i);
}

Result<uint32_t> uid_field(const toml::node& n, const std::string& where) {
  auto v = n.value<int64_t>();
  if (!v || *v < 0 || *v > 0xfffffffe) return bad(where, "every entry must be a uid (0 to 4294967294)");
  return uint32_t(*v);
}

Result<Tenant> tenant_of(const toml::table& t, const std::string& where, const TenantDefaults& d) {
  static const std::set<std::string> known = {"name", "uids", "rate_bytes", "rate_ops", "qp_rate_bytes",
                                              "qp_rate_ops", "max_qps", "max_mrs", "max_pds", "max_reg_bytes", "path"};
  for (auto&& [k, v] : t)
    if (!known.count(std::string(k.str())))
      return bad(where, fmt::format("unknown key \"{}\" (keys: name, uids, rate_bytes, rate_ops, qp_rate_bytes, qp_rate_ops, "
                                                "max_qps, max_mrs, max_pds, max_reg_bytes, path)",
                                    k.str()));
  Tenant out;
  auto name = t["name"].value<std::string>();
  if (!name || name->empty() || name->size() >= 64)
    return bad(where + ".name", "must be a non-empty string of at most 63 characters");
  // Across hosts a tenant is its name: "uid-N" is what a router with no [[tenant]] for uid N
  // calls it, so a configured one of that form would be that uid's tenant on other hosts
  // (probe 8 D4: a config's "uid-1001" for uid 65534 took uid 1001's datagrams elsewhere).
  if (name->rfind("uid-", 0) == 0)
    return bad(where + ".name", fmt::format("\"{}\": names beginning \"uid-\" are the routers' own for uids no tenant "
                                            "lists; choose another name", *name));
  out.name = *name;
  const toml::array* uids = t["uids"].as_array();
  if (!uids || uids->empty()) return bad(where + ".uids", "must be a non-empty list of uids, e.g. uids = [1000]");
  for (auto& u : *uids) {
    auto v = uid_field(u, where + ".uids");
    if (!v) return v.status();
    out.uids.push_back(*v);
  }
  auto take = [&](Result<uint64_t> r, uint64_t& into) -> Status {
    if (!r) return r.status();
    into = *r;
    return {};
  };
  uint64_t qps = 0, mrs = 0, pds = 0;
  if (Status s = take(size_field(t.get("rate_bytes"), where + ".rate_bytes"), out.rate_bytes); !s) return s;
  if (Status s = take(count_field(t.get("rate_ops"), where + ".rate_ops", 1ull << 40), out.rate_ops); !s) return s;
  if (Status s = take(size_field(t.get("qp_rate_bytes"), where + ".qp_rate_bytes"), out.qp_rate_bytes); !s) return s;
  if (Status s = take(count_field(t.get("qp_rate_ops"), where + ".qp_rate_ops", 1ull << 40), out.qp_rate_ops); !s)
    return s;
  if (Status s = take(count_field(t.get("max_qps"), where + ".max_qps", 1u << 20, d.max_qps), qps); !s) return s;
  if (Status s = take(count_field(t.get("max_mrs"), where + ".max_mrs", 1u << 20, d.max_mrs), mrs); !s) return s;
  if (Status s = take(count_field(t.get("max_pds"), where + ".max_pds", 1u << 20, d.max_pds), pds); !s) return s;
  if (Status s = take(size_field(t.get("max_reg_bytes"), where + ".max_reg_bytes", d.max_reg_bytes), out.max_reg_bytes);
      !s)
    return s;
  out.max_qps = uint32_t(qps);
  out.max_mrs = uint32_t(mrs);
  out.max_pds = uint32_t(pds);
  if (const toml::node* p = t.get("path")) {
    auto v = p->value<std::string>();
    if (!v || (*v != "direct" && *v != "router"))
      return bad(where + ".path", "must be \"direct\" (same-host peers map each other's regions) or \"router\"");
    out.direct = *v == "direct";
  }
  return out;
}

Result<RouterLimits> router_of(const toml::table& t, const std::string& where) {
  static const std::set<std::string> known = {"admin_uids", "max_clients_per_uid", "max_link_conns_per_host",
                                              "link_key", "link_networks"};
  for (auto&& [k, v] : t)
    if (!known.count(std::string(k.str())))
      return bad(where, fmt::format("unknown key \"{}\" (keys: admin_uids, max_clients_per_uid, max_link_conns_per_host, "
                                    "link_key, link_networks)", k.str()));
  RouterLimits out;
  if (const toml::node* k = t.get("link_key")) {
    auto path = k->value<std::string>();
    if (!path || path->empty()) return bad(where + ".link_key", "must be the path of a key file (vrdmactl link-key)");
    out.link_key = *path;
  }
  if (const toml::node* nets = t.get("link_networks")) {
    const toml::array* arr = nets->as_array();
    if (!arr || arr->empty())
      return bad(where + ".link_networks", "must be a list of networks, e.g. link_networks = [\"10.1.0.0/16\"]");
    for (auto& n : *arr) {
      std::string why;
      auto text = n.value<std::string>();
      auto net = text ? proto::parse_router_network(*text, &why) : std::nullopt;
      if (!net) return bad(where + ".link_networks", text ? why : "each entry must be a string such as \"10.1.0.0/16\"");
      out.link_networks.push_back(*net);
    }
  }
  if (const toml::node* a = t.get("admin_uids")) {
    const toml::array* arr = a->as_array();
    if (!arr) return bad(where + ".admin_uids", "must be a list of uids, e.g. admin_uids = [1000]");
    for (auto& u : *arr) {
      auto v = uid_field(u, where + ".admin_uids");
      if (!v) return v.status();
      out.admin_uids.push_back(*v);
    }
  }
  auto n = count_field(t.get("max_clients_per_uid"), where + ".max_clients_per_uid", 1u << 16, out.max_clients_per_uid);
  if (!n) return n.status();
  if (*n == 0) return bad(where + ".max_clients_per_uid", "must be an integer from 1 to 65536");
  out.max_clients_per_uid = uint32_t(*n);
  n = count_field(t.get("max_link_conns_per_host"), where + ".max_link_conns_per_host", 1u << 16, out.max_link_conns_per_host);
  if (!n) return n.status();
  if (*n == 0) return bad(where + ".max_link_conns_per_host", "must be an integer from 1 to 65536");
  out.max_link_conns_per_host = uint32_t(*n);
  return out;
}

}  // namespace

TenantDefaults tenant_defaults() {
  TenantDefaults d;
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  d.max_reg_bytes = pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) / 4 : (1ull << 30);
  return d;
}

bool RouterLimits::is_admin(uint32_t uid) const {
  return uid == 0 || std::find(admin_uids.begin(), admin_uids.end(), uid) != admin_uids.end();
}

bool RouterLimits::may_link(const proto::RouterAddress& at) const {
  if (link_networks.empty()) return true;
  return std::any_of(link_networks.begin(), link_networks.end(), [&](const auto& n) { return n.contains(at); });
}

Result<Tenants> Tenants::parse(const std::string& text, const std::string& origin) {
  toml::table root;
  try {
    root = toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    return Status(Errc::invalid_argument, fmt::format("{}: line {}: {}", origin, e.source().begin.line, e.description()));
  }
  for (auto&& [k, v] : root)
    if (k.str() != "tenant" && k.str() != "router")
      return bad(origin, fmt::format("unknown table \"{}\"; a config holds [[tenant]] entries and a [router] table", k.str()));
  const toml::array* arr = root["tenant"].as_array();
  bool has_router = root.get("router") != nullptr;
  if ((!arr || arr->empty()) && !has_router)
    return bad(origin, "no [[tenant]] entry and no [router] table; without a config every uid is its own tenant");
  Tenants out;
  out.from_config_ = arr && !arr->empty();  // a [router] table alone keeps every uid its own tenant
  out.origin_ = origin;
  if (const toml::node* r = root.get("router")) {
    const toml::table* t = r->as_table();
    if (!t) return bad(origin + ": router", "must be a table ([router])");
    auto limits = router_of(*t, origin + ": router");
    if (!limits) return limits.status();
    out.router_ = std::move(*limits);
  }
  std::set<std::string> names;
  std::set<uint32_t> uids;
  for (size_t i = 0; arr && i < arr->size(); ++i) {
    std::string where = fmt::format("{}: tenant[{}]", origin, i);
    const toml::table* t = (*arr)[i].as_table();
    if (!t) return bad(where, "must be a table ([[tenant]])");
    auto r = tenant_of(*t, where, out.defaults_);
    if (!r) return r.status();
    if (!names.insert(r->name).second) return bad(where + ".name", fmt::format("\"{}\" names two tenants", r->name));
    for (uint32_t u : r->uids)
      if (!uids.insert(u).second) return bad(where + ".uids", fmt::format("uid {} is in two tenants", u));
    out.list_.push_back(std::move(*r));
  }
  return out;
}

Result<Tenants> Tenants::load(const std::string& path) {
  std::ifstream f(path);
  if (!f) return Status(Errc::invalid_argument, fmt::format("--config {}: cannot be read; give a readable TOML file", path));
  std::stringstream ss;
  ss << f.rdbuf();
  return parse(ss.str(), "--config " + path);
}

std::vector<SubordinateUids> parse_subuid(const std::string& text,
                                         const std::function<std::optional<uint32_t>(const std::string&)>& uid_of) {
  std::vector<SubordinateUids> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos || line.empty() || line[0] == '#') continue;
    char* end = nullptr;
    std::string first = line.substr(a + 1, b - a - 1), count = line.substr(b + 1);
    unsigned long f = std::strtoul(first.c_str(), &end, 10);
    if (first.empty() || *end) continue;
    unsigned long n = std::strtoul(count.c_str(), &end, 10);
    if (count.empty() || *end || n == 0 || f > UINT32_MAX || n > UINT32_MAX - f) continue;
    auto owner = uid_of(line.substr(0, a));
    if (owner) out.push_back({uint32_t(f), uint32_t(n), *owner});
  }
  return out;
}

Result<Tenant> Tenants::of_uid(uint32_t uid) const {
  bool named = false;
  for (const auto& t : list_) named = named || std::find(t.uids.begin(), t.uids.end(), uid) != t.uids.end();
  if (!named)
    for (const auto& r : subordinate_)
      if (r.contains(uid) && r.owner != uid) return named_tenant_of(r.owner);
  return named_tenant_of(uid);
}

Result<Tenant> Tenants::named_tenant_of(uint32_t uid) const {
  if (!from_config_) {
    Tenant t;
    t.name = fmt::format("uid-{}", uid);
    t.uids = {uid};
    t.max_qps = defaults_.max_qps;
    t.max_mrs = defaults_.max_mrs;
    t.max_pds = defaults_.max_pds;
    t.max_reg_bytes = defaults_.max_reg_bytes;
    return t;
  }
  for (const auto& t : list_)
    for (uint32_t u : t.uids)
      if (u == uid) return t;
  return Status(Errc::invalid_argument, fmt::format("uid {} is in no tenant of {}", uid, origin_));
}

}  // namespace rb::vrdma
