#include "transport_help.hh"

#include <fmt/format.h>

#include "registry/registry.hh"

namespace rb::app {
namespace {

using transport::TransportEntry;

// The entries a user may choose: test-only ones stay out of --help.
template <class F>
void for_each_user_entry(F f) {
  for (const auto& e : transport::registry())
    if (!e.test_only) f(e);
}

std::string variants_line(const TransportEntry& e) {
  std::string out;
  for (const auto& v : e.variants) out += fmt::format("{}{}:{} ({})", out.empty() ? "" : ", ", e.name, v.name, v.help);
  if (e.any_variant) out += ", or any other";
  return out;
}

std::string option_line(const transport::OptionSpec& o) {
  std::string dflt = o.default_value.empty() ? "" : fmt::format(" (default {})", o.default_value);
  return fmt::format("      -o {:<22} {}{}\n", transport::option_usage(o), o.help, dflt);
}

}  // namespace

std::string transport_flag_help() {
  std::string names;
  for_each_user_entry([&](const TransportEntry& e) {
    names += (names.empty() ? "" : ", ") + e.name + (e.variant_help.empty() ? "" : "[:VARIANT]");
  });
  return fmt::format("NAME[:VARIANT]: {} (see Transports below)", names);
}

std::string domain_flag_help() {
  std::string takers;
  for_each_user_entry([&](const TransportEntry& e) {
    if (!e.domain_help.empty()) takers += (takers.empty() ? "" : ", ") + e.name;
  });
  return fmt::format("this side's device; what it names depends on -t ({}: see Transports below)", takers);
}

std::string option_flag_help() {
  return "a transport's own option KEY=VALUE, repeatable, checked before anything starts (keys under Transports below)";
}

std::string transports_epilogue() {
  std::string out = "Transports (-t NAME[:VARIANT]; rdmabench --list shows which are usable here):\n";
  for_each_user_entry([&](const TransportEntry& e) {
    out += fmt::format("  {}{}  {}\n", e.name, e.is_default ? " (default)" : "", e.description);
    if (!e.variant_help.empty()) {
      out += fmt::format("      {}:VARIANT  {}\n", e.name, e.variant_help);
      out += fmt::format("        {}\n", variants_line(e));
    }
    if (!e.domain_help.empty()) out += fmt::format("      --domain  {}\n", e.domain_help);
    for (const auto& o : e.options) out += option_line(o);
  });
  for (const auto& m : transport::left_out()) out += fmt::format("  {}  left out of this build: {}\n", m.name, m.reason);
  return out;
}

}  // namespace rb::app
