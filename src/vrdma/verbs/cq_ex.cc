// Extended CQs (ibv_create_cq_ex): the start_poll/next_poll/end_poll iterator and the read_*
// calls for the fields vrdma fills. UCX and libfabric's verbs provider make their CQs this way.
// A field vrdma has no value for (timestamps, flow tags, VLANs) is refused at creation, as a NIC
// without the feature refuses it, rather than read back as zero.
#include <cstring>

#include "vrdma/verbs/export.hh"
#include "vrdma/verbs/objects.hh"
#include "vrdma/verbs/ops.hh"

namespace rb::verbs {
namespace {

constexpr uint64_t kWcFlagsServed = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM |
                                    IBV_WC_EX_WITH_SRC_QP | IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL |
                                    IBV_WC_EX_WITH_DLID_PATH_BITS;
constexpr uint32_t kCompMaskServed = IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD;
constexpr uint32_t kFlagsServed = IBV_CREATE_CQ_ATTR_SINGLE_THREADED | IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN;

Cq* of(ibv_cq_ex* cq) { return reinterpret_cast<Cq*>(cq); }
const vrdma_wc& cur(ibv_cq_ex* cq) { return of(cq)->current; }

// Takes the next completion into `current`; ENOENT when there is none.
int take_next(ibv_cq_ex* cq) {
  Cq* c = of(cq);
  int r = vrdma_poll_cq(c->v, 1, &c->current);
  if (r < 0) return EINVAL;
  if (r == 0) return ENOENT;
  cq->wr_id = c->current.wr_id;
  cq->status = wc_status(c->current.status);
  return 0;
}

int start_poll(ibv_cq_ex* cq, ibv_poll_cq_attr* attr) {
  if (attr && attr->comp_mask) return EINVAL;
  return take_next(cq);
}
int next_poll(ibv_cq_ex* cq) { return take_next(cq); }
void end_poll(ibv_cq_ex*) {}

ibv_wc_opcode read_opcode(ibv_cq_ex* cq) { return ibv_wc_opcode(cur(cq).opcode); }
uint32_t read_vendor_err(ibv_cq_ex* cq) { return cur(cq).status == VRDMA_WC_SUCCESS ? 0 : uint32_t(cur(cq).status); }
uint32_t read_byte_len(ibv_cq_ex* cq) { return cur(cq).byte_len; }
__be32 read_imm_data(ibv_cq_ex* cq) { return cur(cq).imm_data; }
uint32_t read_qp_num(ibv_cq_ex* cq) { return cur(cq).qp_num; }
uint32_t read_src_qp(ibv_cq_ex* cq) { return cur(cq).src_qp; }  // a datagram's sender; 0 on RC, as verbs
unsigned int read_wc_flags(ibv_cq_ex* cq) { return wc_flags_of(cur(cq)); }
uint32_t read_slid(ibv_cq_ex*) { return 0; }  // Ethernet link layer: no LIDs
uint8_t read_sl(ibv_cq_ex*) { return 0; }
uint8_t read_dlid_path_bits(ibv_cq_ex*) { return 0; }

void install_cq_ex_ops(ibv_cq_ex* x) {
  x->start_poll = start_poll;
  x->next_poll = next_poll;
  x->end_poll = end_poll;
  x->read_opcode = read_opcode;
  x->read_vendor_err = read_vendor_err;
  x->read_byte_len = read_byte_len;
  x->read_imm_data = read_imm_data;
  x->read_qp_num = read_qp_num;
  x->read_src_qp = read_src_qp;
  x->read_wc_flags = read_wc_flags;
  x->read_slid = read_slid;
  x->read_sl = read_sl;
  x->read_dlid_path_bits = read_dlid_path_bits;
}

}  // namespace

ibv_cq_ex* create_cq_ex(ibv_context* ctx, ibv_cq_init_attr_ex* attr) {
  if (attr->wc_flags & ~kWcFlagsServed) {
    say("create_cq_ex: wc_flags 0x%llx asks for fields vrdma does not fill (it fills byte_len, imm, qp_num, "
        "src_qp, slid, sl, dlid_path_bits: 0x%llx)", (unsigned long long)attr->wc_flags,
        (unsigned long long)kWcFlagsServed);
    return fail_null<ibv_cq_ex>(EOPNOTSUPP);
  }
  if ((attr->comp_mask & ~kCompMaskServed) ||
      ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) && (attr->flags & ~kFlagsServed))) {
    say("create_cq_ex: comp_mask 0x%x / flags 0x%x not supported", attr->comp_mask, attr->flags);
    return fail_null<ibv_cq_ex>(EOPNOTSUPP);
  }
  Cq* c = make_cq(ctx, int(attr->cqe), attr->cq_context, attr->channel);
  if (!c) return nullptr;
  c->ex.comp_mask = 0;
  install_cq_ex_ops(&c->ex);
  return &c->ex;
}

}  // namespace rb::verbs
