#include <algorithm>

#include <fmt/format.h>

#include "model/sizes.hh"
#include "model/spec.hh"

namespace rb::model {
namespace {

// Each repeat's result is kept in memory for the mean and stdev; a thousand is past any useful spread.

Status bad(std::string msg) { return {Errc::invalid_argument, std::move(msg)}; }
SpecProblem broken(std::initializer_list<const char*> flags, std::string msg) {
  return {bad(std::move(msg)), std::vector<std::string>(flags.begin(), flags.end())};
}

bool has_op(const RunSpec& s, Op o) { return std::find(s.ops.begin(), s.ops.end(), o) != s.ops.end(); }
bool has_mode(const RunSpec& s, Mode m) { return std::find(s.modes.begin(), s.modes.end(), m) != s.modes.end(); }

// --recv-mr: only SENDs land in receives, a receive must hold a message, and validation checks
// each message where it landed, which a buffer shared by receives in flight would overwrite.
SpecProblem recv_mr_problem(const RunSpec& s) {
  if (!s.recv_mr) return {};
  if (std::none_of(s.ops.begin(), s.ops.end(), is_message))
    return broken({"recv-mr", "op"}, fmt::format("--recv-mr {}: only --op send and send-imm use receives; drop --recv-mr",
                                                 bytes_with_unit(s.recv_mr)));
  if (s.recv_mr < align_up(s.max_size()))
    return broken({"recv-mr", "size"},
                  fmt::format("--recv-mr {} < --size {}: a receive needs room for a whole message; raise --recv-mr to {}",
                              bytes_with_unit(s.recv_mr), bytes_with_unit(s.max_size()), format_bytes(align_up(s.max_size()))));
  if (s.validate)
    return broken({"recv-mr", "validate"},
                  fmt::format("--recv-mr {} with --validate: each message is checked where it landed, so every receive "
                              "in flight needs its own buffer; drop --recv-mr", bytes_with_unit(s.recv_mr)));
  return {};
}

// Counts, depths and times, each on its own.
SpecProblem counts_problem(const RunSpec& s) {
  if (s.ops.empty()) return broken({"op"}, "--op: give at least one of write, read, send, write-imm, send-imm, fadd, cswap");
  if (s.modes.empty()) return broken({"mode"}, "--mode: give bw, lat or bw,lat");
  if (s.sizes.empty()) return broken({"size"}, "--size: give at least one size, e.g. --size 64,4K");
  if (s.threads < 1 || s.threads > kMaxThreads)
    return broken({"threads"}, fmt::format("--threads {}: must be 1..{}", s.threads, kMaxThreads));
  if (s.batch < 1) return broken({"batch"}, "--batch 0: must be at least 1");
  if (s.depth < 1) return broken({"depth"}, "--depth 0: must be at least 1");
  if (s.depth < s.batch)
    return broken({"depth", "batch"},
                  fmt::format("--depth {} < --batch {}: depth must be >= batch (a batch is posted at once); "
                              "raise --depth to {} or lower --batch", s.depth, s.batch, s.batch));
  if (s.signal < 1 || s.signal > s.depth)
    return broken({"signal", "depth"},
                  fmt::format("--signal {}: must be 1..depth ({}); one completion is requested every N ops", s.signal, s.depth));
  if (s.rails < 1 || s.rails > kMaxRails) return broken({"rails"}, fmt::format("--rails {}: must be 1..{}", s.rails, kMaxRails));
  if (s.qps < 1 || s.qps > kMaxQps) return broken({"qps"}, fmt::format("--qps {}: must be 1..{}", s.qps, kMaxQps));
  if (!s.domains.empty() && int(s.domains.size()) != s.rails)
    return broken({"domains", "rails"},
                  fmt::format("--domains lists {} NICs but --rails is {}: one domain per rail; drop --rails or make them match",
                              s.domains.size(), s.rails));
  if (!s.domains.empty() && !s.transport.domain.empty())
    return broken({"domain", "domains"},
                  "--domain and --domains: give one NIC or one per rail, not both");
  if (s.iters && s.duration_s > 0)
    return broken({"iters", "duration"},
                  "--iters and --duration both given: choose one");
  if (s.duration_s < 0) return broken({"duration"}, fmt::format("--duration {}: must be > 0 seconds", s.duration_s));
  if (s.warmup_iters && s.warmup_s)
    return broken({"warmup"},
                  "--warmup: give iterations (e.g. 1000) or seconds (e.g. 2s), not both");
  if (s.warmup_s && *s.warmup_s < 0)
    return broken({"warmup"},
                  fmt::format("--warmup {}s: must be >= 0 seconds", *s.warmup_s));
  if (s.repeat < 1 || s.repeat > kMaxRepeat)
    return broken({"repeat"}, fmt::format("--repeat {}: must be 1..{}; every repeat is kept until the mean is printed",
                                          s.repeat, kMaxRepeat));
  if (s.report_interval < 0) return broken({"report-interval"}, "--report-interval: must be >= 0 seconds (0 = off)");
  if (s.report_interval > 0 && s.report_interval < 0.01)
    return broken({"report-interval"}, fmt::format("--report-interval {}: must be at least 0.01 s", s.report_interval));
  if (s.timeout_s <= 0) return broken({"timeout"}, "--timeout: must be > 0 seconds");
  return {};
}

// --bidir: a reverse stream of plain writes or reads, in bandwidth mode.
SpecProblem bidir_problem(const RunSpec& s) {
  if (!s.bidir) return {};
  if (has_mode(s, Mode::lat))
    return broken({"bidir", "mode"},
                  "--bidir with --mode lat: both directions stream, so it applies to --mode bw only");
  for (Op op : s.ops)
    if (op != Op::write && op != Op::read)
      return broken({"bidir", "op"},
                    fmt::format("--bidir with --op {}: the reverse stream is a plain one-sided write or read; "
                                "use --op write or read", transport::op_name(op)));
  if (s.region_bytes() / uint64_t(s.threads) / kAlign * kAlign < align_up(s.max_size()))
    return broken({"bidir", "size", "random-space", "thread-gap"},
                  fmt::format("--bidir: the server streams from its region, {} per thread, smaller than --size {}; "
                              "raise --random-space or --thread-gap", bytes_with_unit(s.region_bytes() / uint64_t(s.threads)),
                              bytes_with_unit(s.max_size())));
  return {};
}

// Where remote ops land: random space, thread gaps, fixed slots.
SpecProblem targets_problem(const RunSpec& s) {
  bool rma = std::any_of(s.ops.begin(), s.ops.end(), is_rma);
  if (!rma && (s.random_space || s.thread_gap || s.fixed))
    return broken({"random-space", "thread-gap", "fixed", "op"},
                  fmt::format("--random-space/--thread-gap/--fixed choose remote targets of write and read; --op {} has none",
                              transport::op_name(s.ops.front())));
  if (s.random_space && (has_op(s, Op::write) || has_op(s, Op::write_imm)) && has_mode(s, Mode::lat) && !s.fixed)
    return broken({"random-space", "mode", "op", "fixed"},
                  "--random-space with write latency: the peer answers each write from a fixed slot; "
                  "use --mode bw, --op read, or add --fixed");
  if (s.event && has_op(s, Op::write) && has_mode(s, Mode::lat))
    return broken({"event", "op", "mode"},
                  "--event with --op write --mode lat: the target sees a plain write only by polling its memory, "
                  "so it cannot sleep; use --op write-imm (the write brings a completion), or drop --event");
  if (s.has_atomic() && s.eps_per_thread() > kMaxAtomicLanes)
    return broken({"rails", "qps", "op"},
                  fmt::format("--rails {} x --qps {} with atomics: each endpoint owns one 8-byte counter in its "
                              "thread's first 64 B, so at most {} endpoints per thread", s.rails, s.qps, kMaxAtomicLanes));
  if (s.thread_gap && s.thread_gap % kAlign)
    return broken({"thread-gap"},
                  fmt::format("--thread-gap {}: must be a multiple of {} so targets stay {} aligned; try {}",
                              bytes_with_unit(s.thread_gap), bytes_with_unit(kAlign), bytes_with_unit(kAlign),
                              format_bytes(align_up(s.thread_gap))));
  if (s.random_space && s.random_space % kAlign)
    return broken({"random-space"},
                  fmt::format("--random-space {}: must be a multiple of {}; try {}", bytes_with_unit(s.random_space),
                              bytes_with_unit(kAlign), format_bytes(align_up(s.random_space))));
  return {};
}

// Every size against the places it must fit.
SpecProblem sizes_problem(const RunSpec& s) {
  for (uint64_t size : s.sizes) {
    if (size > (1ull << 31))
      return broken({"size"},
                    fmt::format("--size {}: larger than 2 GiB per op; use a smaller size", bytes_with_unit(size)));
    if (s.random_space && size > s.random_space)
      return broken({"size", "random-space"},
                    fmt::format("--size {} > --random-space {}: payload must fit the random region; raise --random-space",
                                bytes_with_unit(size), bytes_with_unit(s.random_space)));
    if (s.thread_gap && size > s.thread_gap)
      return broken({"size", "thread-gap"},
                    fmt::format("--size {} > --thread-gap {}: payload must fit a thread's slice; raise --thread-gap to {}",
                                bytes_with_unit(size), bytes_with_unit(s.thread_gap), format_bytes(align_up(size))));
    if (s.local_mr && uint64_t(s.batch) * size > s.local_mr)
      return broken({"batch", "size", "local-mr"},
                    fmt::format("--batch {} x --size {} > --local-mr {}: a batch needs its own local buffers; raise --local-mr to {}",
                                s.batch, bytes_with_unit(size), bytes_with_unit(s.local_mr), format_bytes(uint64_t(s.batch) * size)));
  }
  if (s.random_space && (s.thread_gap || s.fixed) && uint64_t(s.threads) * s.gap() > s.random_space)
    return broken({"threads", "thread-gap", "random-space"},
                  fmt::format("--threads {} x --thread-gap {} > --random-space {}: every thread's slice must fit the region; "
                              "raise --random-space to {} or lower --thread-gap",
                              s.threads, bytes_with_unit(s.gap()), bytes_with_unit(s.random_space),
                              format_bytes(uint64_t(s.threads) * s.gap())));
  return {};
}

// --local-mr against what validation keeps in it.
SpecProblem local_mr_problem(const RunSpec& s) {
  if (s.local_mr && s.wants_mirror() && s.local_mr < s.region_bytes())
    return broken({"local-mr", "validate"},
                  fmt::format("--local-mr {} with --validate: write/read validation keeps a local image of the remote region "
                              "({}); drop --local-mr or raise it to {}",
                              bytes_with_unit(s.local_mr), bytes_with_unit(s.region_bytes()), format_bytes(s.region_bytes())));
  if (s.local_mr && s.validate && std::any_of(s.ops.begin(), s.ops.end(), is_message) &&
      s.local_mr < uint64_t(s.depth) * uint64_t(s.eps_per_thread()) * align_up(s.max_size()))
    return broken({"local-mr", "validate", "op"},
                  fmt::format("--local-mr {} with --validate and --op send: each op in flight needs its own buffer; "
                              "drop --local-mr or raise it to {}", bytes_with_unit(s.local_mr),
                              format_bytes(uint64_t(s.depth) * uint64_t(s.eps_per_thread()) * align_up(s.max_size()))));
  return {};
}

// The whole run's buffers.
SpecProblem memory_problem(const RunSpec& s) {
  uint64_t total = s.region_bytes() + uint64_t(s.threads) * s.local_bytes_per_thread();
  if (total > (16ull << 30))
    return broken({"random-space", "local-mr", "threads"},
                  fmt::format("the run needs {} of buffers (region + per-thread local memory), more than 16 GiB; "
                              "lower --random-space, --local-mr or --threads", bytes_with_unit(total)));
  return {};
}

}  // namespace

Status check(const RunSpec& s) { return first_problem(s).status; }

SpecProblem first_problem(const RunSpec& s) {
  // In this order: a run's message names the first broken rule, so simpler rules speak first.
  for (auto rules : {counts_problem, bidir_problem, targets_problem, sizes_problem, local_mr_problem, recv_mr_problem,
                     memory_problem})
    if (SpecProblem p = rules(s); !p.status) return p;
  return {};
}

Status check_caps(const RunSpec& s, const transport::Caps& c, const std::string& name) {
  for (Op op : s.ops) {
    if (is_atomic(op) && !c.atomics)
      return {Errc::unsupported, fmt::format("--op {}: transport {} has no atomics (rdmabench --list shows which do)",
                                             transport::op_name(op), name)};
    if ((op == Op::write_imm || op == Op::send_imm) && !c.imm_data)
      return {Errc::unsupported, fmt::format("--op {}: transport {} carries no immediate data (rdmabench --list shows "
                                             "which do)", transport::op_name(op), name)};
    bool ok = op == Op::write || op == Op::write_imm ? c.write : op == Op::read ? c.read : is_message(op) ? c.send : true;
    if (!ok) return {Errc::unsupported, fmt::format("--op {}: transport {} does not support it", transport::op_name(op), name)};
  }
  if (s.event && !c.can_wait)
    return {Errc::unsupported, fmt::format("--event: transport {} cannot wake a thread sleeping on its completions "
                                           "(rdmabench --list shows which can); drop --event", name)};
  for (uint64_t size : s.sizes)
    if (c.max_msg && size > c.max_msg)
      return bad(fmt::format("--size {}: {} supports at most {} per op; lower --size", bytes_with_unit(size), name,
                             bytes_with_unit(c.max_msg)));
  if (s.validate && !c.peer_memory_readable && !c.peer_memory_at_quiesce)
    return {Errc::unsupported, fmt::format("--validate: {} moves data where the server cannot check it; "
                                           "validate with another transport (e.g. dma:cpu)", name)};
  if (!c.peer_sees_writes && has_op(s, Op::write) && has_mode(s, Mode::lat))
    return {Errc::unsupported, fmt::format("--op write --mode lat: {} has no peer that sees writes land; "
                                           "use --mode bw or --op read", name)};
  if (has_mode(s, Mode::bw) && c.tx_depth && s.depth > c.tx_depth)
    return bad(fmt::format("--depth {}: {} accepts at most {} outstanding ops per endpoint; lower --depth", s.depth, name,
                           c.tx_depth));
  return {};
}

}  // namespace rb::model
