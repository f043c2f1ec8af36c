#pragma once
// The validated description of a run. The client builds it from flags (or a job file), checks
// it, and sends it to the server, which adopts it: the server never needs the run flags.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/status.hh"
#include "transport/selection.hh"
#include "transport/transport.hh"

namespace rb::model {

using transport::Op;
enum class Mode { bw, lat };
const char* mode_name(Mode m);
std::vector<std::string> op_names();             // every --op name, in --help's order
Result<Op> parse_op(const std::string& s);      // "write-imm" -> Op::write_imm; errors name --op
bool is_atomic(Op op);                          // fadd, cswap: 8-byte ops on one counter per endpoint
bool is_rma(Op op);                             // write, write-imm, read: a target offset in the peer's region
bool is_message(Op op);                         // send, send-imm: consume the peer's posted receives
Result<Mode> parse_mode(const std::string& s);  // "bw" -> Mode::bw; errors name --mode

constexpr uint64_t kAlign = 64;  // every remote target is 64 B aligned
inline uint64_t align_up(uint64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

constexpr uint64_t kDefaultItersBw = 5000;
constexpr uint64_t kDefaultItersLat = 10000;

// What is measured: ops, modes, sizes, how long, on how many threads and endpoints, and how ops
// are posted and checked.
struct Workload {
  std::vector<Op> ops{Op::write};
  std::vector<Mode> modes{Mode::bw};
  std::vector<uint64_t> sizes{65536};
  uint64_t iters = 0;        // per thread; 0 = mode default (or duration)
  double duration_s = 0;     // >0: run for this long instead of a count
  // Warm-up per thread: a count or a time; neither = the default rule (warmup_iters_for).
  std::optional<uint64_t> warmup_iters;
  std::optional<double> warmup_s;
  int threads = 1;
  std::vector<int> cpus;
  uint32_t batch = 1, depth = 64, signal = 1;  // depth: ops outstanding per endpoint
  int rails = 1;      // endpoints per thread on separate paths (figures per rail)
  int qps = 1;        // endpoints per rail
  bool lazy = false;  // post only from the completion loop, in bursts
  bool bidir = false; // the server streams the same op back at the client's buffers at the same time
  int repeat = 1;
  bool validate = false;
  bool inject = true;  // latency runs send small payloads inline (FI_INJECT), as perftest and fi_pingpong do
  double report_interval = 0;
  bool cpu_util = false;
  bool event = false;  // sleep on the completion queue's wait object instead of busy-polling (perftest -e)
  uint64_t seed = 0x5eed;
  double timeout_s = 10;  // no progress for this long fails the run
};

// Where in the peer's region each thread's ops land, and how much local memory they use.
struct Addressing {
  uint64_t random_space = 0;  // >0: targets drawn at random in a region of this size
  uint64_t thread_gap = 0;    // >0: each thread's slice of the region
  bool fixed = false;         // always the start of the slice
  uint64_t local_mr = 0;      // >0: local buffer per thread
  uint64_t recv_mr = 0;       // >0: the server's receive buffer per endpoint, cycled through (SEND)
};

// The counts a run may ask for: flags, job files and the check of a spec say the same ranges.
inline constexpr int kMaxThreads = 256, kMaxRails = 16, kMaxQps = 64, kMaxRepeat = 1000;

// A run: the transport it uses (and the NICs), what it measures, and where ops land. The derived
// figures below are the one place where the parts meet.
struct RunSpec : Workload, Addressing {
  transport::Selection transport;  // -t, the client's --domain, -o (applied on both sides)
  std::vector<std::string> domains;  // client NICs, one per rail (--domains); empty = one domain for all rails

  int eps_per_thread() const { return rails * qps; }
  uint64_t max_size() const;
  uint64_t iters_for(Mode m) const;           // 0 in duration mode
  uint64_t warmup_iters_for(Mode m) const;    // warm-up count in iterations mode
  double warmup_seconds() const;              // warm-up time in duration mode
  uint64_t gap() const;                       // per-thread slice of the remote region
  uint64_t region_bytes() const;              // remote region size
  bool random() const { return random_space != 0 && !fixed; }
  bool wants_mirror() const;                  // validation of write/read needs a local mirror
  bool has(Op op) const;
  bool has_atomic() const;
  uint64_t local_area() const;                // per-thread source/destination area
  uint64_t local_bytes_per_thread() const;    // local_area + an echo slot for write latency
  // --bidir: the server's stream lands in thread t's echo slot (unused by a stream), where
  // --validate keys its pattern to the offset reverse_pattern_offset(t).
  uint64_t reverse_landing(int t) const { return uint64_t(t) * local_bytes_per_thread() + align_up(local_area()); }
  uint64_t reverse_pattern_offset(int t) const { return uint64_t(t) * local_bytes_per_thread(); }
  std::string addressing() const;             // "fixed", "random-space", "thread-gap"
};

// Where endpoint `lane` of thread `thread` keeps its atomic counter in the server's region.
uint64_t counter_offset(const RunSpec& s, int thread, int lane);
constexpr int kMaxAtomicLanes = 8;  // counters of a thread's endpoints share its first 64 B

struct Phase {
  Op op;
  Mode mode;
  uint64_t size;
  int repeat;
};
std::vector<Phase> phases(const RunSpec& s);

// Checks every rule a run must satisfy before anything starts (the invariants of the DMA bench
// among them). The message names the flag, the value, the rule and a fix.
Status check(const RunSpec& s);
// check()'s first broken rule with the flags it is about, in the order its message names them
// (long names without dashes: {"depth", "batch"}). The rule itself knows which flags it reads,
// so it says so here rather than leaving a job file to guess the key from the message.
struct SpecProblem {
  Status status;                   // ok: every rule holds
  std::vector<std::string> flags;  // empty when status is ok
};
SpecProblem first_problem(const RunSpec& s);
// Checks that need the opened transport (message size, queue depth).
Status check_caps(const RunSpec& s, const transport::Caps& caps, const std::string& transport_name);

}  // namespace rb::model
