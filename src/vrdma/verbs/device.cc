// The device: one, vrdma0, with one active Ethernet port whose GID is the router's address in
// RoCE v2 form, so a peer on another host names that host's router by it.
#include <endian.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include "vrdma/proto/gid.hh"
#include "vrdma/verbs/export.hh"
#include "vrdma/verbs/objects.hh"
#include "vrdma/verbs/ops.hh"

#undef ibv_get_device_list
#undef ibv_query_port

namespace rb::verbs {
namespace {

constexpr const char* kDeviceName = "vrdma0";

// A stable node GUID per host (FNV-1a of the host name): verbs programs print it, and two hosts
// should not look alike.
uint64_t host_guid() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  uint64_t h = 1469598103934665603ull;
  for (const char* p = host; *p; ++p) h = (h ^ uint8_t(*p)) * 1099511628211ull;
  return htobe64(h);
}

// Built once and never changed: the list a program gets points at it, and contexts keep it after
// ibv_free_device_list, as with a real device.
const Device& the_device() {
  static const Device d = [] {
    Device x;
    x.dev.node_type = IBV_NODE_CA;
    x.dev.transport_type = IBV_TRANSPORT_IB;
    std::strncpy(x.dev.name, kDeviceName, sizeof x.dev.name - 1);
    std::strncpy(x.dev.dev_name, kUverbsName, sizeof x.dev.dev_name - 1);
    std::strncpy(x.dev.dev_path, "/nonexistent/vrdma/uverbs-vrdma0", sizeof x.dev.dev_path - 1);
    std::strncpy(x.dev.ibdev_path, "/nonexistent/vrdma/vrdma0", sizeof x.dev.ibdev_path - 1);
    x.guid = host_guid();
    return x;
  }();
  return d;
}

Device* device_of(ibv_device* d) { return reinterpret_cast<Device*>(d); }

// GID 0: the router's listening address, as the router writes it in a datagram's header.
void derive_gid(Context& c) {
  vrdma_query_router(c.v, &c.router);
  auto g = rb::vrdma::proto::router_gid(c.router.ip, c.router.port);
  std::memcpy(c.gids[0].raw, g.data(), 16);
  // fe80::/64 and an interface id, as NICs make theirs from their MAC: here the node GUID mixed
  // with the router's address, since hosts that share a host name (containers, namespaces) have
  // routers of their own.
  uint64_t id = the_device().guid;
  for (size_t i = 0; i < sizeof c.router; ++i) id = (id ^ reinterpret_cast<const uint8_t*>(&c.router)[i]) * 1099511628211ull;
  c.gids[1].raw[0] = 0xfe;
  c.gids[1].raw[1] = 0x80;
  std::memcpy(c.gids[1].raw + 8, &id, 8);
  c.gids[1].raw[8] ^= 0x02;
}

void fill_device_attr(ibv_device_attr& a) {
  std::memset(&a, 0, sizeof a);
  std::snprintf(a.fw_ver, sizeof a.fw_ver, "vrdma %s", RDMABENCH_VERSION);
  a.node_guid = a.sys_image_guid = the_device().guid;
  a.max_mr_size = 1ull << 40;
  a.page_size_cap = uint64_t(sysconf(_SC_PAGESIZE));
  a.max_qp = 1 << 16;
  a.max_qp_wr = 1 << 16;
  a.device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN;
  a.max_sge = a.max_sge_rd = VRDMA_MAX_SGE;
  a.max_cq = 1 << 16;
  a.max_cqe = 1 << 20;
  a.max_mr = 1 << 20;
  a.max_pd = 1 << 16;
  a.max_qp_rd_atom = a.max_qp_init_rd_atom = a.max_res_rd_atom = 16;
  a.atomic_cap = IBV_ATOMIC_HCA;
  a.max_ah = 1 << 16;
  a.max_srq = 1 << 16;
  a.max_srq_wr = 1 << 16;
  a.max_srq_sge = VRDMA_MAX_SGE;
  a.max_pkeys = 1;
  a.phys_port_cnt = 1;
}

// Fills `len` bytes of `a` (callers of the old symbol pass a shorter struct).
void fill_port_attr(ibv_port_attr* a, size_t len) {
  ibv_port_attr p{};
  p.state = IBV_PORT_ACTIVE;
  p.max_mtu = p.active_mtu = IBV_MTU_4096;
  p.gid_tbl_len = Context::kGids;
  p.max_msg_sz = 1u << 31;
  p.pkey_tbl_len = 1;
  p.active_width = 2;   // 4x
  p.active_speed = 32;  // 25 Gb/s a lane: 100 Gb/s
  p.phys_state = 5;     // link up
  p.max_vl_num = 1;     // VL0 only
  p.link_layer = IBV_LINK_LAYER_ETHERNET;
  std::memcpy(a, &p, len < sizeof p ? len : sizeof p);
}

int check_port_gid(uint32_t port, uint32_t index) { return port == 1 && index < uint32_t(Context::kGids) ? 0 : EINVAL; }

}  // namespace

int query_port(ibv_context*, uint8_t port, ibv_port_attr* attr, size_t len) {
  if (port != 1) return EINVAL;
  fill_port_attr(attr, len);
  return 0;
}

int query_device_ex(ibv_context*, const ibv_query_device_ex_input*, ibv_device_attr_ex* attr, size_t len) {
  if (len < sizeof attr->orig_attr) return EINVAL;
  std::memset(attr, 0, len);
  fill_device_attr(attr->orig_attr);
  attr->device_cap_flags_ex = attr->orig_attr.device_cap_flags;
  return 0;
}

}  // namespace rb::verbs

