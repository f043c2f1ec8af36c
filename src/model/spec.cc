#include "model/spec.hh"

#include <algorithm>

#include <fmt/format.h>

namespace rb::model {

const char* mode_name(Mode m) { return m == Mode::bw ? "bw" : "lat"; }

namespace {
constexpr std::pair<const char*, Op> kOps[] = {{"write", Op::write}, {"read", Op::read},         {"send", Op::send},
                                               {"write-imm", Op::write_imm}, {"send-imm", Op::send_imm},
                                               {"fadd", Op::fadd},           {"cswap", Op::cswap}};
}  // namespace

std::vector<std::string> op_names() {
  std::vector<std::string> out;
  for (auto [name, op] : kOps) out.push_back(name);
  return out;
}

Result<Op> parse_op(const std::string& s) {
  for (auto [name, op] : kOps)
    if (s == name) return op;
  return Status(Errc::invalid_argument, fmt::format("--op '{}': must be write, read, send, write-imm, send-imm, fadd or "
                                                    "cswap (or a list: write,send)", s));
}

bool is_atomic(Op op) { return op == Op::fadd || op == Op::cswap; }
bool is_rma(Op op) { return op == Op::write || op == Op::write_imm || op == Op::read; }
bool is_message(Op op) { return op == Op::send || op == Op::send_imm; }

bool RunSpec::has(Op op) const { return std::find(ops.begin(), ops.end(), op) != ops.end(); }
bool RunSpec::has_atomic() const { return std::any_of(ops.begin(), ops.end(), is_atomic); }

uint64_t counter_offset(const RunSpec& s, int thread, int lane) {
  return uint64_t(thread) * s.gap() + uint64_t(lane) * transport::kAtomicBytes;
}

Result<Mode> parse_mode(const std::string& s) {
  if (s == "bw") return Mode::bw;
  if (s == "lat") return Mode::lat;
  return Status(Errc::invalid_argument, fmt::format("--mode '{}': must be bw or lat (or bw,lat)", s));
}


uint64_t RunSpec::max_size() const { return sizes.empty() ? 0 : *std::max_element(sizes.begin(), sizes.end()); }

uint64_t RunSpec::iters_for(Mode m) const {
  if (duration_s > 0) return 0;
  if (iters) return iters;
  return m == Mode::bw ? kDefaultItersBw : kDefaultItersLat;
}

uint64_t RunSpec::warmup_iters_for(Mode m) const {
  if (warmup_iters) return *warmup_iters;
  if (warmup_s) return 0;
  return std::max<uint64_t>(iters_for(m) / 10, 16);
}

double RunSpec::warmup_seconds() const {
  if (warmup_s) return *warmup_s;
  if (warmup_iters) return 0;
  return std::min(1.0, duration_s / 10);
}

uint64_t RunSpec::gap() const { return thread_gap ? thread_gap : align_up(max_size()); }

uint64_t RunSpec::region_bytes() const {
  return random_space ? random_space : uint64_t(threads) * gap();
}

bool RunSpec::wants_mirror() const {
  if (!validate) return false;
  return std::any_of(ops.begin(), ops.end(), is_rma);
}

uint64_t RunSpec::local_area() const {
  if (local_mr) return local_mr;
  uint64_t area = uint64_t(batch) * align_up(max_size());
  if (wants_mirror()) area = std::max(area, region_bytes());
  // Validated sends need a buffer per op in flight: a slot is refilled only after it completed.
  // Validated atomics keep each one's fetched value until it completes, likewise.
  if (validate && std::any_of(ops.begin(), ops.end(), [](Op o) { return is_message(o) || is_atomic(o); }))
    area = std::max(area, uint64_t(depth) * uint64_t(eps_per_thread()) * align_up(max_size()));
  return area;
}

uint64_t RunSpec::local_bytes_per_thread() const { return align_up(local_area()) + align_up(max_size()); }

std::string RunSpec::addressing() const {
  if (random()) return thread_gap ? "thread-gap" : "random-space";
  return "fixed";
}

// Atomics are 8-byte ops whatever --size lists, so they run once per mode at 8 B.
std::vector<Phase> phases(const RunSpec& s) {
  std::vector<Phase> out;
  const std::vector<uint64_t> atomic_size{transport::kAtomicBytes};
  for (Op op : s.ops)
    for (Mode m : s.modes)
      for (uint64_t size : is_atomic(op) ? atomic_size : s.sizes)
        for (int r = 0; r < s.repeat; ++r) out.push_back({op, m, size, r});
  return out;
}

}  // namespace rb::model
