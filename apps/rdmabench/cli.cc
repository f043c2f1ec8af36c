#include "cli.hh"

#include <algorithm>
#include <functional>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "bench/sizes.hh"
#include "core/affinity.hh"
#include "transport/fault/fault_plan.hh"
#include "transport/registry.hh"
#include "transport_help.hh"

namespace rb::app {
namespace {

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t e = s.find(',', pos);
    if (e == std::string::npos) e = s.size();
    out.push_back(s.substr(pos, e - pos));
    pos = e + 1;
  }
  return out;
}

Status parse_warmup(const std::string& w, bench::RunSpec& s) {
  if (!w.empty() && w.back() == 's') {
    char* end = nullptr;
    double v = strtod(w.c_str(), &end);
    if (end != w.c_str() + w.size() - 1 || v < 0)
      return {Errc::invalid_argument, fmt::format("--warmup '{}': give iterations (1000) or seconds (2s, 0.5s)", w)};
    s.warmup_s = v;
    return {};
  }
  char* end = nullptr;
  unsigned long long v = strtoull(w.c_str(), &end, 10);
  if (w.empty() || *end || w[0] == '-')
    return {Errc::invalid_argument, fmt::format("--warmup '{}': give iterations (1000) or seconds (2s, 0.5s)", w)};
  s.warmup_iters = v;
  return {};
}

// A flag that shapes a stream means nothing to a latency-only run: given anyway, it is a mistake
// worth saying. This is about what the user typed, so it lives here and not in the spec's checks.
Status stream_flags_in_latency_run(const bench::RunSpec& s, const std::function<bool(const char*)>& given) {
  if (std::find(s.modes.begin(), s.modes.end(), bench::Mode::bw) != s.modes.end()) return {};
  auto bad = [](std::string m) { return Status(Errc::invalid_argument, std::move(m)); };
  if (given("--depth") && s.depth != 1)
    return bad(fmt::format("--depth {} with --mode lat: latency runs keep one op in flight; drop --depth or add --mode bw", s.depth));
  if (given("--batch") && s.batch != 1)
    return bad(fmt::format("--batch {} with --mode lat: latency runs post one op at a time; drop --batch or add --mode bw", s.batch));
  if (given("--signal") && s.signal != 1)
    return bad(fmt::format("--signal {} with --mode lat: every latency op is signaled; drop --signal", s.signal));
  return {};
}

const char* kDescription =
    "rdmabench: RDMA WRITE/READ and SEND/RECV throughput, message rate and latency between a client and a server.\n"
    "  rdmabench --server [--addr IP:PORT]          serve runs (one after another) until stopped\n"
    "  rdmabench --addr IP:PORT [run flags]         run against a server\n"
    "  rdmabench [--loopback] [run flags]           start a server child on 127.0.0.1 and run against it\n"
    "  rdmabench --job FILE.toml [flags]            run a matrix of runs described in a TOML job file (see jobs/)\n"
    "  rdmabench --list [json]                      transports and providers usable here\n";

// The values CLI11 writes into before they are checked and converted into the Command.
struct Raw {
  bool server = false, loopback = false, version = false, read_alias = false, no_inject = false;
  std::string addr, transport = transport::default_transport().name, list_format, op, mode, size = "64K", warmup, random_space, thread_gap, local_mr, cpus,
      server_cpus, job;
  uint64_t iters = 0;
  double duration = 0;
  int ready_fd = -1;
  std::vector<std::string> transport_opts;
  std::string domains;
};

// Flags that describe the process rather than one run: a job file cannot set them.
constexpr const char* kNotInJob[] = {"server", "once", "list", "version", "ready-fd", "help", "job", "quiet"};

