#include "list.hh"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "registry/registry.hh"

namespace rb::app {
namespace {

using nlohmann::json;
using transport::TransportEntry;

const char* type_name(transport::OptionType t) {
  switch (t) {
    case transport::OptionType::boolean: return "bool";
    case transport::OptionType::uint: return "uint";
    case transport::OptionType::bytes: return "bytes";
    case transport::OptionType::string: return "string";
    case transport::OptionType::choice: return "choice";
  }
  return "?";
}

json caps_json(const transport::Caps& c) {
  return {{"write", c.write}, {"read", c.read}, {"send", c.send}, {"max_msg", c.max_msg}, {"inject", c.inject},
          {"tx_depth", c.tx_depth}, {"rx_depth", c.rx_depth}, {"target_progress", c.target_progress},
          {"virtual_addressing", c.virtual_addressing}, {"selective_completion", c.selective_completion},
          {"peer_sees_writes", c.peer_sees_writes}, {"peer_memory_readable", c.peer_memory_readable},
          {"peer_memory_at_quiesce", c.peer_memory_at_quiesce},
          {"checks_bounds", c.checks_bounds}, {"checks_keys", c.checks_keys}, {"engine_thread", c.engine_thread},
          {"atomics", c.atomics}, {"imm_data", c.imm_data}, {"can_wait", c.can_wait}, {"link_gbps", c.link_gbps}};
}

json entry_json(const TransportEntry& e) {
  json variants = json::array(), options = json::array(), instances = json::array();
  for (const auto& v : e.variants) variants.push_back({{"name", v.name}, {"help", v.help}});
  for (const auto& o : e.options)
    options.push_back({{"key", o.key}, {"type", type_name(o.type)}, {"default", o.default_value}, {"help", o.help},
                       {"choices", o.choices}, {"rule", transport::option_rule(o)}});
  for (const auto& a : e.probe()) {
    json i = {{"name", a.name}, {"usable", a.usable}, {"detail", a.detail}};
    if (a.caps) i["caps"] = caps_json(*a.caps);
    instances.push_back(std::move(i));
  }
  return {{"name", e.name}, {"description", e.description}, {"default", e.is_default}, {"test_only", e.test_only},
          {"variant_help", e.variant_help}, {"variants", variants}, {"any_variant", e.any_variant},
          {"domain_help", e.domain_help}, {"options", options}, {"test_variants", e.test_variants},
          {"instances", instances}};
}

std::string entry_text(const TransportEntry& e) {
  std::string out = fmt::format("{:<10} {}{}\n", e.name, e.description, e.is_default ? " (the default)" : "");
  if (!e.variant_help.empty()) {
    out += fmt::format("{:<10}   -t {}:VARIANT, VARIANT is {}:\n", "", e.name, e.variant_help);
    for (const auto& v : e.variants) out += fmt::format("{:<10}     {:<8} {}\n", "", v.name, v.help);
  }
  if (!e.domain_help.empty()) out += fmt::format("{:<10}   --domain: {}\n", "", e.domain_help);
  if (e.options.empty()) out += fmt::format("{:<10}   options: none\n", "");
  for (const auto& o : e.options)
    out += fmt::format("{:<10}   -o {:<18} {} [{}: {}{}]\n", "", transport::option_usage(o), o.help, type_name(o.type),
                       transport::option_rule(o), o.default_value.empty() ? "" : ", default " + o.default_value);
  for (const auto& a : e.probe()) {
    out += fmt::format("  {:<22} {:<10} {}\n", a.name, a.usable ? "usable" : "unusable", a.detail);
    if (a.usable && a.caps) out += fmt::format("  {:<22} {:<10} caps: {}\n", "", "", transport::caps_flags(*a.caps));
  }
  return out;
}

}  // namespace

std::string list_text() {
  std::string out;
  for (const auto& e : transport::registry())
    if (!e.test_only) out += entry_text(e);
  for (const auto& m : transport::left_out()) out += fmt::format("{:<10} left out of this build: {}\n", m.name, m.reason);
  return out;
}

std::string list_json() {
  json all = json::array();
  for (const auto& e : transport::registry()) all.push_back(entry_json(e));
  json left_out = json::array();
  for (const auto& m : transport::left_out()) left_out.push_back({{"name", m.name}, {"reason", m.reason}});
  return json{{"transports", all}, {"left_out", left_out}}.dump(2) + "\n";
}

int print_list(bool json) {
  fmt::print("{}", json ? list_json() : list_text());
  return 0;
}

}  // namespace rb::app
