#include "flag_apply.hh"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include <fmt/format.h>

#include "model/sizes.hh"
#include "core/affinity.hh"

namespace rb::app {
namespace {

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t e = s.find(',', pos);
    if (e == std::string::npos) e = s.size();
    out.push_back(s.substr(pos, e - pos));
    pos = e + 1;
  }
  return out;
}

// "write,send" -> each item through `parse_one`; an item twice would run the same measurement twice.
template <class T>
Status parse_each(const std::string& flag, const std::string& text, Result<T> (*parse_one)(const std::string&),
                  std::vector<T>& out) {
  std::vector<T> items;
  for (const auto& item : split_list(text)) {
    auto r = parse_one(item);
    if (!r) return r.status();
    if (std::find(items.begin(), items.end(), *r) != items.end())
      return {Errc::invalid_argument, fmt::format("--{} '{}': {} is listed twice; give each once", flag, text, item)};
    items.push_back(*r);
  }
  out = std::move(items);
  return {};
}

}  // namespace

// A size in bytes; an empty text keeps the default, as an empty --random-space always has.
ApplyFlag bytes(uint64_t model::Addressing::*field) {
  return [field](const FlagInfo& f, const FlagValue& v, Command& c) -> Status {
    if (v.text().empty()) return {};
    std::string flag = "--" + f.name;
    auto n = model::parse_bytes(v.text(), flag.c_str());
    if (!n) return n.status();
    if (*n == 0) return {Errc::invalid_argument, fmt::format("{} 0: must be > 0 (leave it out for the default)", flag)};
    c.spec.*field = *n;
    return {};
  };
}

// A CPU list; an empty text pins nothing.
ApplyFlag cpus(std::vector<int>& (*field)(Command&)) {
  return [field](const FlagInfo& f, const FlagValue& v, Command& c) -> Status {
    if (v.text().empty()) return {};
    auto list = parse_cpu_list(v.text(), ("--" + f.name).c_str());
    if (!list) return list.status();
    field(c) = *list;
    return {};
  };
}

// --warmup 1000 (iterations, up to kMaxCount) or --warmup 2s (0 for none, else 1 ms to 1 day).
Status apply_warmup(const FlagInfo& f, const FlagValue& v, Command& c) {
  const std::string& w = v.text();
  if (!w.empty() && w.back() == 's') {
    std::string number = w.substr(0, w.size() - 1);
    auto s = to_seconds(f.name, number, "2s");
    if (!s || (*s != 0 && (*s < kMinSeconds || *s > kMaxSeconds)))
      return bad_value(f.name, w, "seconds must be 0 or from 0.001s (1 ms) to 86400s (1 day)", "2s");
    c.spec.warmup_s = *s;
    return {};
  }
  if (w.empty() || !std::isdigit(uint8_t(w[0])))
    return bad_value(f.name, w, "give iterations (1000) or seconds (2s, 0.5s)", "1000");
  auto n = to_unsigned(f.name, w, 0, kMaxCount, "1000");
  if (!n) return n.status();
  c.spec.warmup_iters = *n;
  return {};
}

Status apply_iters(const FlagInfo& f, const FlagValue& v, Command& c) {
  auto n = to_unsigned(f.name, v.text(), 1, kMaxCount, "2000");
  if (!n) return n.status();
  c.spec.iters = *n;
  return {};
}

Status apply_duration(const FlagInfo& f, const FlagValue& v, Command& c) {
  auto d = to_bounded_seconds(f.name, v.text(), "2.5");
  if (!d) return d.status();
  c.spec.duration_s = *d;
  return {};
}

Status apply_ops(const FlagInfo& f, const FlagValue& v, Command& c) {
  return parse_each(f.name, v.text(), model::parse_op, c.spec.ops);
}

Status apply_modes(const FlagInfo& f, const FlagValue& v, Command& c) {
  return parse_each(f.name, v.text(), model::parse_mode, c.spec.modes);
}

Status apply_sizes(const FlagInfo&, const FlagValue& v, Command& c) {
  auto sizes = model::parse_size_list(v.text(), "--size");
  if (!sizes) return sizes.status();
  c.spec.sizes = *sizes;
  return {};
}

Status apply_transport(const FlagInfo&, const FlagValue& v, Command& c) {
  auto chosen = transport::parse_selection(v.text());
  c.spec.transport.name = chosen.name;
  c.spec.transport.variant = chosen.variant;
  return {};
}

Status apply_domains(const FlagInfo&, const FlagValue& v, Command& c) {
  if (v.text().empty()) return {};
  c.spec.domains = split_list(v.text());
  for (auto& d : c.spec.domains)
    if (d.empty())
      return {Errc::invalid_argument, fmt::format("--domains '{}': an empty name; give NICs like eth1,eth2", v.text())};
  return {};
}

Status apply_transport_opts(const FlagInfo&, const FlagValue& v, Command& c) {
  for (const auto& kv : v.texts) {
    auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0)
      return {Errc::invalid_argument, fmt::format("-o '{}': give KEY=VALUE, e.g. -o nodelay=0", kv)};
    c.spec.transport.options[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return {};
}

Status apply_no_inject(const FlagInfo&, const FlagValue&, Command& c) {
  c.spec.inject = false;
  return {};
}

}  // namespace rb::app
