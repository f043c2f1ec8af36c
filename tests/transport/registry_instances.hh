#pragma once
// The transport instances the in-process suites run: every registry entry times its
// test_variants, the test-only transports (inproc, skeleton) included.
#include <cctype>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "registry/registry.hh"

namespace rb::transport {

// One instance to test: a registry entry and one of its test_variants.
struct Instance {
  std::string transport, variant;
  std::string label() const { return variant.empty() ? transport : transport + ":" + variant; }
  Selection selection() const { return {transport, variant, "", {}}; }
  Result<std::unique_ptr<Domain>> open() const { return open_selected(selection(), {"", "127.0.0.1"}, Use::test); }
};
inline void PrintTo(const Instance& i, std::ostream* os) { *os << i.label(); }

inline std::vector<Instance> registry_instances() {
  std::vector<Instance> out;
  for (const auto& e : registry())
    for (const auto& v : e.test_variants) out.push_back({e.name, v});
  return out;
}

// Why this machine cannot run the instance (no GPU, no CUDA runtime), as the registry's probe says;
// nothing when the registry reports it usable here. Only such an instance may skip: one that
// should work and does not open fails the suite, or a broken transport would read as skipped.
inline std::optional<std::string> why_unusable_here(const Instance& i) {
  const TransportEntry* e = find_transport(i.transport);
  if (!e || e->test_only) return std::nullopt;
  for (const auto& a : e->probe())
    if (a.name == i.label() && !a.usable) return a.detail;
  return std::nullopt;
}

// A test name gtest accepts: "ofi:shm" -> "ofi_shm".
inline std::string instance_test_name(const Instance& i) {
  std::string name = i.label();
  for (char& c : name)
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
}

}  // namespace rb::transport
