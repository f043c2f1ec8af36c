// Which tenant a connection manager's message comes from. Programs meet over TCP of their own,
// which any local user or host may open; a REQ and its REP carry the MAC their router makes for
// the sender's tenant (vrdma_cm_sign, proto CmSign), and the receiver asks its own router for the
// MAC of the same bytes: they match within one tenant only. A REQ from another tenant never
// reaches the program (as a partition key keeps a NIC's CM from hearing another partition), and a
// REP from another tenant's listener fails the connect.
#include <sys/random.h>

#include <cerrno>
#include <cstring>

#include "vrdma/rdmacm/state.hh"

extern "C" int vrdma_verbs_cm_sign(ibv_context* ctx, const void* bytes, size_t len, unsigned char mac[32]);

namespace rb::rdmacm {
namespace {

bool mac_of(const Message& m, unsigned char out[32]) {
  ibv_context* ctx = device();
  if (!ctx) return false;
  int rc = vrdma_verbs_cm_sign(ctx, &m, kSignedBytes, out);
  if (rc != 0) errno = -rc;
  return rc == 0;
}

}  // namespace

bool sign(Message& m) { return mac_of(m, m.mac); }

bool from_our_tenant(const Message& m) {
  unsigned char want[32];
  if (!mac_of(m, want)) return false;
  unsigned char diff = 0;  // every byte compared: the time says nothing of where they differ
  for (size_t i = 0; i < sizeof want; ++i) diff |= uint8_t(want[i] ^ m.mac[i]);
  return diff == 0;
}

void fresh_nonce(uint8_t out[16]) {
  if (getrandom(out, 16, 0) != 16) std::memset(out, 0, 16);
}

}  // namespace rb::rdmacm