// Every flag, defined once: parse_command_line parses with it and flag_table() lists it, so a job
// file accepts exactly the flags the command line does.
void define_flags(CLI::App& app, Command& cmd, Raw& r) {
  auto& s = cmd.spec;
  app.get_formatter()->column_width(34);

  auto* g_role = "Role";
  app.add_flag("--server", r.server, "wait for clients and serve their runs")->group(g_role);
  app.add_option("--addr", r.addr, "server address HOST:PORT (default port 7471; server default 0.0.0.0:7471)")->group(g_role);
  app.add_flag("--loopback", r.loopback, "run a server child on 127.0.0.1 (the default with no --addr)")->group(g_role);
  app.add_flag("--once", cmd.server.once, "server: exit after serving one run")->group(g_role);
  app.add_option("--job", r.job, "run every combination of a TOML job file ([defaults], [matrix], [[run]]) into one "
                                 "--json file; flags given here replace its [defaults]")->type_name("FILE.toml")->group(g_role);
  app.add_option("--list", r.list_format, "list transports, their options, and the instances usable on this machine "
                                          "(--list json: the same for programs)")
      ->expected(0, 1)->type_name("[json]")->group(g_role);
  app.add_flag("--version", r.version, "print the version")->group(g_role);
  app.add_option("--ready-fd", r.ready_fd, "internal: write the listening port to this fd")->group("");

  auto* g_tr = "Transport";
  app.add_option("-t,--transport", r.transport, transport_flag_help())->capture_default_str()->group(g_tr);
  app.add_option("--domain", s.transport.domain, domain_flag_help())->group(g_tr);
  app.add_option("--domains", r.domains, "one NIC per rail, e.g. eth1,eth2 (sets --rails); a server given "
                                        "--domains uses them for such clients, else the NIC on each rail's subnet")
      ->group(g_tr);
  app.add_option("-o,--transport-opt", r.transport_opts, option_flag_help())->type_name("KEY=VALUE")->group(g_tr);
  app.footer(transports_epilogue());

  auto* g_run = "Run";
  app.add_option("--op", r.op, "write | read | send, or a list: write,send (default write)")->group(g_run);
  app.add_flag("--read", r.read_alias, "same as --op read")->group(g_run);
  app.add_option("--mode", r.mode, "bw (stream) | lat (ping-pong) | bw,lat (default bw)")->group(g_run);
  app.add_option("-s,--size,--payload", r.size, "bytes per op: 64, a list 64,4K,1M, a range 2:8M, or all (2..8M)")
      ->capture_default_str()->group(g_run);
  app.add_option("-n,--iters", r.iters, "ops per thread (default bw 5000, lat 10000)")->group(g_run);
  app.add_option("-D,--duration,--life", r.duration, "seconds per measurement instead of --iters")->group(g_run);
  app.add_option("--warmup", r.warmup, "warm-up per thread, never counted: iterations (1000) or seconds (2s); "
                                       "default iters/10 (min 16), or duration/10 (max 1s)")->group(g_run);
  app.add_option("--threads", s.threads, "client threads, each with its own endpoint, CQ and buffers")
      ->capture_default_str()->group(g_run);
  app.add_option("--cpus", r.cpus, "pin this side's threads: 0,1 or 0-3 (thread i -> i-th CPU)")->group(g_run);
  app.add_option("--server-cpus", r.server_cpus, "--loopback: pin the server child's threads")->group(g_run);
  app.add_option("-b,--batch,--batch-size", s.batch, "ops posted per doorbell (FI_MORE on all but the last)")
      ->capture_default_str()->group(g_run);
  app.add_option("-d,--depth", s.depth, "ops outstanding per endpoint in bw mode")->capture_default_str()->group(g_run);
  app.add_option("--rails", s.rails, "endpoints per thread on separate paths, ops striped over them; figures per rail")
      ->capture_default_str()->group(g_run);
  app.add_option("--qps", s.qps, "endpoints per rail (each with its own queue and --depth)")->capture_default_str()->group(g_run);
  app.add_flag("--lazy", s.lazy, "post only from the completion loop, in bursts (lazy posting)")->group(g_run);
  app.add_flag("--bidir", s.bidir, "bw write/read: the server streams the same op back at the same time; "
                                   "each direction and the sum are reported")->group(g_run);
  app.add_option("--signal", s.signal, "request one completion every N ops")->capture_default_str()->group(g_run);
  app.add_option("--repeat", s.repeat, "run every measurement N times; the table shows mean±stdev")
      ->capture_default_str()->group(g_run);
  app.add_option("--timeout", s.timeout_s, "seconds without progress before a run fails; a server drops a connection "
                                           "silent this long before its hello")->capture_default_str()->group(g_run);
  app.add_option("--seed", s.seed, "seed of random targets and data patterns")->group(g_run);

  auto* g_addr = "Addressing (write/read)";
  app.add_option("--random-space", r.random_space, "targets drawn at random (64 B aligned) in a remote region of this size")
      ->group(g_addr);
  app.add_option("--thread-gap", r.thread_gap, "each thread confined to its own slice of this size (multiple of 64)")
      ->group(g_addr);
  app.add_flag("--fixed", s.fixed, "each thread always targets the start of its slice (the default without --random-space)")
      ->group(g_addr);
  app.add_option("--local-mr", r.local_mr, "local buffer per thread (default batch x size)")->group(g_addr);

  auto* g_out = "Output";
  app.add_flag("--no-inject", r.no_inject, "latency runs: never send small payloads inline (FI_INJECT)")->group(g_run);
  app.add_flag("--validate", s.validate, "check every byte moved against a pattern; a mismatch fails the run")->group(g_out);
  app.add_option("--report-interval", s.report_interval, "print live lines every N seconds (per thread and total)")->group(g_out);
  app.add_flag("--cpu-util", s.cpu_util, "report user+sys CPU of each side over the measured window")->group(g_out);
  app.add_option("--json", cmd.output.json, "append one JSON object per measurement (JSON Lines)")->group(g_out);
  app.add_option("--csv", cmd.output.csv, "append one CSV row per measurement")->group(g_out);
  app.add_flag("-q,--quiet", cmd.server.quiet, "server: no log lines")->group(g_out);
}

