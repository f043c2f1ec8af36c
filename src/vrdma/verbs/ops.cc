// Every call verbs.h makes through a function pointer of the context, in one table: the
// ibv_context_ops a plain program reaches, and the verbs_context extensions (query_port,
// the _ex calls). An extended QP's ibv_wr_* calls are set by install_wr_ops (qp_ex.cc).
#include "vrdma/verbs/ops.hh"

namespace rb::verbs {

void install_context_ops(verbs_context& v) {
  ibv_context_ops& o = v.context.ops;
  o.poll_cq = poll_cq;
  o.req_notify_cq = req_notify_cq;
  o.post_send = post_send;
  o.post_recv = post_recv;
  o.post_srq_recv = post_srq_recv;
  v.sz = sizeof(verbs_context);
  v.query_port = query_port;
  v.query_device_ex = query_device_ex;
  v.create_qp_ex = create_qp_ex;
  v.create_cq_ex = create_cq_ex;
  v.open_xrcd = open_xrcd;
}

}  // namespace rb::verbs
