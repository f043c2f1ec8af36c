#pragma once
// What a UCX transport list (-t ucx:TLS, UCX_TLS's syntax) means to rdmabench: the variants it
// knows, the UCT transports each needs, and the capabilities an instance has.
#include <string>
#include <vector>

#include "transport/entry.hh"

namespace rb::transport::ucx {

struct KnownVariant {
  std::string name, help;
  std::vector<std::string> tls;  // UCT transports it stands for: any one found makes it worth a try
};
const std::vector<KnownVariant>& known_variants();

// The capabilities of an instance over `tls` (empty: UCX's default, every transport).
// Over shared memory UCX copies up to this much inline (a short put, an eager short message:
// mm's 128-byte FIFO element holds 93 B of tag payload), or refuses, which is "busy".
constexpr uint32_t kInlineBytes = 64;

Caps caps_for(const std::string& tls);

// Whether every transport in `tls` moves bytes by the initiator alone (mapped shared memory,
// process_vm_writev), so that RMA and atomics land without the target's worker progressing.
bool initiator_moves_everything(const std::string& tls);

// Whether UCX may pick a shared-memory transport from `tls` (every list that names one, and
// UCX's default).
bool may_use_shared_memory(const std::string& tls);

// The names of a comma-separated list.
std::vector<std::string> split_list(const std::string& list);

}  // namespace rb::transport::ucx
