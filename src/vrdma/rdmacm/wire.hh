#pragma once
// The connection manager's messages between two processes' rdmacm layers, over a TCP connection
// of their own from the active side to the passive side's (IP, port): what IB's CM sends as MADs
// (REQ, REP, RTU, REJ, DREQ), each a fixed-size record. They carry what each side's QP needs of the
// other (its number, its first PSN, and GID 0: the address of the vrdma router serving it) and the
// programs' private data; the RDMA traffic itself goes through the routers, never this connection.
// A REQ and its REP carry their tenant's MAC (vrdma_cm_sign: only a process of the same tenant
// makes the same one), the REP over the REQ's nonce, so another tenant's process can neither ask
// a listener for a connection nor answer for one. A REQ also names, under its MAC, the address
// its sender dialed and when it was sent, and a listener remembers the nonces it took lately: a
// REQ caught on its way (or by a process listening where the sender dialed) can neither be
// replayed to the listener later nor relayed to another.
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>

namespace rb::rdmacm {

enum class Kind : uint8_t { req = 1, rep, rtu, rej, dreq };

// Private data each message carries at most, as InfiniBand's rdma_cm gives it to programs.
constexpr uint8_t kReqPrivate = 56, kRepPrivate = 196, kRejPrivate = 148;

struct Message {
  uint32_t magic = kMagic;
  uint8_t version = kVersion;
  Kind kind = Kind::req;
  uint8_t private_len = 0;
  uint8_t responder_resources = 0, initiator_depth = 0, retry_count = 0, rnr_retry_count = 0, srq = 0;
  uint32_t qp_num = 0, psn = 0;
  uint8_t gid[16] = {};
  uint8_t private_data[kRepPrivate] = {};
  uint8_t to_ip[16] = {};  // a REQ's: the address its sender dialed (IPv4 as ::ffff:a.b.c.d),
  uint16_t to_port = 0;    // its port,
  uint16_t pad = 0;
  uint32_t pad2 = 0;
  int64_t sent_ns = 0;     // and when it was sent (CLOCK_REALTIME)
  uint8_t nonce[16] = {};  // a REQ's, random; its REP carries it back
  uint8_t mac[32] = {};    // REQ, REP: the tenant's MAC of all before it
  static constexpr uint32_t kMagic = 0x4d435256;  // "VRCM"
  static constexpr uint8_t kVersion = 3;          // 2: nonce and mac; 3: where and when a REQ was for
};
static_assert(sizeof(Message) == 312);
constexpr size_t kSignedBytes = offsetof(Message, mac);

// A REQ is taken when sent within this of the listener's clock (hosts keep time by NTP).
constexpr int64_t kReqSkewNs = 30'000'000'000;

int64_t wall_ns();  // CLOCK_REALTIME
// Sets a REQ's to_ip and to_port to `dialed`, and its sent_ns to now.
void address_req(Message& m, const sockaddr_storage& dialed);
// Whether a REQ was made for the connection `fd` (its local end is what the REQ's sender dialed)
// within kReqSkewNs of now.
bool req_for_here_and_now(const Message& m, int fd);

// Sends one whole message on a blocking socket with a time limit; false on error.
bool send_message(int fd, const Message& m);

// Takes a message in as many pieces as its socket gives them, never waiting: a peer that sends
// part of one and stops costs its own connection, not the thread that reads the channel.
class MessageReader {
 public:
  enum class Got { nothing, message, ended };  // ended: the stream ended, failed or spoke garbage
  Got read(int fd, Message& out);

 private:
  uint8_t buf_[sizeof(Message)] = {};
  size_t have_ = 0;
};

}  // namespace rb::rdmacm
