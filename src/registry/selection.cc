#include <optional>

#include <fmt/format.h>

#include "fault/faulty.hh"
#include "registry/registry.hh"

namespace rb::transport {
namespace {

Status bad(std::string msg) { return {Errc::invalid_argument, std::move(msg)}; }

// "a, b or c": the names a user may type.
std::string one_of(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return out;
}

std::string user_transports() {
  std::vector<std::string> names;
  for (auto& e : registry())
    if (!e.test_only) names.push_back(e.name);
  return one_of(names);
}

Status check_variant(const TransportEntry& e, const Selection& s) {
  if (s.variant.empty() || e.any_variant) return {};
  if (e.variant_help.empty())
    return bad(fmt::format("-t {}: transport {} takes no variant after the colon; use -t {}", s.label(), e.name, e.name));
  std::vector<std::string> known;
  for (auto& v : e.variants) {
    if (v.name == s.variant) return {};
    known.push_back(e.name + ":" + v.name);
  }
  return bad(fmt::format("-t {}: {} has no variant '{}' ({}); choose {}", s.label(), e.name, s.variant, e.variant_help,
                         one_of(known)));
}

}  // namespace

Result<OpenArgs> check_selection(const Selection& s, Use use) {
  const TransportEntry* e = find_transport(s.name);
  for (const auto& m : left_out())
    if (!e && m.name == s.name)
      return bad(fmt::format("-t {}: this build left {} out ({}); choose {}", s.label(), m.name, m.reason, user_transports()));
  if (!e || (e->test_only && use == Use::run)) {
    std::string what = e ? "is in-process, for the unit tests only" : "is not a transport";
    return bad(fmt::format("-t {}: '{}' {}; choose {} (rdmabench --list shows them)", s.label(), s.name, what,
                           user_transports()));
  }
  Status v = check_variant(*e, s);
  if (!v) return v;
  if (!s.domain.empty() && e->domain_help.empty())
    return bad(fmt::format("--domain {}: transport {} has no domains to choose; drop --domain", s.domain, e->name));
  auto opts = parse_options(e->name, e->options, s.options);
  if (!opts) return opts.status();
  return OpenArgs{s.variant, s.domain, "", std::move(opts.value())};
}

Result<std::unique_ptr<Domain>> open_selected(const Selection& s, const DomainSite& site, Use use) {
  auto args = check_selection(s, use);
  if (!args) return args.status();
  args->domain = site.domain;
  args->local_ip = site.local_ip;
  // A run's domains carry the test-only fault of RDMABENCH_FAULT, when set (fault/fault_plan.hh);
  // the in-process tests build their faults themselves, so a stray variable cannot skew them.
  std::optional<fault::FaultPlan> plan;
  if (use == Use::run) {
    auto env = fault::fault_plan_from_env();
    if (!env) return env.status();
    plan = *env;
  }
  auto dom = find_transport(s.name)->open(*args);
  if (!dom || !plan) return dom;
  return fault::with_faults(std::move(dom.value()), *plan);
}

}  // namespace rb::transport
