#include "vrdma/router/tenants.hh"

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

// A size field: an integer of bytes, or a string with a unit ("4G").
Result<uint64_t> size_field(const toml::node* n, const std::string& where) {
  if (!n) return uint64_t(0);
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

Result<uint64_t> count_field(const toml::node* n, const std::string& where, uint64_t max) {
  if (!n) return uint64_t(0);
  auto i = n->value<int64_t>();
  if (!i || *i < 0 || uint64_t(*i) > max)
    return bad(where, fmt::format("must be an integer from 0 (unlimited) to {}", max));
  return uint64_t(*i);
}

Result<Tenant> tenant_of(const toml::table& t, const std::string& where) {
  static const std::set<std::string> known = {"name", "uids", "rate_bytes", "rate_ops", "qp_rate_bytes",
                                              "qp_rate_ops", "max_qps", "max_reg_bytes", "path"};
  for (auto&& [k, v] : t)
    if (!known.count(std::string(k.str())))
      return bad(where, fmt::format("unknown key \"{}\" (keys: name, uids, rate_bytes, rate_ops, qp_rate_bytes, qp_rate_ops, "
                                                "max_qps, max_reg_bytes, path)",
                                    k.str()));
  Tenant out;
  auto name = t["name"].value<std::string>();
  if (!name || name->empty() || name->size() >= 64)
    return bad(where + ".name", "must be a non-empty string of at most 63 characters");
  out.name = *name;
  const toml::array* uids = t["uids"].as_array();
  if (!uids || uids->empty()) return bad(where + ".uids", "must be a non-empty list of uids, e.g. uids = [1000]");
  for (auto& u : *uids) {
    auto v = u.value<int64_t>();
    if (!v || *v < 0 || *v > 0xfffffffe) return bad(where + ".uids", "every entry must be a uid (0 to 4294967294)");
    out.uids.push_back(uint32_t(*v));
  }
  auto take = [&](Result<uint64_t> r, uint64_t& into) -> Status {
    if (!r) return r.status();
    into = *r;
    return {};
  };
  uint64_t qps = 0;
  if (Status s = take(size_field(t.get("rate_bytes"), where + ".rate_bytes"), out.rate_bytes); !s) return s;
  if (Status s = take(count_field(t.get("rate_ops"), where + ".rate_ops", 1ull << 40), out.rate_ops); !s) return s;
  if (Status s = take(size_field(t.get("qp_rate_bytes"), where + ".qp_rate_bytes"), out.qp_rate_bytes); !s) return s;
  if (Status s = take(count_field(t.get("qp_rate_ops"), where + ".qp_rate_ops", 1ull << 40), out.qp_rate_ops); !s)
    return s;
  if (Status s = take(count_field(t.get("max_qps"), where + ".max_qps", 1u << 20), qps); !s) return s;
  if (Status s = take(size_field(t.get("max_reg_bytes"), where + ".max_reg_bytes"), out.max_reg_bytes); !s) return s;
  out.max_qps = uint32_t(qps);
  if (const toml::node* p = t.get("path")) {
    auto v = p->value<std::string>();
    if (!v || (*v != "direct" && *v != "router"))
      return bad(where + ".path", "must be \"direct\" (same-host peers map each other's regions) or \"router\"");
    out.direct = *v == "direct";
  }
  return out;
}

}  // namespace

Result<Tenants> Tenants::parse(const std::string& text, const std::string& origin) {
  toml::table root;
  try {
    root = toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    return Status(Errc::invalid_argument, fmt::format("{}: line {}: {}", origin, e.source().begin.line, e.description()));
  }
  for (auto&& [k, v] : root)
    if (k.str() != "tenant")
      return bad(origin, fmt::format("unknown table \"{}\"; a config holds [[tenant]] entries only", k.str()));
  const toml::array* arr = root["tenant"].as_array();
  if (!arr || arr->empty()) return bad(origin, "no [[tenant]] entry; without a config every uid is its own tenant");
  Tenants out;
  out.from_config_ = true;
  out.origin_ = origin;
  std::set<std::string> names;
  std::set<uint32_t> uids;
  for (size_t i = 0; i < arr->size(); ++i) {
    std::string where = fmt::format("{}: tenant[{}]", origin, i);
    const toml::table* t = (*arr)[i].as_table();
    if (!t) return bad(where, "must be a table ([[tenant]])");
    auto r = tenant_of(*t, where);
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

Result<Tenant> Tenants::of_uid(uint32_t uid) const {
  if (!from_config_) {
    Tenant t;
    t.name = fmt::format("uid-{}", uid);
    t.uids = {uid};
    return t;
  }
  for (const auto& t : list_)
    for (uint32_t u : t.uids)
      if (u == uid) return t;
  return Status(Errc::invalid_argument, fmt::format("uid {} is in no tenant of {}", uid, origin_));
}

}  // namespace rb::vrdma