bool in_job(const std::string& name) {
  for (const char* n : kNotInJob)
    if (name == n) return false;
  return true;
}

// --job: the file is read later (job.cc); here only the flags beside it are collected, unchecked
// except by CLI11, because they are [defaults] for runs the file has not described yet.
Result<Command> job_command(CLI::App& app, Command cmd, const Raw& r) {
  if (r.server || cmd.server.once || app.count("--list") > 0 || r.version)
    return Status(Errc::invalid_argument, "--job runs a client: leave out --server, --once, --list and --version");
  cmd.kind = Command::Kind::job;
  cmd.job = r.job;
  for (const CLI::Option* o : app.get_options()) {
    if (o->count() == 0 || o->get_lnames().empty()) continue;
    const std::string& name = o->get_lnames().front();
    if (!in_job(name)) continue;
    GivenFlag g{name, "", o->get_expected_min() == 0};
    if (g.is_switch) {
      if (!o->as<bool>()) continue;  // --validate=false: as if not given
    } else {
      g.value = o->results().back();
    }
    cmd.given.push_back(std::move(g));
  }
  return cmd;
}

}  // namespace

const std::vector<FlagInfo>& flag_table() {
  static const std::vector<FlagInfo> table = [] {
    Command cmd;
    Raw r;
    CLI::App app{kDescription, "rdmabench"};
    define_flags(app, cmd, r);
    std::vector<FlagInfo> out;
    for (const CLI::Option* o : app.get_options()) {
      if (o->get_lnames().empty()) continue;
      const auto& names = o->get_lnames();
      FlagInfo f;
      f.name = names.front();
      f.aliases.assign(names.begin() + 1, names.end());
      f.is_switch = o->get_expected_min() == 0;
      f.in_job = in_job(f.name);
      f.help = o->get_description();
      out.push_back(std::move(f));
    }
    return out;
  }();
  return table;
}

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
  Command cmd;
  auto& s = cmd.spec;
  CLI::App app{kDescription, "rdmabench"};
  Raw r;
  define_flags(app, cmd, r);
  // Raw's members in declaration order, under the names the checks below use.
  auto& [server, loopback, version, read_alias, no_inject, addr, transport, list_format, op, mode, size, warmup, random_space,
         thread_gap, local_mr, cpus, server_cpus, job, iters, duration, ready_fd, transport_opts, domains] = r;
  (void)job;

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    cmd.kind = Command::Kind::help;
    cmd.help = app.help();
    return cmd;
  } catch (const CLI::ParseError& e) {
    std::string what = e.what();
    return Status(Errc::invalid_argument, what + "; see rdmabench --help");
  }

  if (app.count("--job") > 0) return job_command(app, std::move(cmd), r);
  if (version) {
    cmd.kind = Command::Kind::version;
    return cmd;
  }
  if (app.count("--list") > 0) {
    if (!list_format.empty() && list_format != "json")
      return Status(Errc::invalid_argument, fmt::format("--list {}: the only format is json; give --list or --list json", list_format));
    cmd.kind = Command::Kind::list;
    cmd.list_json = list_format == "json";
    return cmd;
  }
  // Checked up front, as a flag would be: a malformed test fault is a mistake, never ignored.
  if (auto fault = transport::fault::fault_plan_from_env(); !fault) return fault.status();
  s.inject = !no_inject;
  if (!domains.empty()) {
    s.domains = split_list(domains);
    for (auto& d : s.domains)
      if (d.empty()) return Status(Errc::invalid_argument, fmt::format("--domains '{}': an empty name; give NICs like eth1,eth2", domains));
    if (app.count("--rails") == 0) s.rails = int(s.domains.size());
  }
  for (const auto& kv : transport_opts) {
    auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0)
      return Status(Errc::invalid_argument, fmt::format("-o '{}': give KEY=VALUE, e.g. -o nodelay=0", kv));
    s.transport.options[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  auto given = [&](const char* name) { return app.count(name) > 0; };

  auto chosen = transport::parse_selection(transport);
  s.transport.name = chosen.name;
  s.transport.variant = chosen.variant;
  if (auto checked = transport::check_selection(s.transport); !checked) return checked.status();
  if (read_alias && !op.empty() && op != "read")
    return Status(Errc::invalid_argument, fmt::format("--read and --op {} disagree: --read means --op read; give one", op));
  if (read_alias) op = "read";
  if (!op.empty()) {
    s.ops.clear();
    for (auto& o : split_list(op)) {
      auto p = bench::parse_op(o);
      if (!p) return p.status();
      s.ops.push_back(*p);
    }
  }
  if (!mode.empty()) {
    s.modes.clear();
    for (auto& m : split_list(mode)) {
      auto p = bench::parse_mode(m);
      if (!p) return p.status();
      s.modes.push_back(*p);
    }
  }
  auto sizes = bench::parse_size_list(size, "--size");
  if (!sizes) return sizes.status();
  s.sizes = *sizes;
  s.iters = iters;
  if (given("--iters") && iters == 0) return Status(Errc::invalid_argument, "--iters 0: must be at least 1");
  if (given("--duration") && duration <= 0)
    return Status(Errc::invalid_argument, fmt::format("--duration {}: must be > 0 seconds", duration));
  s.duration_s = duration;
  if (Status lat = stream_flags_in_latency_run(s, given); !lat) return lat;
  if (!warmup.empty()) {
    Status w = parse_warmup(warmup, s);
    if (!w) return w;
  }
  auto bytes = [&](const std::string& text, const char* flag, uint64_t& out) -> Status {
    if (text.empty()) return {};
    auto v = bench::parse_bytes(text, flag);
    if (!v) return v.status();
    if (*v == 0) return {Errc::invalid_argument, fmt::format("{} 0: must be > 0 (leave it out for the default)", flag)};
    out = *v;
    return {};
  };
  for (auto [t, f, o] : {std::tuple{&random_space, "--random-space", &s.random_space},
                         std::tuple{&thread_gap, "--thread-gap", &s.thread_gap}, std::tuple{&local_mr, "--local-mr", &s.local_mr}}) {
    Status b = bytes(*t, f, *o);
    if (!b) return b;
  }
  if (!cpus.empty()) {
    auto c = parse_cpu_list(cpus, "--cpus");
    if (!c) return c.status();
    s.cpus = *c;
  }
  if (!server_cpus.empty()) {
    auto c = parse_cpu_list(server_cpus, "--server-cpus");
    if (!c) return c.status();
    cmd.server_cpus = *c;
  }

  if (server) {
    if (loopback) return Status(Errc::invalid_argument, "--server and --loopback: choose one");
    cmd.kind = Command::Kind::server;
    auto hp = bootstrap::parse_host_port(addr.empty() ? "0.0.0.0" : addr, kDefaultPort, "--addr");
    if (!hp) return hp.status();
    cmd.server.listen = *hp;
    cmd.server.domain = s.transport.domain;
    cmd.server.domains = s.domains;
    cmd.server.cpus = s.cpus;
    cmd.server.ready_fd = ready_fd;
    cmd.server.hello_timeout_s = s.timeout_s;
    return cmd;
  }
  if (cmd.server.once) return Status(Errc::invalid_argument, "--once applies to --server only");
  Status st = bench::check(s);
  if (!st) return st;
  if (loopback || addr.empty()) {
    if (!addr.empty()) return Status(Errc::invalid_argument, "--loopback and --addr: choose one (--loopback picks its own port)");
    cmd.kind = Command::Kind::loopback;
    return cmd;
  }
  cmd.kind = Command::Kind::client;
  auto hp = bootstrap::parse_host_port(addr, kDefaultPort, "--addr");
  if (!hp) return hp.status();
  cmd.client.server = *hp;
  return cmd;
}

}  // namespace rb::app
