// argv -> FlagValues (CLI11 reads the flags' texts; nothing is converted here) -> Command.
#include "cli.hh"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "fault/fault_plan.hh"
#include "transport_help.hh"

namespace rb::app {
namespace {

const char* kDescription =
    "rdmabench: RDMA WRITE/READ and SEND/RECV throughput, message rate and latency between a client and a server.\n"
    "  rdmabench --server [--addr IP:PORT]          serve runs (one after another) until stopped\n"
    "  rdmabench --addr IP:PORT [run flags]         run against a server\n"
    "  rdmabench [--loopback] [run flags]           start a server child on 127.0.0.1 and run against it\n"
    "  rdmabench --job FILE.toml [flags]            run a matrix of runs described in a TOML job file (see jobs/)\n"
    "  rdmabench --list [json]                      transports and providers usable here\n";

std::string cli11_names(const FlagInfo& f) {
  std::string names = f.short_name.empty() ? "" : "-" + f.short_name + ",";
  names += "--" + f.name;
  for (const auto& a : f.aliases) names += ",--" + a;
  return names;
}

// One CLI11 option per table flag, holding its texts as typed: every occurrence is kept
// (TakeAll), so a flag given twice is our error, not CLI11's, and so is a value that does not
// convert, since nothing is converted here.
std::vector<std::pair<const FlagInfo*, CLI::Option*>> define_options(CLI::App& app) {
  app.get_formatter()->column_width(34);
  app.footer(transports_epilogue());
  std::vector<std::pair<const FlagInfo*, CLI::Option*>> out;
  for (const FlagInfo& f : flag_table()) {
    if (f.name == "help") continue;  // CLI11's own -h,--help
    CLI::Option* o = f.is_switch ? app.add_flag(cli11_names(f), f.help) : app.add_option(cli11_names(f), f.help);
    if (!f.is_switch) {
      o->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)->type_name(f.type_name);
      if (f.value_optional) o->expected(0, 1);
      // As a std::vector binding would: one -o may carry several KEY=VALUE arguments.
      if (f.repeatable) o->expected(CLI::detail::expected_max_vector_size);
      if (!f.default_text.empty()) o->default_str(f.default_text);
    }
    o->group(f.group);
    out.emplace_back(&f, o);
  }
  return out;
}

// A switch is on unless given a false value (--validate=false); a value CLI11 cannot read as
// on or off is an error in our wording.
Result<bool> switch_state(const FlagInfo& f, const CLI::Option& o) {
  try {
    return o.as<bool>();
  } catch (const CLI::ConversionError&) {
    return Status(Errc::invalid_argument, fmt::format("--{}={}: a switch is on or off; give --{}, or --{}=false to leave it off",
                                                      f.name, o.results().back(), f.name, f.name));
  }
}

Result<FlagValues> read_values(const std::vector<std::pair<const FlagInfo*, CLI::Option*>>& options) {
  FlagValues values;
  for (auto [f, o] : options) {
    if (o->count() == 0) continue;
    if (f->is_switch) {
      auto on = switch_state(*f, *o);
      if (!on) return on.status();
      if (*on) values.set(f->name, {});
    } else {
      values.set(f->name, {o->results(), {}});
    }
  }
  return values;
}

// --job: the file is read later (job.cc); here only the flags beside it are collected, unchecked,
// because they are [defaults] for runs the file has not described yet.
Result<Command> job_command(const FlagValues& values) {
  for (const char* f : {"server", "once", "list", "version"})
    if (values.given(f))
      return Status(Errc::invalid_argument, "--job runs a client: leave out --server, --once, --list and --version");
  Command cmd;
  cmd.kind = Command::Kind::job;
  cmd.job = values.find("job")->text();
  for (const FlagInfo& f : flag_table()) {
    const FlagValue* v = values.find(f.name);
    if (!v || !f.in_job) continue;
    if (Status once = check_given_once(f, *v); !once) return once;
    cmd.given.push_back({f.name, f.is_switch ? "" : v->text(), f.is_switch});
  }
  return cmd;
}

// Words that are no flag of ours (CLI11: "The following argument was not expected").
Status not_a_flag(const std::vector<std::string>& extras) {
  std::string first = extras.empty() ? std::string("?") : extras.front();
  if (first.rfind("-", 0) == 0)
    return Status(Errc::invalid_argument, fmt::format("{}: not an rdmabench flag; rdmabench --help lists them", first));
  return Status(Errc::invalid_argument,
                fmt::format("'{}': a value with no flag before it; flags take one value each (lists are comma "
                            "separated: --size 64,4K); see rdmabench --help", first));
}

// A value flag given last with no value (CLI11: "--threads: 1 required INT missing").
Status value_missing(const std::string& what) {
  std::string flag = what.substr(0, what.find(':'));
  std::string name = flag.substr(flag.find_first_not_of('-') == std::string::npos ? 0 : flag.find_first_not_of('-'));
  const FlagInfo* f = find_flag(name);
  std::string type = f ? f->type_name : "VALUE";
  return Status(Errc::invalid_argument, fmt::format("{}: no value; give {} {}", flag, flag, type));
}

}  // namespace

Result<Command> parse_command_line(const std::vector<std::string>& args) {
  std::vector<std::string> copy;
  copy.reserve(args.size() + 1);
  copy.push_back("rdmabench");
  copy.insert(copy.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  return parse_command_line(int(copy.size()), argv.data());
}

Result<Command> parse_command_line(int argc, char** argv) {
  CLI::App app{kDescription, "rdmabench"};
  auto options = define_options(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    Command cmd;
    cmd.kind = Command::Kind::help;
    cmd.help = app.help();
    return cmd;
  } catch (const CLI::ExtrasError&) {
    return not_a_flag(app.remaining(true));
  } catch (const CLI::ArgumentMismatch& e) {
    return value_missing(e.what());
  } catch (const CLI::ParseError& e) {
    return Status(Errc::invalid_argument, std::string(e.what()) + "; see rdmabench --help");
  }
  auto values = read_values(options);
  if (!values) return values.status();
  if (values->given("job")) return job_command(*values);
  // Checked up front, as a flag would be: a malformed test fault is a mistake, never ignored.
  if (auto fault = transport::fault::fault_plan_from_env(); !fault) return fault.status();
  auto cmd = build_command(*values);
  if (!cmd) return cmd.error().status;
  return std::move(*cmd);
}

}  // namespace rb::app
