#pragma once
// What the link's unit tests share: keys of one repeated byte, and routers at 10.0.0.N:7480.
#include <cstdint>

#include "vrdma/proto/control.hh"
#include "vrdma/router/link_auth.hh"

namespace rb::vrdma::link_test {

inline LinkKey32 key(uint8_t fill) {
  LinkKey32 k;
  k.fill(fill);
  return k;
}

inline proto::RouterAddress at(uint8_t last) {
  proto::RouterAddress a;
  a.ip[10] = a.ip[11] = 0xff;
  a.ip[12] = 10;
  a.ip[15] = last;
  a.port = 7480;
  return a;
}

}  // namespace rb::vrdma::link_test
