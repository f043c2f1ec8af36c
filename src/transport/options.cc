#include "transport/options.hh"

#include <algorithm>

#include <fmt/format.h>

#include "core/bytes.hh"

namespace rb::transport {
namespace {

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

std::string range_text(const OptionSpec& o, std::string (*show)(uint64_t)) {
  bool low = o.min > 0, high = o.max != UINT64_MAX;
  if (low && high) return fmt::format(" from {} to {}", show(o.min), show(o.max));
  if (low) return fmt::format(" of at least {}", show(o.min));
  if (high) return fmt::format(" up to {}", show(o.max));
  return "";
}

std::string plain(uint64_t v) { return std::to_string(v); }

// A value the option accepts, for the "e.g." of an error.
std::string example(const OptionSpec& o) {
  if (!o.default_value.empty()) return o.default_value;
  switch (o.type) {
    case OptionType::boolean: return "1";
    case OptionType::uint: return plain(std::max<uint64_t>(o.min, 1));
    case OptionType::bytes: return format_bytes(std::max<uint64_t>(o.min, 4096));
    case OptionType::choice: return o.choices.empty() ? "" : o.choices[0];
    case OptionType::string: return "TEXT";
  }
  return "";
}

Result<OptionValues::Value> typed(const std::string& transport, const OptionSpec& o, const std::string& v) {
  auto bad = [&] {
    return Status(Errc::invalid_argument, fmt::format("-o {}={}: {} option {} takes {}; e.g. -o {}={}", o.key, v, transport,
                                                      o.key, option_rule(o), o.key, example(o)));
  };
  switch (o.type) {
    case OptionType::boolean:
      if (v == "1" || v == "true" || v == "yes" || v == "on") return OptionValues::Value(true);
      if (v == "0" || v == "false" || v == "no" || v == "off") return OptionValues::Value(false);
      return bad();
    case OptionType::uint:
    case OptionType::bytes: {
      uint64_t n = 0;
      if (o.type == OptionType::bytes) {
        auto b = parse_bytes(v, "-o");
        if (!b) return bad();
        n = *b;
      } else {
        char* end = nullptr;
        n = strtoull(v.c_str(), &end, 10);
        if (v.empty() || *end || v[0] == '-') return bad();
      }
      if (n < o.min || n > o.max) return bad();
      return OptionValues::Value(n);
    }
    case OptionType::choice:
      for (const auto& c : o.choices)
        if (c == v) return OptionValues::Value(v);
      return bad();
    case OptionType::string:
      return OptionValues::Value(v);
  }
  return bad();
}

}  // namespace

std::string option_usage(const OptionSpec& o) {
  switch (o.type) {
    case OptionType::boolean: return o.key + "=0|1";
    case OptionType::uint: return o.key + "=N";
    case OptionType::bytes: return o.key + "=BYTES";
    case OptionType::choice: return o.key + "=" + join(o.choices, "|");
    case OptionType::string: return o.key + "=TEXT";
  }
  return o.key;
}

std::string option_rule(const OptionSpec& o) {
  switch (o.type) {
    case OptionType::boolean: return "0 or 1";
    case OptionType::uint: return "a whole number" + range_text(o, plain);
    case OptionType::bytes: return "bytes like 64K or 4M" + range_text(o, format_bytes);
    case OptionType::choice: return "one of " + join(o.choices, ", ");
    case OptionType::string: return "text";
  }
  return "";
}

bool OptionValues::flag(const std::string& key) const {
  auto it = values_.find(key);
  return it != values_.end() && std::holds_alternative<bool>(it->second) && std::get<bool>(it->second);
}

uint64_t OptionValues::number(const std::string& key) const {
  auto it = values_.find(key);
  return it != values_.end() && std::holds_alternative<uint64_t>(it->second) ? std::get<uint64_t>(it->second) : 0;
}

std::string OptionValues::text(const std::string& key) const {
  auto it = values_.find(key);
  return it != values_.end() && std::holds_alternative<std::string>(it->second) ? std::get<std::string>(it->second) : "";
}

Result<OptionValues> parse_options(const std::string& transport, const std::vector<OptionSpec>& specs,
                                   const std::map<std::string, std::string>& given) {
  OptionValues out;
  for (const auto& [key, value] : given) {
    const OptionSpec* spec = nullptr;
    for (const auto& o : specs)
      if (o.key == key) spec = &o;
    if (!spec) {
      if (specs.empty())
        return Status(Errc::invalid_argument, fmt::format("-o {}={}: transport {} takes no -o options; drop -o", key, value, transport));
      std::vector<std::string> valid;
      for (const auto& o : specs) valid.push_back(option_usage(o));
      return Status(Errc::invalid_argument, fmt::format("-o {}={}: transport {} has no option '{}'; valid: {}", key, value,
                                                        transport, key, join(valid, ", ")));
    }
    auto v = typed(transport, *spec, value);
    if (!v) return v.status();
    out.set(key, std::move(v.value()));
  }
  for (const auto& o : specs) {
    if (out.has(o.key) || o.default_value.empty()) continue;
    auto v = typed(transport, o, o.default_value);
    if (!v) return Status(Errc::internal, fmt::format("transport {}: default of option {} is not valid: {}", transport, o.key, v.status().message()));
    out.set(o.key, std::move(v.value()));
  }
  return out;
}

}  // namespace rb::transport
