#include "completion.hh"

#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "flags.hh"
#include "model/spec.hh"
#include "registry/registry.hh"

namespace rb::app {
namespace {

std::string words(const std::set<std::string>& w) {
  std::string out;
  for (const auto& s : w) out += (out.empty() ? "" : " ") + s;
  return out;
}

// Every name a flag answers to: --long, its aliases, -s.
std::set<std::string> flag_names() {
  std::set<std::string> out;
  for (const FlagInfo& f : flag_table()) {
    if (f.group.empty() && f.name != "help") continue;  // internal flags (--ready-fd) are not offered
    out.insert("--" + f.name);
    for (const auto& a : f.aliases) out.insert("--" + a);
    if (!f.short_name.empty()) out.insert("-" + f.short_name);
  }
  return out;
}

// -t's values: each transport, and NAME:VARIANT for its known variants.
std::set<std::string> transport_names() {
  std::set<std::string> out;
  for (const auto& t : transport::registry()) {
    if (t.test_only) continue;
    out.insert(t.name);
    for (const auto& v : t.variants) out.insert(t.name + ":" + v.name);
  }
  return out;
}

// -o's keys, each with its '=': the union over the transports (-t decides which one applies).
std::set<std::string> option_keys() {
  std::set<std::string> out;
  for (const auto& t : transport::registry())
    for (const auto& o : t.options) out.insert(o.key + "=");
  return out;
}

}  // namespace

std::string bash_completion() {
  return fmt::format(R"(# bash completion for rdmabench, made by `rdmabench --completion bash` (version {version})
# from its flag table and the transports this build has.
_rdmabench() {{
  local cur=${{COMP_WORDS[COMP_CWORD]}} prev=${{COMP_WORDS[COMP_CWORD-1]}}
  case "$prev" in
    -t|--transport) COMPREPLY=($(compgen -W "{transports}" -- "$cur")); return ;;
    -o|--option) compopt -o nospace 2>/dev/null; COMPREPLY=($(compgen -W "{options}" -- "$cur")); return ;;
    --op) COMPREPLY=($(compgen -W "{ops}" -- "$cur")); return ;;
    --mode) COMPREPLY=($(compgen -W "bw lat bw,lat" -- "$cur")); return ;;
    --pattern) COMPREPLY=($(compgen -W "pairs ring alltoall incast" -- "$cur")); return ;;
    --bootstrap) COMPREPLY=($(compgen -W "auto pmix mpi" -- "$cur")); return ;;
    --list) COMPREPLY=($(compgen -W "json" -- "$cur")); return ;;
    --completion) COMPREPLY=($(compgen -W "bash" -- "$cur")); return ;;
    --job|--json|--csv|--hosts) COMPREPLY=($(compgen -f -- "$cur")); return ;;
  esac
  [[ $cur == -* ]] && COMPREPLY=($(compgen -W "{flags}" -- "$cur"))
}}
complete -F _rdmabench rdmabench
)",
                     fmt::arg("version", RDMABENCH_VERSION), fmt::arg("transports", words(transport_names())),
                     fmt::arg("options", words(option_keys())), fmt::arg("flags", words(flag_names())),
                     fmt::arg("ops", fmt::join(model::op_names(), " ")));
}

}  // namespace rb::app
