#pragma once
// How a flag's value text becomes its part of the Command: the `apply` of each flag_table() entry.
// Errors are the flag's own one-liners (flag_text.hh for numbers).
#include <string>
#include <type_traits>
#include <vector>

#include "flag_text.hh"
#include "flags.hh"

namespace rb::app {

// The part of a Command that a member pointer points into, so one helper serves them all.
template <class Part>
Part& part_of(Command& c) {
  if constexpr (std::is_base_of_v<Part, model::RunSpec>) return c.spec;
  else if constexpr (std::is_same_v<Part, transport::Selection>) return c.spec.transport;
  else if constexpr (std::is_same_v<Part, engine::ServerOptions>) return c.server;
  else if constexpr (std::is_same_v<Part, report::OutputPaths>) return c.output;
  else if constexpr (std::is_same_v<Part, cluster::ClusterOptions>) return c.cluster;
  else return c;
}

// A whole number from lo to hi (the flag's range, said in its error).
template <class T, class Part>
ApplyFlag whole(T Part::*field, std::string example, T lo, T hi) {
  return [field, example, lo, hi](const FlagInfo& f, const FlagValue& v, Command& c) -> Status {
    auto n = to_whole<T>(f.name, v.text(), example, lo, hi);
    if (!n) return n.status();
    part_of<Part>(c).*field = *n;
    return {};
  };
}

// Seconds from 1 ms to 1 day (to_bounded_seconds); with `zero_is_off`, 0 too.
template <class Part>
ApplyFlag seconds(double Part::*field, std::string example, bool zero_is_off = false) {
  return [field, example, zero_is_off](const FlagInfo& f, const FlagValue& v, Command& c) -> Status {
    auto n = zero_is_off && v.text() == "0" ? Result<double>(0.0) : to_bounded_seconds(f.name, v.text(), example);
    if (!n) return n.status();
    part_of<Part>(c).*field = *n;
    return {};
  };
}

template <class Part>
ApplyFlag text(std::string Part::*field) {
  return [field](const FlagInfo&, const FlagValue& v, Command& c) {
    part_of<Part>(c).*field = v.text();
    return Status{};
  };
}

template <class Part>
ApplyFlag switch_on(bool Part::*field) {
  return [field](const FlagInfo&, const FlagValue&, Command& c) {
    part_of<Part>(c).*field = true;
    return Status{};
  };
}

ApplyFlag bytes(uint64_t model::Addressing::*field);
ApplyFlag cpus(std::vector<int>& (*field)(Command&));

Status apply_warmup(const FlagInfo&, const FlagValue& v, Command& c);
Status apply_iters(const FlagInfo& f, const FlagValue& v, Command& c);
Status apply_duration(const FlagInfo& f, const FlagValue& v, Command& c);
Status apply_ops(const FlagInfo&, const FlagValue& v, Command& c);
Status apply_modes(const FlagInfo&, const FlagValue& v, Command& c);
Status apply_sizes(const FlagInfo&, const FlagValue& v, Command& c);
Status apply_transport(const FlagInfo&, const FlagValue& v, Command& c);
Status apply_domains(const FlagInfo&, const FlagValue& v, Command& c);
Status apply_transport_opts(const FlagInfo&, const FlagValue& v, Command& c);
Status apply_no_inject(const FlagInfo&, const FlagValue&, Command& c);

}  // namespace rb::app
