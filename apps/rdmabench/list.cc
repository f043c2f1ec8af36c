#include "list.hh"

#include <fmt/format.h>

#include "transport/registry.hh"

namespace rb::app {

int print_list() {
  for (auto& e : transport::registry()) {
    fmt::print("{:<10} {}\n", e.name, e.description);
    fmt::print("{:<10}   options: {}\n", "", e.options_help);
    for (auto& a : e.probe())
      fmt::print("  {:<22} {:<10} {}\n", a.name, a.usable ? "usable" : "unusable", a.detail);
  }
  return 0;
}

}  // namespace rb::app
