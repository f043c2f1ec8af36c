#pragma once
// An address handle as the C API hands it out: the number the router gave it (CreateAh), which a
// datagram QP's SEND carries to name another host's router.
#include <cstdint>

#include <vrdma/vrdma.h>

#include "vrdma/lib/context.hh"

struct vrdma_ah {
  rb::vrdma::Context* ctx;
  uint32_t id;
};
