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

#ifdef __cplusplus
extern "C" {
#endif

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
/* Why the last failed call on this thread failed (also after vrdma_open returned NULL). */
const char *vrdma_last_error(void);
/* The socket path vrdma_open(NULL) uses. */
const char *vrdma_default_socket(void);

struct vrdma_pd *vrdma_alloc_pd(struct vrdma_context *ctx);
int vrdma_dealloc_pd(struct vrdma_pd *pd);

/* A region of `length` bytes of shared memory from the router, with `access` (vrdma_access bits). */
struct vrdma_mr *vrdma_alloc_mr(struct vrdma_pd *pd, size_t length, unsigned access);
int vrdma_dereg_mr(struct vrdma_mr *mr);

/* The router's per-tenant counters as text (a table); free() it. NULL on failure. */
char *vrdma_router_stats(struct vrdma_context *ctx);

#ifdef __cplusplus
}
#endif

#endif /* VRDMA_VRDMA_H */
