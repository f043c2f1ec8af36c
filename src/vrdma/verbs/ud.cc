// Unreliable datagram addressing: where a UD request goes (an address handle and a QP number),
// and address handles made from a datagram's completion, as a server answers the client that
// wrote to it.
#include <endian.h>

#include <cstring>

#include "vrdma/verbs/export.hh"
#include "vrdma/verbs/objects.hh"
#include "vrdma/verbs/ops.hh"

namespace rb::verbs {
namespace {

constexpr uint32_t kUseQpQkey = 0x80000000u;  // verbs: a Q_Key with the high bit set means the QP's own

// The index of `gid` in our table, or -1.
int our_gid_index(const Context& c, const ibv_gid& gid) {
  for (int i = 0; i < Context::kGids; ++i)
    if (!std::memcmp(c.gids[i].raw, gid.raw, 16)) return i;
  return -1;
}

}  // namespace

bool ud_destination(const Qp& q, ibv_ah* ah, uint32_t qpn, uint32_t qkey, vrdma_send_wr& out) {
  if (!ah) return false;
  out.remote_ah = ours<Ah>(ah)->v;
  out.remote_qpn = qpn;
  out.remote_qkey = qkey & kUseQpQkey ? q.attr.qkey : qkey;
  return true;
}

}  // namespace rb::verbs

using namespace rb::verbs;

// The way back to a datagram's sender: its GID (the routing header's source) as the destination,
// and our GID that it was sent to as the source.
VERBS_EXPORT int ibv_init_ah_from_wc(ibv_context* ctx, uint8_t port_num, ibv_wc* wc, ibv_grh* grh,
                                     ibv_ah_attr* ah_attr) {
  std::memset(ah_attr, 0, sizeof *ah_attr);
  ah_attr->dlid = wc->slid;
  ah_attr->sl = wc->sl;
  ah_attr->src_path_bits = wc->dlid_path_bits;
  ah_attr->port_num = port_num;
  if (!(wc->wc_flags & IBV_WC_GRH)) return 0;
  int index = our_gid_index(*Context::of(ctx), grh->dgid);
  if (index < 0) {
    errno = ENOENT;
    return -1;
  }
  uint32_t flow = be32toh(grh->version_tclass_flow);
  ah_attr->is_global = 1;
  ah_attr->grh.dgid = grh->sgid;
  ah_attr->grh.sgid_index = uint8_t(index);
  ah_attr->grh.flow_label = flow & 0xfffff;
  ah_attr->grh.traffic_class = uint8_t(flow >> 20);
  ah_attr->grh.hop_limit = 0xff;
  return 0;
}

VERBS_EXPORT ibv_ah* ibv_create_ah_from_wc(ibv_pd* pd, ibv_wc* wc, ibv_grh* grh, uint8_t port_num) {
  ibv_ah_attr attr;
  if (ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &attr)) return nullptr;
  return ibv_create_ah(pd, &attr);
}
