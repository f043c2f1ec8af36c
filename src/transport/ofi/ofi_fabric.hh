#pragma once
// What the ofi transport's domain, endpoints and memory regions share: the libfabric fabric and
// domain they are made from, and what an endpoint takes from its domain.
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include <cstdint>

#include "transport/ofi/ofi_info.hh"

namespace rb::transport::ofi {

template <class F>
void close_fid(F* f) {
  if (f) fi_close(&f->fid);
}

// The fabric and domain outlive every endpoint and MR made from them.
struct Fabric {
  InfoPtr info;
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  ~Fabric() {
    close_fid(domain);
    close_fid(fabric);
  }
};

// What an endpoint needs from its domain besides the fabric: the ops it may accept, how its
// immediates travel, and a key for registering its contexts where the provider asks for it.
struct EpSetup {
  bool atomics = false, imm_data = false;
  bool len_in_cq_data = false;  // see write_imm_data
  uint64_t ring_key = 0;
};

}  // namespace rb::transport::ofi
