#pragma once
// Which transport a run uses, as the user chose it: `-t NAME[:VARIANT]`, `--domain` and `-o`.
// Plain data, carried in the run description from client to server; the registry checks it
// against the chosen entry (src/registry/registry.hh: check_selection) before anything starts.
#include <map>
#include <string>

namespace rb::transport {

struct Selection {
  std::string name;     // a registry entry: "ofi"
  std::string variant;  // the part after the colon: "shm"; empty = the transport's default
  std::string domain;   // --domain of this side; what it means is the entry's domain_help; empty = default
  std::map<std::string, std::string> options;  // -o KEY=VALUE as typed

  std::string label() const { return variant.empty() ? name : name + ":" + variant; }
};

// "ofi:shm" -> name "ofi", variant "shm"; "tcp" -> name "tcp", no variant.
inline Selection parse_selection(const std::string& text) {
  auto colon = text.find(':');
  if (colon == std::string::npos) return {text, "", "", {}};
  return {text.substr(0, colon), text.substr(colon + 1), "", {}};
}

}  // namespace rb::transport
