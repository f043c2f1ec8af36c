#pragma once
// One rdmabench endpoint over UCP: a worker of its own, driven only by the thread that uses the
// endpoint, one ucp_ep to the peer's worker, and the rkey of the peer's region.
//   write, read    ucp_put_nbx, ucp_get_nbx at the region's virtual addresses
//   send, recv     tagged messages (ucp_tag_send_nbx, ucp_tag_recv_nbx matching any tag)
//   send_imm       a tagged message whose tag carries the immediate
//   write_imm      a put, a flush of the endpoint (the data is then at the target), then an
//                  active message with the immediate, which the target reports as remote_write
//   fadd, cswap    ucp_atomic_op_nbx (UCP_ATOMIC_OP_ADD, UCP_ATOMIC_OP_CSWAP) with a reply buffer
// Completions come from the requests' callbacks, run inside ucp_worker_progress, which poll calls.
#include "transport/transport.hh"
#include "transport/ucx/ucx_context.hh"

namespace rb::transport::ucx {

struct EndpointConfig {
  // UCP_ERR_HANDLING_MODE_PEER, so that a dead peer fails this endpoint's requests instead of
  // aborting the process, and the endpoint closes without the peer. UCX 1.13 offers it on no
  // shared-memory transport (posix and sysv lack a peer failure handler), so a run that reaches
  // its peer through shared memory goes without, as ucx_perftest does.
  bool peer_errors = false;
  // Every transport of the list does a put with the initiator's own stores (or one syscall)
  // before ucp_put_nbx returns, so two puts land in the order posted and need no fence.
  bool puts_in_order = false;
};

Result<std::unique_ptr<Endpoint>> open_endpoint(std::shared_ptr<Context> ctx, const EndpointOptions& o,
                                                const EndpointConfig& cfg);

}  // namespace rb::transport::ucx
