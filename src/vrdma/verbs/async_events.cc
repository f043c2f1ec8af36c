// Asynchronous events: none happen on vrdma0.
#include <unistd.h>

#include "vrdma/verbs/export.hh"
#include "vrdma/verbs/objects.hh"

using namespace rb::verbs;

// No asynchronous events happen on vrdma0: a reader waits as it would on a quiet NIC, and a
// signal interrupts it with EINTR.
VERBS_EXPORT int ibv_get_async_event(ibv_context* ctx, ibv_async_event*) {
  uint64_t v;
  if (read(ctx->async_fd, &v, sizeof v) < 0) return -1;
  errno = EAGAIN;
  return -1;
}

VERBS_EXPORT void ibv_ack_async_event(ibv_async_event*) {}
