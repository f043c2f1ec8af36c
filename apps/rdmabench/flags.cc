#include "flags.hh"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "core/bytes.hh"
#include "cluster_flags.hh"
#include "flag_apply.hh"
#include "registry/registry.hh"
#include "transport_help.hh"

namespace rb::app {

const FlagValue* FlagValues::find(std::string_view name) const {
  auto it = values_.find(name);
  return it == values_.end() ? nullptr : &it->second;
}


Status check_given_once(const FlagInfo& flag, const FlagValue& value) {
  if (flag.repeatable || value.texts.size() < 2) return {};
  std::string list;
  for (const auto& t : value.texts) list += fmt::format("{}'{}'", list.empty() ? "" : ", ", t);
  return {Errc::invalid_argument, fmt::format("--{} given {} times ({}): give it once", flag.name, value.texts.size(), list)};
}

namespace {

// Flags that describe the process rather than one run: a job file cannot set them.
constexpr const char* kNotInJob[] = {"server", "once", "list", "version", "ready-fd", "help", "job", "quiet"};

// What a server reads: where to listen, its own NICs and CPUs, how long a silent connection lives.
// The run itself (transport, sizes, ops, output) is the client's, sent in its hello.
constexpr const char* kServerOnly[] = {"once", "quiet", "ready-fd"};
constexpr const char* kEitherRole[] = {"server", "addr", "domain", "domains", "cpus", "timeout",
                                       "list", "version", "help", "job"};

// "-s,--size,--payload" -> short name "s", name "size", alias "payload".
FlagInfo named(const std::string& names) {
  FlagInfo f;
  size_t pos = 0;
  while (pos <= names.size()) {
    size_t e = std::min(names.find(',', pos), names.size());
    std::string n = names.substr(pos, e - pos);
    if (n.rfind("--", 0) == 0) (f.name.empty() ? f.name : f.aliases.emplace_back()) = n.substr(2);
    else f.short_name = n.substr(1);
    pos = e + 1;
  }
  f.in_job = std::none_of(std::begin(kNotInJob), std::end(kNotInJob), [&](const char* x) { return f.name == x; });
  f.role = std::any_of(std::begin(kServerOnly), std::end(kServerOnly), [&](const char* x) { return f.name == x; })
               ? FlagRole::server
           : std::any_of(std::begin(kEitherRole), std::end(kEitherRole), [&](const char* x) { return f.name == x; })
               ? FlagRole::both
               : FlagRole::client;
  return f;
}

class TableBuilder {
 public:
  // A flag that takes a value: `type` is --help's placeholder for it.
  FlagInfo& value(const char* names, const char* type, std::string help, ApplyFlag apply = {}) {
    FlagInfo& f = add(names, std::move(help), std::move(apply));
    f.type_name = type;
    return f;
  }
  FlagInfo& switch_(const char* names, std::string help, ApplyFlag apply = {}) {
    FlagInfo& f = add(names, std::move(help), std::move(apply));
    f.is_switch = true;
    return f;
  }
  void group(const char* g) { group_ = g; }
  std::vector<FlagInfo> take() { return std::move(table_); }

