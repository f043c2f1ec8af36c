// The C API over Context: C structs that own their C++ objects, errno and a per-thread message
// for every failure.
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include <vrdma/vrdma.h>
#include "vrdma/lib/context.hh"

struct vrdma_context {
  std::unique_ptr<rb::vrdma::Context> impl;
};

struct vrdma_pd {
  vrdma_context* ctx;
  uint32_t id;
};

namespace {

struct MrBox {
  vrdma_mr pub;  // first: the public pointer is this struct's
  std::unique_ptr<rb::vrdma::Region> region;
};

thread_local std::string last_error;
thread_local std::string default_socket;

int set_error(int err, std::string message) {
  last_error = std::move(message);
  errno = err;
  return -err;
}

template <class T>
bool failed(const rb::vrdma::Call<T>& c) {
  if (c.ok()) return false;
  set_error(c.error.err, c.error.message);
  return true;
}

}  // namespace

extern "C" {

const char* vrdma_last_error(void) { return last_error.c_str(); }

const char* vrdma_default_socket(void) {
  default_socket = rb::vrdma::default_socket_path();
  return default_socket.c_str();
}

vrdma_context* vrdma_open(const char* socket_path) {
  auto c = rb::vrdma::Context::open(socket_path ? socket_path : rb::vrdma::default_socket_path());
  if (failed(c)) return nullptr;
  return new (std::nothrow) vrdma_context{std::move(*c.value)};
}

int vrdma_close(vrdma_context* ctx) {
  delete ctx;  // closing the socket releases what the context still held, at the router
  return 0;
}

const char* vrdma_tenant(const vrdma_context* ctx) { return ctx->impl->tenant().c_str(); }

vrdma_pd* vrdma_alloc_pd(vrdma_context* ctx) {
  auto r = ctx->impl->alloc_pd();
  if (failed(r)) return nullptr;
  return new (std::nothrow) vrdma_pd{ctx, *r.value};
}

int vrdma_dealloc_pd(vrdma_pd* pd) {
  auto r = pd->ctx->impl->dealloc_pd(pd->id);
  if (failed(r)) return -r.error.err;
  delete pd;
  return 0;
}

vrdma_mr* vrdma_alloc_mr(vrdma_pd* pd, size_t length, unsigned access) {
  auto r = pd->ctx->impl->alloc_mr(pd->id, length, access);
  if (failed(r)) return nullptr;
  auto* box = new (std::nothrow) MrBox{};
  if (!box) {
    set_error(ENOMEM, "out of memory");
    return nullptr;
  }
  box->region = std::move(*r.value);
  box->pub = {pd, box->region->map.data(), length, box->region->lkey, box->region->rkey};
  return &box->pub;
}

int vrdma_dereg_mr(vrdma_mr* mr) {
  auto* box = reinterpret_cast<MrBox*>(mr);
  auto r = mr->pd->ctx->impl->dereg_mr(*box->region);
  if (failed(r)) return -r.error.err;
  delete box;
  return 0;
}

char* vrdma_router_stats(vrdma_context* ctx) {
  auto r = ctx->impl->stats();
  if (failed(r)) return nullptr;
  return strdup(r.value->c_str());
}

}  // extern "C"
