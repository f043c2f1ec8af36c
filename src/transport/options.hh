#pragma once
// A transport's own options (-o KEY=VALUE). Each registry entry declares its options, typed,
// with defaults and help; one parser checks what was typed against that declaration before
// anything starts, so a transport only ever reads values of the right type and range.
#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "core/status.hh"

namespace rb::transport {

enum class OptionType { boolean, uint, bytes, string, choice };

struct OptionSpec {
  std::string key;
  OptionType type = OptionType::string;
  std::string default_value;         // as one would type it; empty: none (the transport or the kernel decides)
  std::string help;
  std::vector<std::string> choices;  // OptionType::choice
  uint64_t min = 0, max = UINT64_MAX;  // OptionType::uint and bytes
};

// "nodelay=0|1", "sndbuf=BYTES", "mode=a|b": how the option is typed.
std::string option_usage(const OptionSpec& o);
// What values it takes, for --list and error messages: "0 or 1", "bytes from 4K to 1G".
std::string option_rule(const OptionSpec& o);

// Checked values: every declared option with a default or a given value, already typed.
class OptionValues {
 public:
  using Value = std::variant<bool, uint64_t, std::string>;
  void set(const std::string& key, Value v) { values_[key] = std::move(v); }
  bool has(const std::string& key) const { return values_.count(key) != 0; }
  bool flag(const std::string& key) const;         // boolean; false when unset
  uint64_t number(const std::string& key) const;   // uint and bytes; 0 when unset
  std::string text(const std::string& key) const;  // string and choice; "" when unset

 private:
  std::map<std::string, Value> values_;
};

// Checks `given` (-o KEY=VALUE as typed) against `specs` of the transport named `transport`.
// An unknown key, a value of the wrong type or out of range is an invalid_argument error naming
// the key, the value, the rule and the keys there are. Defaults fill in what was not given.
Result<OptionValues> parse_options(const std::string& transport, const std::vector<OptionSpec>& specs,
                                   const std::map<std::string, std::string>& given);

}  // namespace rb::transport
