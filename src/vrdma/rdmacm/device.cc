// vrdma0, opened once for the process: librdmacm opens every RDMA device at its first call and
// gives each id the context of the device its address is on. vrdma has one device, and every
// IP address of the host is on it (the router carries the traffic whichever interface it names).
#include <mutex>

#include "vrdma/rdmacm/state.hh"

namespace rb::rdmacm {
namespace {

// The process's one context and PD, as librdmacm keeps one per device for the process's life.
struct Device {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  int err = 0;
};

Device& opened() {
  static Device d = [] {
    Device out;
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    if (list && n > 0) out.ctx = ibv_open_device(list[0]);
    out.err = out.ctx ? 0 : (errno ? errno : ENODEV);
    if (list) ibv_free_device_list(list);
    if (!out.ctx) say("no RDMA device: vrdma0 needs the vrdma router (is vrdmad running, VRDMA_SOCKET set?)");
    return out;
  }();
  return d;
}

}  // namespace

ibv_context* device() {
  Device& d = opened();
  if (!d.ctx) errno = d.err;
  return d.ctx;
}

ibv_pd* device_pd() {
  static std::once_flag once;
  Device& d = opened();
  if (!d.ctx) return nullptr;
  std::call_once(once, [&] { d.pd = ibv_alloc_pd(d.ctx); });
  return d.pd;
}

}  // namespace rb::rdmacm

using namespace rb::rdmacm;

RDMACM_EXPORT ibv_context** rdma_get_devices(int* num_devices) {
  ibv_context* ctx = device();
  auto** list = static_cast<ibv_context**>(calloc(2, sizeof(ibv_context*)));
  if (!list) return nullptr;
  list[0] = ctx;
  if (num_devices) *num_devices = ctx ? 1 : 0;
  return list;
}

RDMACM_EXPORT void rdma_free_devices(ibv_context** list) { free(list); }
