#include "preflight.hh"

#include <fmt/format.h>

#include "registry/registry.hh"

namespace rb::app {
namespace {

// The probe's instances that -t names: "ofi:tcp" is listed as "ofi:tcp;ofi_rxm" (the provider
// layered on a utility one); a -t without a variant names them all.
bool names_instance(const transport::Selection& chosen, const std::string& instance) {
  std::string label = chosen.label();
  if (chosen.variant.empty()) return instance == label || instance.rfind(label + ":", 0) == 0;
  return instance == label || instance.rfind(label + ";", 0) == 0;
}

Status refused(std::string message) { return {Errc::invalid_argument, std::move(message)}; }

// The verdict on `spec` given its transport's instances here.
// probe_variant, when given, asks about a variant none of `instances` names.
Status judge(const model::RunSpec& spec, const std::vector<transport::Availability>& instances,
             const std::function<transport::Availability(const std::string&)>& probe_variant) {
  const transport::Selection& chosen = spec.transport;
  std::string why_not;
  Status cannot_do;
  bool usable = false, seen = false;
  for (const auto& instance : instances) {
    if (!names_instance(chosen, instance.name)) continue;
    seen = true;
    if (!instance.usable) {
      if (why_not.empty()) why_not = instance.detail;
      continue;
    }
    if (!instance.caps) return {};  // capabilities known only once open: the run checks them
    Status st = model::check_caps(spec, *instance.caps, chosen.label());
    if (st.is_ok()) return {};
    if (cannot_do.is_ok()) cannot_do = st;
    usable = true;
  }
  if (usable) return refused(fmt::format("-t {}: {}", chosen.label(), cannot_do.message()));
  if (!seen && probe_variant) return judge(spec, {probe_variant(chosen.variant)}, {});
  return refused(fmt::format("-t {}: not usable here ({}); rdmabench --list shows what is", chosen.label(),
                             why_not.empty() ? "no such instance" : why_not));
}

}  // namespace

Status check_usable_here(const model::RunSpec& spec) { return UsableHere().check(spec); }

Status UsableHere::check(const model::RunSpec& spec) {
  const transport::TransportEntry* entry = transport::find_transport(spec.transport.name);
  if (!entry || !entry->probe) return {};  // check_selection has named an unknown one already
  // A transport whose -o options decide where to look is probed as the run's options say.
  std::string key = entry->name;
  std::function<std::vector<transport::Availability>()> probe = entry->probe;
  if (entry->probe_with) {
    auto args = transport::check_selection(spec.transport);
    if (!args) return args.status();
    for (const auto& [k, v] : spec.transport.options) key += fmt::format(" {}={}", k, v);
    probe = [entry, opts = args->options] { return entry->probe_with(opts); };
  }
  auto it = probed_.find(key);
  if (it == probed_.end()) it = probed_.emplace(key, probe()).first;
  std::function<transport::Availability(const std::string&)> ask;
  if (entry->any_variant && !spec.transport.variant.empty()) ask = entry->probe_variant;
  return judge(spec, it->second, ask);
}

}  // namespace rb::app
