/* libvrdma: the client library of vrdma, the user-space virtual RDMA network.
 *
 * A process opens a context on its host's router (vrdmad), which knows it by its uid (the
 * kernel's word, not the process's) and maps it to a tenant. Protection domains and memory
 * regions are the router's objects; the memory of a region is shared memory the router made,
 * mapped here. Calls return NULL or a negative errno value on failure (errno is set too) and
 * vrdma_last_error() says why in one line. A router that is gone makes every call fail within
 * one second.
 */
#ifndef VRDMA_VRDMA_H
#define VRDMA_VRDMA_H

#include <stddef.h>
#include <stdint.h>

/* The version of the C API this header describes. The shared library's soname (libvrdma.so.N)
 * is its major; vrdma_version() says which library a program loaded. */
#define VRDMA_VERSION_MAJOR 1
#define VRDMA_VERSION_MINOR 0
#define VRDMA_VERSION_PATCH 0
#define VRDMA_VERSION_STRING "1.0.0"

#ifdef __cplusplus
extern "C" {
#endif

/* "1.0.0": the loaded library's version (VRDMA_VERSION_STRING of the header it was built with). */
const char *vrdma_version(void);

struct vrdma_context;
struct vrdma_pd;

struct vrdma_mr {
  struct vrdma_pd *pd;
  void *addr;     /* the region, mapped here, zeroed at registration */
  size_t length;
  uint32_t lkey;  /* names the region in local work requests */
  uint32_t rkey;  /* what a peer names it by */
};

enum vrdma_access {
  VRDMA_ACCESS_LOCAL_WRITE = 1,
  VRDMA_ACCESS_REMOTE_WRITE = 2,
  VRDMA_ACCESS_REMOTE_READ = 4,
  VRDMA_ACCESS_REMOTE_ATOMIC = 8,
};

/* socket_path NULL: $VRDMA_SOCKET, else $XDG_RUNTIME_DIR/vrdma.sock, else /run/vrdma/vrdma.sock. */
struct vrdma_context *vrdma_open(const char *socket_path);
int vrdma_close(struct vrdma_context *ctx);
/* The tenant the router put this process in. */
const char *vrdma_tenant(const struct vrdma_context *ctx);
/* 1 when the tenant's QPs always take the router path (its config says path = "router", or it
 * has rate limits), 0 when same-host peers take the direct path unless a QP asks otherwise. */
int vrdma_tenant_routed(const struct vrdma_context *ctx);
/* The router's MAC of this process's tenant and `len` (at most 256) bytes, in mac[32]: what a
 * connection manager signs its messages with, and checks a peer's with (equal only within one
 * tenant, on routers of one cluster). 0, or -errno. */
int vrdma_cm_sign(struct vrdma_context *ctx, const void *bytes, size_t len, unsigned char mac[32]);
/* Why the last failed call on this thread failed (also after vrdma_open returned NULL). */
const char *vrdma_last_error(void);
/* The socket path vrdma_open(NULL) uses. */
const char *vrdma_default_socket(void);

struct vrdma_pd *vrdma_alloc_pd(struct vrdma_context *ctx);
int vrdma_dealloc_pd(struct vrdma_pd *pd);

/* A region of `length` bytes of shared memory from the router, with `access` (vrdma_access bits). */
struct vrdma_mr *vrdma_alloc_mr(struct vrdma_pd *pd, size_t length, unsigned access);
/* Registers the caller's own buffer: its pages (whole pages, so also whatever else shares the
 * first and last) become shared memory, contents kept, mapped over the buffer at the same
 * address, and shared with every other region over them; the region reaches its own bytes only.
 * When the last region over them goes, the pages get private memory again, contents kept. */
struct vrdma_mr *vrdma_reg_mr(struct vrdma_pd *pd, void *addr, size_t length, unsigned access);
int vrdma_dereg_mr(struct vrdma_mr *mr);

/* The router's per-tenant counters as text (a table); free() it. NULL on failure. */
char *vrdma_router_stats(struct vrdma_context *ctx);
/* The same figures as one JSON object: {"tenants": [...], "more_tenants": N, and for root and
 * admin uids "links": [...] and "router": {...}}; free() it. NULL on failure. */
char *vrdma_router_stats_json(struct vrdma_context *ctx);

/* ---- Completion queues and reliable-connected queue pairs ----
 * Work requests and completions mirror verbs (ibv_send_wr, ibv_wc): addresses are virtual
 * addresses in the owner's process, inside a region whose key the request names. Completions of
 * one QP come in the order its requests were posted. A request that fails completes with an
 * error status and moves its QP to the error state: later requests complete with
 * VRDMA_WC_WR_FLUSH_ERR, and so do receives still posted. */

struct vrdma_cq;
struct vrdma_qp;
struct vrdma_srq;
struct vrdma_ah;

enum { VRDMA_MAX_SGE = 8, VRDMA_ADDRESS_BYTES = 40 };
/* A datagram QP's messages: at most VRDMA_UD_MTU bytes each; a receive gets VRDMA_GRH_BYTES of
 * routing header (an InfiniBand GRH) before the message, and its byte_len counts them. */
enum { VRDMA_UD_MTU = 4096, VRDMA_GRH_BYTES = 40 };

enum vrdma_wr_opcode {
  VRDMA_WR_RDMA_WRITE,
  VRDMA_WR_RDMA_WRITE_WITH_IMM,
  VRDMA_WR_SEND,
  VRDMA_WR_SEND_WITH_IMM,
  VRDMA_WR_RDMA_READ,
  VRDMA_WR_ATOMIC_CMP_AND_SWP,
  VRDMA_WR_ATOMIC_FETCH_AND_ADD,
};

enum vrdma_send_flags {
  VRDMA_SEND_SIGNALED = 1, /* a completion even when the QP was made with sq_sig_all = 0 */
  VRDMA_SEND_INLINE = 2,   /* the payload is copied at post time; no lkey needed */
};

struct vrdma_sge {
  uint64_t addr;
  uint32_t length;
  uint32_t lkey;
};

struct vrdma_send_wr {
  uint64_t wr_id;
  struct vrdma_send_wr *next;
  struct vrdma_sge *sg_list;
  int num_sge;
  int opcode;               /* vrdma_wr_opcode */
  unsigned send_flags;      /* vrdma_send_flags */
  uint32_t imm_data;        /* the WITH_IMM opcodes */
  uint64_t remote_addr;     /* RDMA and atomics: the target's virtual address */
  uint32_t rkey;
  uint64_t compare_add;     /* fetch-add: the addend; compare-swap: the expected value */
  uint64_t swap;            /* compare-swap: the new value */
  uint32_t remote_qpn;      /* a datagram QP's SEND: the QP it goes to */
  uint32_t remote_qkey;     /* and that QP's Q_Key (a datagram with another is dropped) */
  struct vrdma_ah *remote_ah; /* where that QP is: NULL for this host, else another host's router */
};

struct vrdma_recv_wr {
  uint64_t wr_id;
  struct vrdma_recv_wr *next;
  struct vrdma_sge *sg_list;
  int num_sge;
};

enum vrdma_wc_status {
  VRDMA_WC_SUCCESS = 0,
  VRDMA_WC_LOC_LEN_ERR,      /* a message longer than the receive buffer */
  VRDMA_WC_LOC_PROT_ERR,     /* a local address outside the region its lkey names */
  VRDMA_WC_WR_FLUSH_ERR,     /* the QP was in the error state */
  VRDMA_WC_REM_ACCESS_ERR,   /* a remote address, key or access right the target does not grant */
  VRDMA_WC_RNR_RETRY_EXC_ERR,/* the peer posted no receive in time */
  VRDMA_WC_REM_INV_REQ_ERR,  /* a SEND longer than the receive it met */
  VRDMA_WC_REM_OP_ERR,       /* the peer is gone */
  VRDMA_WC_GENERAL_ERR,
  VRDMA_WC_LOC_QP_OP_ERR,    /* a request the QP cannot carry out: an unknown opcode, a message over 2^31 B */
  VRDMA_WC_RETRY_EXC_ERR,    /* the peer QP is connected to another QP, or did not connect back in time */
};

enum vrdma_wc_opcode {
  VRDMA_WC_SEND,
  VRDMA_WC_RDMA_WRITE,
  VRDMA_WC_RDMA_READ,
  VRDMA_WC_COMP_SWAP,
  VRDMA_WC_FETCH_ADD,
  VRDMA_WC_RECV = 128,
  VRDMA_WC_RECV_RDMA_WITH_IMM,
};

/* On a receive: the completion carries imm_data. On the initiator's completion of a
 * *_WITH_IMM request (vrdma's addition): the request carried immediate data. */
enum { VRDMA_WC_WITH_IMM = 1 };
/* On a datagram QP's receive: the buffer begins with VRDMA_GRH_BYTES of routing header, and
 * src_qp names the sender. */
enum { VRDMA_WC_GRH = 2 };

struct vrdma_wc {
  uint64_t wr_id;
  int status;     /* vrdma_wc_status */
  int opcode;     /* vrdma_wc_opcode */
  uint32_t byte_len;
  uint32_t imm_data;
  unsigned wc_flags;
  uint32_t qp_num;
  uint32_t src_qp;  /* a datagram QP's receive: the QP that sent it */
};

const char *vrdma_wc_status_str(int status);

struct vrdma_cq *vrdma_create_cq(struct vrdma_context *ctx, int cqe);
/* Event mode: a descriptor (an eventfd) that becomes readable once a completion may be waiting
 * after vrdma_req_notify_cq, or when the router goes away. */
int vrdma_cq_event_fd(const struct vrdma_cq *cq);
/* Arms the CQ: returns 1 when completions may be waiting already (poll; do not sleep), 0 when
 * the caller may sleep until vrdma_cq_event_fd is readable. A completion that arrives between
 * the two is never missed. */
int vrdma_req_notify_cq(struct vrdma_cq *cq);
int vrdma_destroy_cq(struct vrdma_cq *cq);
/* Up to `n` completions into `wc`; returns how many, or a negative errno value: -ECONNRESET once
 * the router is gone (the data path stops with it; requests fail with VRDMA_WC_REM_OP_ERR). */
int vrdma_poll_cq(struct vrdma_cq *cq, int n, struct vrdma_wc *wc);

enum vrdma_qp_flags {
  /* vrdma's extension: a WRITE with immediate data to this QP consumes no receive (its
   * completion has wr_id 0), as libfabric's fi_writedata; without it, one is consumed as in verbs. */
  VRDMA_QP_IMM_WITHOUT_RECV = 1,
  /* The router moves this QP's bytes (FreeFlow's path) even where the tenant may use the direct
   * path; a tenant set to path = "router", or with rate limits, always gets it. Both sides of a
   * connection take the same path. */
  VRDMA_QP_ROUTER_PATH = 2,
  /* vrdma's extension: a failed request completes with its own status and the QP stays ready,
   * so requests after it run (as a libfabric RDM endpoint); without it the QP moves to the error
   * state and flushes, as in verbs. */
  VRDMA_QP_NO_ERROR_STATE = 4,
  /* Verbs' RC behaviour: a peer that goes away leaves the receives still posted here posted (a
   * NIC learns of it only when this QP sends); they are flushed when this QP errs or takes them
   * back. Without it they are flushed as soon as the peer is gone, so a receiver learns at once. */
  VRDMA_QP_KEEP_RECVS = 8,
  /* An unreliable datagram QP (verbs' UD): connected to no peer, each SEND names the QP it goes
   * to (remote_qpn, remote_qkey, remote_ah) of the same tenant, and carries at most
   * VRDMA_UD_MTU bytes. A datagram that finds no such QP, another Q_Key, no receive posted or no
   * room is dropped, and the sender's completion says success, as on a network: the sender
   * learns nothing of QPs it may not reach. SENDs only; always on the router path. */
  VRDMA_QP_DATAGRAM = 16,
};

struct vrdma_qp_init_attr {
  struct vrdma_cq *send_cq, *recv_cq;
  uint32_t max_send_wr, max_recv_wr, max_inline_data;
  int sq_sig_all;
  unsigned flags; /* vrdma_qp_flags */
  /* Receives come from this shared receive queue (of the same PD), and vrdma_post_recv on the
   * QP fails with EINVAL. NULL: the QP's own receive queue. */
  struct vrdma_srq *srq;
};

/* ---- Shared receive queues ----
 * The receives that SENDs (and writes with immediate data) to any QP made with the SRQ take, in
 * the order they were posted; each completes on the recv CQ of the QP that got the message, with
 * that QP's number. The QPs of an SRQ take either path: the SRQ's receives go to whichever sender
 * claims one first (their peers' libraries on the direct path, the router on its path). A QP in
 * error does not flush the SRQ's receives. */
struct vrdma_srq *vrdma_create_srq(struct vrdma_pd *pd, uint32_t max_wr);
/* How many receives it holds (max_wr rounded up to a power of two). */
uint32_t vrdma_srq_capacity(const struct vrdma_srq *srq);
int vrdma_post_srq_recv(struct vrdma_srq *srq, struct vrdma_recv_wr *wr, struct vrdma_recv_wr **bad_wr);
/* Fails with EBUSY while a QP made with it exists. */
int vrdma_destroy_srq(struct vrdma_srq *srq);
struct vrdma_qp *vrdma_create_qp(struct vrdma_pd *pd, const struct vrdma_qp_init_attr *attr);
uint32_t vrdma_qp_num(const struct vrdma_qp *qp);
/* The QP's address (VRDMA_ADDRESS_BYTES), for the peer to connect to; handed over out of band. */
int vrdma_qp_address(const struct vrdma_qp *qp, void *buf, size_t len);
/* Connects to the peer QP at `address`; both sides connect to each other. */
int vrdma_connect_qp(struct vrdma_qp *qp, const void *address, size_t len);
/* 1 when the router moves this QP's bytes (VRDMA_QP_ROUTER_PATH, the tenant's path, or a peer on
 * another host), 0 when the peers' libraries do (the direct path) or before it is connected. A
 * target of the router path should poll its CQ while it waits: an empty poll now and then gives
 * the core away, which the router may need to move the bytes it waits for. */
int vrdma_qp_router_path(const struct vrdma_qp *qp);

/* Where this context's router listens for other hosts' routers (vrdmad --listen); ip is IPv6 or
 * IPv4-mapped, and all zero with port 0 when it does not listen. */
struct vrdma_router_address {
  uint8_t ip[16];
  uint16_t port;
};
int vrdma_query_router(const struct vrdma_context *ctx, struct vrdma_router_address *out);
/* Connects to QP `peer_qp_num` at the router listening at `at` (this host's own router when `at`
 * is its address or all zero), for callers that know a peer by router address and QP number
 * rather than by its address blob (verbs: a GID and a QPN). */
int vrdma_connect_qp_at(struct vrdma_qp *qp, const struct vrdma_router_address *at, uint32_t peer_qp_num);
/* An address handle: another host's router, at the address its vrdma_query_router gives, for
 * datagram QPs' SENDs to QPs of that host (remote_ah). EXDEV when this context's router has no
 * --listen address, so reaches no other host. */
struct vrdma_ah *vrdma_create_ah(struct vrdma_pd *pd, const struct vrdma_router_address *at);
int vrdma_destroy_ah(struct vrdma_ah *ah);
/* Makes a datagram QP ready to send and receive, with `qkey` its Q_Key (verbs: modify_qp to
 * RTS); again to change the Q_Key. EINVAL on a QP made without VRDMA_QP_DATAGRAM. */
int vrdma_ud_ready(struct vrdma_qp *qp, uint32_t qkey);
int vrdma_destroy_qp(struct vrdma_qp *qp);
/* Post calls return 0, or an errno value (positive, as verbs does) with *bad_wr naming the first
 * request not taken. On the direct path a request has completed when vrdma_post_send returns. */
int vrdma_post_send(struct vrdma_qp *qp, struct vrdma_send_wr *wr, struct vrdma_send_wr **bad_wr);
int vrdma_post_recv(struct vrdma_qp *qp, struct vrdma_recv_wr *wr, struct vrdma_recv_wr **bad_wr);
/* Takes back every receive still posted: each completes on the recv CQ with
 * VRDMA_WC_WR_FLUSH_ERR, and the peer will not fill it; but for one the router has begun to
 * fill (router path, another host), which completes by its arrival. */
int vrdma_withdraw_recvs(struct vrdma_qp *qp);
/* Brings a QP in the error state back to ready with the same peer, as verbs' modify_qp through
 * RESET to RTS would; receives were flushed already. Fails with ECONNRESET when the peer is gone. */
int vrdma_recover_qp(struct vrdma_qp *qp);
/* How long a QP on the router path goes on as if its peer were there after the peer has gone, as
 * an RC transport retries an unanswered request before it gives up (verbs: the QP's timeout and
 * retry count). Once it has passed, the requests waiting for the peer complete with
 * VRDMA_WC_REM_OP_ERR and the QP breaks. 0, the default: at once. At most
 * VRDMA_MAX_PEER_TIMEOUT_NS (EINVAL above). The direct path reports a peer that is gone at once
 * whatever this says: its requests complete inside vrdma_post_send. */
#define VRDMA_MAX_PEER_TIMEOUT_NS 3000000000ull
int vrdma_set_peer_timeout(struct vrdma_qp *qp, uint64_t ns);

#ifdef __cplusplus
}
#endif

#endif /* VRDMA_VRDMA_H */
