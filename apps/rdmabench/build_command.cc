// FlagValues -> Command: the flags applied one by one, then the rules that involve several.
#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "cli.hh"
#include "cluster_flags.hh"
#include "core/bytes.hh"
#include "registry/registry.hh"

namespace rb::app {
namespace {

Status bad(std::string msg) { return {Errc::invalid_argument, std::move(msg)}; }

// The error blamed on the first of `flags` that was given; on none when none was.
FlagError blame(const FlagValues& values, const std::vector<std::string>& flags, Status st) {
  for (const auto& f : flags)
    if (values.given(f)) return {f, std::move(st)};
  return {"", std::move(st)};
}

// An empty value is a slip (an unset shell variable, a stray '='): leaving the flag out is how a
// default is asked for.
Status check_not_empty(const FlagInfo& f, const FlagValue& v) {
  if (f.is_switch || f.value_optional) return {};
  for (const auto& t : v.texts)
    if (t.empty()) return bad(fmt::format("--{} '': an empty value; give one, or leave --{} out for its default", f.name, f.name));
  return {};
}

Status apply_flag(const FlagInfo& f, const FlagValue& v, Command& cmd) {
  if (Status once = check_given_once(f, v); !once) return once;
  if (Status empty = check_not_empty(f, v); !empty) return empty;
  if (!f.apply) return {};
  return f.apply(f, v, cmd);
}

FlagError apply_all(const FlagValues& values, Command& cmd) {
  for (const auto& f : flag_table()) {
    const FlagValue* v = values.find(f.name);
    if (!v) continue;
    if (Status st = apply_flag(f, *v, cmd); !st) return {f.name, st};
  }
  return {};
}

// The transport, its domain and its options, checked in that order so that an error is blamed on
// the part that was added when it appeared.
FlagError check_transport(const transport::Selection& chosen) {
  transport::Selection s{chosen.name, chosen.variant, "", {}};
  if (auto r = transport::check_selection(s); !r) return {"transport", r.status()};
  s.domain = chosen.domain;
  if (auto r = transport::check_selection(s); !r) return {"domain", r.status()};
  s.options = chosen.options;
  if (auto r = transport::check_selection(s); !r) return {"transport-opt", r.status()};
  return {};
}

// A flag that shapes a stream means nothing to a latency-only run: given anyway, it is a mistake
// worth saying. This is about what the user typed, so it lives here and not in the spec's checks.
FlagError stream_flags_in_latency_run(const FlagValues& values, const model::RunSpec& s) {
  if (std::find(s.modes.begin(), s.modes.end(), model::Mode::bw) != s.modes.end()) return {};
  if (values.given("depth") && s.depth != 1)
    return blame(values, {"depth", "mode"}, bad(fmt::format("--depth {} with --mode lat: latency runs keep one op in flight; "
                                                            "drop --depth or add --mode bw", s.depth)));
  if (values.given("batch") && s.batch != 1)
    return blame(values, {"batch", "mode"}, bad(fmt::format("--batch {} with --mode lat: latency runs post one op at a time; "
                                                            "drop --batch or add --mode bw", s.batch)));
  if (values.given("lazy"))
    return blame(values, {"lazy", "mode"}, bad("--lazy with --mode lat: a latency run posts one op at a time, so there "
                                               "is no burst to defer; drop --lazy or add --mode bw"));
  if (values.given("signal") && s.signal != 1)
    return blame(values, {"signal", "mode"},
                 bad(fmt::format("--signal {} with --mode lat: every latency op is signaled; drop --signal", s.signal)));
  return {};
}

// --read is --op read: the two must agree.
FlagError read_or_op(const FlagValues& values, model::RunSpec& s) {
  if (!values.given("read")) return {};
  const FlagValue* op = values.find("op");
  if (op && !op->text().empty() && op->text() != "read")
    return blame(values, {"read", "op"},
                 bad(fmt::format("--read and --op {} disagree: --read means --op read; give one", op->text())));
  s.ops = {engine::Op::read};
  return {};
}

// Atomics move 8 bytes: a run of atomics alone defaults to that size and refuses any other.
FlagError atomic_sizes(const FlagValues& values, model::RunSpec& s) {
  if (!std::all_of(s.ops.begin(), s.ops.end(), model::is_atomic)) return {};
  if (!values.given("size")) {
    s.sizes = {transport::kAtomicBytes};
    return {};
  }
  for (uint64_t size : s.sizes)
    if (size != transport::kAtomicBytes)
      return blame(values, {"size", "op"},
                   bad(fmt::format("--size {} with --op {}: atomics move 8 bytes; drop --size or give 8",
                                   bytes_with_unit(size), transport::op_name(s.ops.front()))));
  return {};
}

// The rules between flags that hold for every kind of command.
FlagError check_between_flags(const FlagValues& values, Command& cmd) {
  model::RunSpec& s = cmd.spec;
  if (!s.domains.empty() && !values.given("rails")) s.rails = int(s.domains.size());
  if (FlagError e = check_transport(s.transport); !e.status) return e;
  if (FlagError e = read_or_op(values, s); !e.status) return e;
  if (FlagError e = atomic_sizes(values, s); !e.status) return e;
  return stream_flags_in_latency_run(values, s);
}

// A flag the other role ignores, given anyway, is a mistake worth saying (--iters on a server: the
// client decides the run; --once on a client). The first such flag, in table order.
FlagError flag_of_the_other_role(const FlagValues& values, FlagRole other) {
  for (const auto& f : flag_table()) {
    if (f.role != other || !values.given(f.name)) continue;
    if (other == FlagRole::client)
      return {f.name, bad(fmt::format("--{} with --server: the client describes the run, so a server takes only --addr, "
                                      "--once, --quiet, --domain, --domains, --cpus and --timeout; give --{} to the client",
                                      f.name, f.name))};
    return {f.name, bad(fmt::format("--{} applies to --server only; drop it", f.name))};
  }
  return {};
}

FlagResult<Command> server_command(const FlagValues& values, Command cmd) {
  if (values.given("loopback")) return blame(values, {"server", "loopback"}, bad("--server and --loopback: choose one"));
  if (FlagError e = flag_of_the_other_role(values, FlagRole::client); !e.status) return e;
  const FlagValue* addr = values.find("addr");
  std::string listen = addr && !addr->text().empty() ? addr->text() : "0.0.0.0";
  auto hp = bootstrap::parse_host_port(listen, kDefaultPort, "--addr");
  if (!hp) return FlagError{"addr", hp.status()};
  cmd.kind = Command::Kind::server;
  cmd.server.listen = *hp;
  cmd.server.domain = cmd.spec.transport.domain;
  cmd.server.domains = cmd.spec.domains;
  cmd.server.cpus = cmd.spec.cpus;
  cmd.server.hello_timeout_s = cmd.spec.timeout_s;
  return cmd;
}

// --json and --csv appending to one file would interleave two formats that neither reader can parse.
FlagError one_file_per_format(const report::OutputPaths& out) {
  if (out.json.empty() || out.csv.empty()) return {};
  auto where = [](const std::string& path) {
    std::error_code ec;
    auto p = std::filesystem::weakly_canonical(std::filesystem::absolute(path, ec), ec);
    return ec ? std::filesystem::path(path).lexically_normal() : p;
  };
  if (where(out.json) != where(out.csv)) return {};
  return {"csv", bad(fmt::format("--csv {}: the same file as --json {}; give each its own file", out.csv, out.json))};
}

FlagResult<Command> client_command(const FlagValues& values, Command cmd) {
  if (FlagError e = flag_of_the_other_role(values, FlagRole::server); !e.status) return e;
  model::SpecProblem p = model::first_problem(cmd.spec);
  if (!p.status) return blame(values, p.flags, p.status);
  if (FlagError e = one_file_per_format(cmd.output); !e.status) return e;
  const FlagValue* addr = values.find("addr");
  bool has_addr = addr && !addr->text().empty();
  if (values.given("loopback") || !has_addr) {
    if (has_addr)
      return blame(values, {"loopback", "addr"}, bad("--loopback and --addr: choose one (--loopback picks its own port)"));
    cmd.kind = Command::Kind::loopback;
    return cmd;
  }
  auto hp = bootstrap::parse_host_port(addr->text(), kDefaultPort, "--addr");
  if (!hp) return FlagError{"addr", hp.status()};
  cmd.kind = Command::Kind::client;
  cmd.client.server = *hp;
  return cmd;
}

}  // namespace

FlagResult<Command> build_command(const FlagValues& values) {
  Command cmd;
  cmd.spec.transport.name = transport::default_transport().name;  // -t's default is the registry's
  if (values.given("version")) {
    cmd.kind = Command::Kind::version;
    return cmd;
  }
  if (const FlagValue* shell = values.find("completion")) {
    if (shell->text() != "bash")
      return FlagError{"completion", bad(fmt::format("--completion {}: the only shell is bash; give --completion bash",
                                                     shell->text()))};
    cmd.kind = Command::Kind::completion;
    return cmd;
  }
  if (const FlagValue* list = values.find("list")) {
    std::string format = list->texts.empty() ? "" : list->text();
    if (!format.empty() && format != "json")
      return FlagError{"list", bad(fmt::format("--list {}: the only format is json; give --list or --list json", format))};
    cmd.kind = Command::Kind::list;
    cmd.list_json = format == "json";
    return cmd;
  }
  if (FlagError e = apply_all(values, cmd); !e.status) return e;
  if (FlagError e = check_between_flags(values, cmd); !e.status) return e;
  if (values.given("cluster")) {
    model::SpecProblem p = model::first_problem(cmd.spec);
    if (!p.status) return blame(values, p.flags, p.status);
    return cluster_command(values, std::move(cmd));
  }
  if (FlagError e = cluster_flag_without_cluster(values); !e.status) return e;
  if (values.given("server")) return server_command(values, std::move(cmd));
  return client_command(values, std::move(cmd));
}

}  // namespace rb::app
