#pragma once
// The calls programs reach through function pointers in the context (ibv_context_ops and
// verbs_context), not through symbols: verbs.h's inline functions call them.
#include <infiniband/verbs.h>

#include <optional>

#include <vrdma/vrdma.h>

namespace rb::verbs {

// ibv_context_ops
int poll_cq(ibv_cq* cq, int n, ibv_wc* wc);
int req_notify_cq(ibv_cq* cq, int solicited_only);
int post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad);
int post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad);
int post_srq_recv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad);

// verbs_context
int query_port(ibv_context* ctx, uint8_t port, ibv_port_attr* attr, size_t len);
int query_device_ex(ibv_context* ctx, const ibv_query_device_ex_input* in, ibv_device_attr_ex* attr, size_t len);
ibv_qp* create_qp_ex(ibv_context* ctx, ibv_qp_init_attr_ex* attr);
ibv_cq_ex* create_cq_ex(ibv_context* ctx, ibv_cq_init_attr_ex* attr);
ibv_xrcd* open_xrcd(ibv_context* ctx, ibv_xrcd_init_attr* attr);  // refused, with a line (unsupported.cc)

// What the plain and the extended CQ share (cq.cc).
struct Cq;
Cq* make_cq(ibv_context* ctx, int cqe, void* cq_context, ibv_comp_channel* channel);
ibv_wc_status wc_status(int vrdma_status);
unsigned wc_flags_of(const vrdma_wc& wc);  // IBV_WC_WITH_IMM, IBV_WC_GRH

// A UD request's destination (ud.cc): the QP `qpn` behind `ah` and its Q_Key (one with the high
// bit set means the QP's own, as verbs has it). False: no address handle.
struct Qp;
struct Context;
bool ud_destination(const Qp& q, ibv_ah* ah, uint32_t qpn, uint32_t qkey, vrdma_send_wr& out);

// The router a peer's address names (address_handles.cc): all zero for this host's; nothing for
// another host's link-local GID, which names no router to reach.
std::optional<vrdma_router_address> router_of(const Context& c, const ibv_ah_attr& ah);

// The table of them: sets every pointer a context carries (ops.cc).
void install_context_ops(verbs_context& v);
// The ibv_wr_* calls of an ibv_qp_ex.
void install_wr_ops(ibv_qp_ex* qpx);

}  // namespace rb::verbs
