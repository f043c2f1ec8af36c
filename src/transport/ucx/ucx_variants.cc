#include "transport/ucx/ucx_variants.hh"

#include <algorithm>

namespace rb::transport::ucx {
namespace {

// UCT transports, and UCX's aliases for them, that need no work from the target: a put, get or
// atomic over them is done by the initiator's CPU or kernel, in memory it reaches directly.
bool initiator_only(const std::string& tl) {
  static const char* const names[] = {"posix", "sysv", "mm", "cma", "knem", "xpmem", "shm", "sm", "self"};
  return std::find(std::begin(names), std::end(names), tl) != std::end(names);
}

}  // namespace

const std::vector<KnownVariant>& known_variants() {
  static const std::vector<KnownVariant> v = {
      {"posix", "shared memory (POSIX shm): puts and atomics are the initiator's stores into the peer's pages", {"posix"}},
      {"sysv", "shared memory (System V segments), as posix", {"sysv"}},
      {"cma", "cross-memory attach (process_vm_writev) for RMA; it carries no messages, so it needs a partner (ucx:shm)",
       {"cma"}},
      {"shm", "UCX's alias for every shared-memory transport: posix, sysv, cma, knem, xpmem", {"posix", "sysv", "cma"}},
      {"tcp", "TCP sockets; puts, gets and atomics are applied by the target's worker", {"tcp"}},
      {"rc", "InfiniBand/RoCE reliable connected QPs (rc_verbs, rc_mlx5)", {"rc_verbs", "rc_mlx5"}},
      {"ud", "InfiniBand/RoCE unreliable datagrams (ud_verbs, ud_mlx5)", {"ud_verbs", "ud_mlx5"}},
      {"dc", "mlx5 dynamically connected transport", {"dc_mlx5"}},
  };
  return v;
}

std::vector<std::string> split_list(const std::string& list) {
  std::vector<std::string> out;
  size_t p = 0;
  while (p <= list.size()) {
    size_t e = std::min(list.find(',', p), list.size());
    if (e > p) out.push_back(list.substr(p, e - p));
    p = e + 1;
  }
  return out;
}

// An empty list is UCX's choice and "^x" excludes x from every transport: either may pick one
// that needs the target (tcp), so neither is claimed as initiator-only.
bool initiator_moves_everything(const std::string& tls) {
  auto names = split_list(tls);
  if (names.empty()) return false;
  return std::all_of(names.begin(), names.end(), [](const std::string& n) { return initiator_only(n); });
}

bool may_use_shared_memory(const std::string& tls) {
  auto names = split_list(tls);
  if (names.empty() || names[0].starts_with("^")) return true;
  return std::any_of(names.begin(), names.end(), [](const std::string& n) { return initiator_only(n) && n != "self"; });
}

Caps caps_for(const std::string& tls) {
  Caps c;
  c.write = c.read = c.send = true;
  c.max_msg = 1ull << 30;
  c.tx_depth = c.rx_depth = 4096;  // an endpoint's slots are sized to the depth it is opened with
  if (initiator_moves_everything(tls)) c.inject = kInlineBytes;
  c.target_progress = !initiator_moves_everything(tls);
  c.virtual_addressing = true;    // rkeys name virtual addresses
  c.selective_completion = true;  // unsignaled ops complete into nothing but errors
  c.peer_sees_writes = c.peer_memory_readable = true;  // puts land in the target's registered memory
  c.atomics = true;   // ucp_atomic_op_nbx: CPU atomics in shared memory, else UCX's emulation at the target
  c.imm_data = true;  // send_imm in the tag, write_imm as put + flush + active message
  c.can_wait = true;  // the worker's event fd, armed by ucp_worker_arm
  return c;
}

}  // namespace rb::transport::ucx