 private:
  FlagInfo& add(const char* names, std::string help, ApplyFlag apply) {
    FlagInfo f = named(names);
    f.help = std::move(help);
    f.group = group_;
    f.apply = std::move(apply);
    return table_.emplace_back(std::move(f));
  }
  std::string group_;
  std::vector<FlagInfo> table_;
};

using model::RunSpec;
using Server = engine::ServerOptions;
using Output = report::OutputPaths;
constexpr uint32_t kMaxU32 = std::numeric_limits<uint32_t>::max();
template <class T>
std::string shown(T v) { return fmt::format("{}", v); }

void role_flags(TableBuilder& t) {
  t.group("Role");
  t.switch_("--server", "wait for clients and serve their runs");
  t.value("--addr", "TEXT", "server address HOST:PORT (default port 7471; server default 0.0.0.0:7471)");
  t.switch_("--loopback", "run a server child on 127.0.0.1 (the default with no --addr)");
  t.switch_("--once", "server: exit after serving one run", switch_on(&Server::once));
  t.value("--job", "FILE.toml", "run every combination of a TOML job file ([defaults], [matrix], [[run]]) into one "
                                "--json file; flags given here replace its [defaults]");
  t.value("--list", "[json]", "list transports, their options, and the instances usable on this machine "
                              "(--list json: the same for programs)").value_optional = true;
  t.switch_("--version", "print the version");
  t.value("--completion", "bash", "print the bash completion script (made from this flag table and the transports; "
                                  "installed as share/bash-completion/completions/rdmabench)");
  t.switch_("-h,--help", "Print this help message and exit");  // CLI11's own; listed so a job can reject it
  t.group("");
  t.value("--ready-fd", "INT", "internal: write the listening port to this fd", whole(&Server::ready_fd, "3", 0, std::numeric_limits<int>::max()));
}

void transport_flags(TableBuilder& t) {
  t.group("Transport");
  t.value("-t,--transport", "TEXT", transport_flag_help(), apply_transport).default_text =
      transport::default_transport().name;
  t.value("--domain", "TEXT", domain_flag_help(), text(&transport::Selection::domain));
  t.value("--domains", "TEXT", "one NIC per rail, e.g. eth1,eth2 (sets --rails); a server given --domains uses them "
                               "for such clients, else the NIC on each rail's subnet", apply_domains);
  t.value("-o,--transport-opt", "KEY=VALUE", option_flag_help(), apply_transport_opts).repeatable = true;
}

void run_flags(TableBuilder& t) {
  const RunSpec d;
  t.group("Run");
  t.value("--op", "TEXT", "write | read | send | write-imm | send-imm | fadd | cswap, or a list: write,send "
                          "(default write; fadd and cswap are 8-byte atomics)", apply_ops);
  t.switch_("--read", "same as --op read");  // build_command: it and --op must agree
  t.value("--mode", "TEXT", "bw (stream) | lat (ping-pong) | bw,lat (default bw)", apply_modes);
  t.value("-s,--size,--payload", "TEXT", "bytes per op: 64, a list 64,4K,1M, a range 2:8M, or all (2..8M)", apply_sizes)
      .default_text = format_bytes(d.sizes.front());
  t.value("-n,--iters", "UINT", "ops per thread, up to 2^63-1 (default bw 5000, lat 10000)", apply_iters);
  t.value("-D,--duration,--life", "FLOAT", "seconds per measurement instead of --iters (0.001 to 86400)", apply_duration);
  t.value("--warmup", "TEXT", "warm-up per thread, never counted: iterations (1000) or seconds (2s); "
                              "default iters/10 (min 16), or duration/10 (max 1s)", apply_warmup);
  t.value("--threads", "INT", "client threads, each with its own endpoint, CQ and buffers", whole(&RunSpec::threads, "4", 1, model::kMaxThreads))
      .default_text = shown(d.threads);
  t.value("--cpus", "TEXT", "pin this side's threads: 0,1 or 0-3 (thread i -> i-th CPU)",
          cpus(+[](Command& c) -> std::vector<int>& { return c.spec.cpus; }));
  t.value("--server-cpus", "TEXT", "--loopback: pin the server child's threads",
          cpus(+[](Command& c) -> std::vector<int>& { return c.server_cpus; }));
  t.value("-b,--batch,--batch-size", "UINT", "ops posted per doorbell (FI_MORE on all but the last)",
          whole(&RunSpec::batch, "8", 1u, kMaxU32)).default_text = shown(d.batch);
  t.value("-d,--depth", "UINT", "ops outstanding per endpoint in bw mode", whole(&RunSpec::depth, "64", 1u, kMaxU32)).default_text =
      shown(d.depth);
  t.value("--rails", "INT", "endpoints per thread on separate paths, ops striped over them; figures per rail",
          whole(&RunSpec::rails, "2", 1, model::kMaxRails)).default_text = shown(d.rails);
  t.value("--qps", "INT", "endpoints per rail (each with its own queue and --depth)", whole(&RunSpec::qps, "2", 1, model::kMaxQps))
      .default_text = shown(d.qps);
  t.switch_("--lazy", "post only from the completion loop, in bursts (lazy posting)", switch_on(&RunSpec::lazy));
  t.switch_("--bidir", "bw write/read: the server streams the same op back at the same time; "
                       "each direction and the sum are reported", switch_on(&RunSpec::bidir));
  t.value("--signal", "UINT", "request one completion every N ops", whole(&RunSpec::signal, "16", 1u, kMaxU32)).default_text =
      shown(d.signal);
  t.value("--repeat", "INT", "run every measurement N times (1..1000); the table shows mean±stdev, and min/max over all", whole(&RunSpec::repeat, "3", 1, model::kMaxRepeat))
      .default_text = shown(d.repeat);
  t.value("--timeout", "FLOAT", "seconds without progress before a run fails (0.001 to 86400); a server drops "
                                "a connection silent this long before its hello", seconds(&RunSpec::timeout_s, "30"))
      .default_text = shown(d.timeout_s);
  t.value("--seed", "UINT", "seed of random targets and data patterns", whole(&RunSpec::seed, "42", uint64_t(0), std::numeric_limits<uint64_t>::max()));
  t.switch_("-e,--event", "sleep on the completion queue's wait object instead of busy-polling, both sides "
                          "(perftest -e); not for write latency: use --op write-imm", switch_on(&RunSpec::event));
  t.switch_("--no-inject", "latency runs: never send small payloads inline (FI_INJECT)", apply_no_inject);
}

void addressing_flags(TableBuilder& t) {
  t.group("Addressing and buffers");
  t.value("--random-space", "TEXT", "targets drawn at random (64 B aligned) in a remote region of this size",
          bytes(&model::Addressing::random_space));
  t.value("--thread-gap", "TEXT", "each thread confined to its own slice of this size (multiple of 64)",
          bytes(&model::Addressing::thread_gap));
  t.switch_("--fixed", "each thread always targets the start of its slice (the default without --random-space)",
            switch_on(&RunSpec::fixed));
  t.value("--local-mr", "TEXT", "local buffer per thread (default batch x size, for each size of a list)",
          bytes(&model::Addressing::local_mr));
  t.value("--recv-mr", "TEXT",
          "send: the server's receive buffer per endpoint, its receives cycling through it (default one slot per receive "
          "posted; perftest's: --recv-mr 4K, or the size above 2K)",
          bytes(&model::Addressing::recv_mr));
}

void output_flags(TableBuilder& t) {
  t.group("Output");
  t.switch_("--validate", "check every byte moved against a pattern; a mismatch fails the run", switch_on(&RunSpec::validate));
  t.value("--report-interval", "FLOAT", "print live lines every N seconds (per thread and total; 0.01 to 86400, 0: off)",
          seconds(&RunSpec::report_interval, "1", true));
  t.switch_("--cpu-util", "report user+sys CPU of each side over the measured window", switch_on(&RunSpec::cpu_util));
  t.value("--json", "TEXT", "append one JSON object per measurement (JSON Lines)", text(&Output::json));
  t.value("--csv", "TEXT", "append one CSV row per measurement", text(&Output::csv));
  t.switch_("-q,--quiet", "server: no log lines", switch_on(&Server::quiet));
}

}  // namespace

void cluster_flags(TableBuilder& t) {
  using cluster::ClusterOptions;
  t.group("Cluster");
  t.switch_("--cluster", "run across N hosts: under mpirun or srun (one rank per host), or over --hosts");
  t.value("--hosts", "FILE", "no launcher: one HOST[:PORT] a line, each running rdmabench --server",
          text(&ClusterOptions::hosts_file));
  t.value("--pattern", "TEXT", "pairs (every ordered pair, one peer per host at a time) | ring | alltoall | "
                               "incast N:1 (default pairs)", apply_pattern);
  t.value("--expect-bw", "TEXT", "fail (exit 3) naming each pair below this: 0.9xline (a share of the link speed "
                                 "the provider reports) or 25Gbps", apply_expect_bw);
  t.value("--expect-lat", "TEXT", "fail (exit 3) naming each pair whose p50 latency is above this, e.g. 2.5us",
          apply_expect_lat);
  t.value("--outlier-bw", "FLOAT", "a pair below this share of the median bw is an outlier", apply_outlier_bw)
      .default_text = "0.8";
  t.value("--outlier-lat", "FLOAT", "a pair above this multiple of the median latency is an outlier", apply_outlier_lat)
      .default_text = "2";
  t.value("--data-net", "IFACE", "under a launcher: the interface whose address each rank's data path uses "
                                 "(default: the address the host name resolves to)", text(&ClusterOptions::data_net));
  t.value("--bootstrap", "TEXT", "under a launcher, how ranks meet: pmix (the job's PMIx server, then TCP) | mpi "
                                 "(MPI messages) | auto (pmix where the job has it, else mpi)", apply_bootstrap)
      .default_text = "auto";
}

const std::vector<FlagInfo>& flag_table() {
  static const std::vector<FlagInfo> table = [] {
    TableBuilder t;
    role_flags(t);
    transport_flags(t);
    run_flags(t);
    addressing_flags(t);
    output_flags(t);
    cluster_flags(t);
    return t.take();
  }();
  return table;
}

const FlagInfo* find_flag(std::string_view name) {
  for (const auto& f : flag_table())
    if (f.name == name || std::find(f.aliases.begin(), f.aliases.end(), name) != f.aliases.end()) return &f;
  return nullptr;
}

}  // namespace rb::app