using namespace rb::verbs;

VERBS_EXPORT ibv_device** ibv_get_device_list(int* num) {
  auto** list = static_cast<ibv_device**>(std::calloc(2, sizeof(ibv_device*)));
  if (!list) return fail_null<ibv_device*>(ENOMEM);
  list[0] = const_cast<ibv_device*>(&the_device().dev);
  if (num) *num = 1;
  return list;
}

VERBS_EXPORT void ibv_free_device_list(ibv_device** list) { std::free(list); }
VERBS_EXPORT const char* ibv_get_device_name(ibv_device* d) { return d->name; }
VERBS_EXPORT __be64 ibv_get_device_guid(ibv_device* d) { return device_of(d)->guid; }
VERBS_EXPORT int ibv_get_device_index(ibv_device*) { return 0; }

VERBS_EXPORT ibv_context* ibv_open_device(ibv_device* dev) {
  auto* c = new (std::nothrow) Context;
  if (!c) return fail_null<ibv_context>(ENOMEM);
  c->v = vrdma_open(nullptr);
  if (!c->v) {
    int err = errno;
    say("cannot reach the vrdma router at %s: %s (start vrdmad, or set VRDMA_SOCKET)", vrdma_default_socket(),
        vrdma_last_error());
    delete c;
    return fail_null<ibv_context>(err ? err : ENODEV);
  }
  derive_gid(*c);
  c->async_fd = rb::UniqueFd(eventfd(0, EFD_CLOEXEC));
  ibv_context& ctx = c->vctx.context;
  ctx.device = dev;
  ctx.cmd_fd = -1;
  ctx.async_fd = c->async_fd.get();
  ctx.num_comp_vectors = 1;
  pthread_mutex_init(&ctx.mutex, nullptr);
  ctx.abi_compat = reinterpret_cast<void*>(UINTPTR_MAX);  // "extended": verbs_context ops are read
  install_context_ops(c->vctx);
  return &ctx;
}

VERBS_EXPORT int ibv_close_device(ibv_context* ctx) {
  Context* c = Context::of(ctx);
  vrdma_close(c->v);
  pthread_mutex_destroy(&ctx->mutex);
  delete c;
  return 0;
}

VERBS_EXPORT int ibv_query_device(ibv_context*, ibv_device_attr* attr) {
  fill_device_attr(*attr);
  return 0;
}

// The symbol's callers pass the old, shorter struct (everything up to `flags`).
VERBS_EXPORT int ibv_query_port(ibv_context*, uint8_t port, struct _compat_ibv_port_attr* attr) {
  if (port != 1) return EINVAL;
  fill_port_attr(reinterpret_cast<ibv_port_attr*>(attr), offsetof(ibv_port_attr, flags) + 1);
  return 0;
}

VERBS_EXPORT int ibv_query_gid(ibv_context* ctx, uint8_t port, int index, union ibv_gid* gid) {
  if (index < 0 || check_port_gid(port, uint32_t(index))) {
    errno = EINVAL;
    return -1;
  }
  *gid = Context::of(ctx)->gids[index];
  return 0;
}

VERBS_EXPORT int _ibv_query_gid_ex(ibv_context* ctx, uint32_t port, uint32_t index, ibv_gid_entry* entry,
                                   uint32_t flags, size_t entry_size) {
  if (flags || entry_size < sizeof *entry) return EINVAL;
  if (int err = check_port_gid(port, index)) return err;
  std::memset(entry, 0, entry_size);
  entry->gid = Context::of(ctx)->gids[index];
  entry->gid_index = index;
  entry->port_num = port;
  entry->gid_type = IBV_GID_TYPE_ROCE_V2;
  return 0;
}

VERBS_EXPORT ssize_t _ibv_query_gid_table(ibv_context* ctx, ibv_gid_entry* entries, size_t max_entries,
                                          uint32_t flags, size_t entry_size) {
  if (flags || entry_size < sizeof *entries) return -EINVAL;
  if (max_entries < size_t(Context::kGids)) return -EINVAL;
  auto* at = reinterpret_cast<uint8_t*>(entries);
  for (int i = 0; i < Context::kGids; ++i)
    if (int err = _ibv_query_gid_ex(ctx, 1, uint32_t(i), reinterpret_cast<ibv_gid_entry*>(at + i * entry_size), 0, entry_size))
      return -err;
  return Context::kGids;
}

// enum ibv_gid_type_sysfs (driver.h): 1 is RoCE v2.
VERBS_EXPORT int ibv_query_gid_type(ibv_context*, uint8_t port, unsigned int index, int* type) {
  if (check_port_gid(port, index)) {
    errno = EINVAL;
    return -1;
  }
  *type = 1;
  return 0;
}

VERBS_EXPORT int ibv_query_pkey(ibv_context*, uint8_t port, int index, __be16* pkey) {
  if (port != 1 || index != 0) {
    errno = EINVAL;
    return -1;
  }
  *pkey = htobe16(0xffff);
  return 0;
}

VERBS_EXPORT int ibv_get_pkey_index(ibv_context*, uint8_t port, __be16 pkey) {
  if (port != 1 || pkey != htobe16(0xffff)) return -EINVAL;
  return 0;
}

// For libvrdma-rdmacm.so: its tenant's MAC of a connection manager's message (vrdma_cm_sign).
VERBS_EXPORT int vrdma_verbs_cm_sign(ibv_context* ctx, const void* bytes, size_t len, unsigned char mac[32]) {
  return vrdma_cm_sign(Context::of(ctx)->v, bytes, len, mac);
}
