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

// The router MACs at most kSignChunk bytes at a time; what a message's MAC covers is longer, so
// it is the MAC of the MAC of the first kSignChunk bytes followed by the rest.
constexpr size_t kSignChunk = 256;
static_assert(kSignedBytes > kSignChunk && 32 + kSignedBytes - kSignChunk <= kSignChunk);

bool mac_of(const Message& m, unsigned char out[32]) {
  ibv_context* ctx = device();
  if (!ctx) return false;
  const auto* bytes = reinterpret_cast<const unsigned char*>(&m);
  unsigned char chained[32 + kSignedBytes - kSignChunk];
  int rc = vrdma_verbs_cm_sign(ctx, bytes, kSignChunk, chained);
  if (rc == 0) {
    std::memcpy(chained + 32, bytes + kSignChunk, kSignedBytes - kSignChunk);
    rc = vrdma_verbs_cm_sign(ctx, chained, sizeof chained, out);
  }
  if (rc != 0) errno = -rc;
  return rc == 0;
}

}  // namespace

bool sign(Message& m) { return mac_of(m, m.mac); }

Sender sender_of(const Message& m) {
  unsigned char want[32];
  if (!mac_of(m, want)) return Sender::unknown;
  unsigned char diff = 0;  // every byte compared: the time says nothing of where they differ
  for (size_t i = 0; i < sizeof want; ++i) diff |= uint8_t(want[i] ^ m.mac[i]);
  return diff == 0 ? Sender::our_tenant : Sender::another_tenant;
}

void fresh_nonce(uint8_t out[16]) {
  if (getrandom(out, 16, 0) != 16) std::memset(out, 0, 16);
}

}  // namespace rb::rdmacm
