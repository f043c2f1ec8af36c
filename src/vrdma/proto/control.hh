#pragma once
// The control protocol between libvrdma and the router (vrdmad), over a Unix SOCK_SEQPACKET
// socket: one message per packet, so the socket keeps the boundaries and no length can run past
// a packet. A message is a fixed Header and a body whose size the type fixes; memory comes with
// the reply as a descriptor (SCM_RIGHTS). The client never says who it is: the router reads
// SO_PEERCRED. Everything here is plain data, parsed with bounds checks and nothing else of ours,
// so a fuzzer can drive parse() directly.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace rb::vrdma::proto {

constexpr uint32_t kMagic = 0x31445256;  // "VRD1" little-endian
constexpr uint16_t kVersion = 8;  // 6: a region is a window of its memfd (RegMr, Granted: offset); 7: datagram QPs, address handles, SRQs on the direct path; 8: cm_sign
constexpr size_t kMaxMessage = 4096;     // the largest packet either side accepts
constexpr size_t kNameBytes = 64;        // a tenant name, NUL padded

enum class Type : uint16_t {
  hello = 1,     // client -> router: Hello; reply Welcome
  welcome,       // router -> client
  error,         // router -> client: Error (the request failed; nothing changed)
  alloc_pd,      // client: Empty; reply Handle
  dealloc_pd,    // client: Handle; reply Empty of type done
  reg_mr,        // client: RegMr; reply MrGranted with the region's memfd
  mr_granted,    // router -> client
  dereg_mr,      // client: Handle (the MR's lkey); reply done
  handle,        // router -> client: Handle
  done,          // router -> client: Empty
  stats,         // client: StatsAsk; reply StatsText
  stats_text,    // router -> client: text of StatsText::len bytes after it
  create_qp,     // client: CreateQp with the QP's shared memory (a memfd); reply QpCreated
  qp_created,    // router -> client
  connect_qp,    // client: ConnectQp; reply QpConnected with the peer QP's shared memory
  qp_connected,  // router -> client
  grant,         // client: GrantAsk (direct path); reply Granted with the region's memfd
  granted,       // router -> client
  destroy_qp,    // client: Handle (the QP number); reply done
  send_doorbell, // client: Handle (the QP number) with its send CQ's eventfd; reply done
  create_srq,    // client: CreateSrq with the SRQ's ring (a memfd); reply Handle (the SRQ number)
  destroy_srq,   // client: Handle (the SRQ number); reply done
  create_ah,     // client: CreateAh (another host's router); reply Handle (the address handle)
  destroy_ah,    // client: Handle (the address handle); reply done
  peer_srq,      // client: Handle (its QP, connected on the direct path); reply done with the peer's SRQ memfd
  cm_sign,       // client: CmSign; reply cm_signed (CmSigned): the tenant's MAC of the bytes
  cm_signed,     // router -> client
};
const char* type_name(Type t);

struct Header {
  uint32_t magic = kMagic;
  uint16_t version = kVersion;
  uint16_t type = 0;
  uint32_t seq = 0;     // the request's number; its reply carries it back
  uint32_t body = 0;    // bytes after the header
};

// Where a router listens for the routers of other hosts: an IPv6 address (IPv4 mapped) and a
// port; port 0: it does not.
struct RouterAddress {
  uint8_t ip[16] = {};
  uint16_t port = 0;
  uint16_t pad = 0;
  bool operator==(const RouterAddress&) const = default;
};

struct Empty {};
struct Hello {
  uint32_t pid = 0;  // informative only (logs); identity is SO_PEERCRED
  uint32_t flags = 0;
};
struct Welcome {
  char tenant[kNameBytes] = {};
  uint64_t max_reg_bytes = 0;  // 0: unlimited
  uint32_t max_qps = 0;        // 0: unlimited
  uint32_t client_id = 0;      // 0: the router's numbering of connections counts every tenant's, so it is not shown
  uint64_t router_id = 0;      // random per router run: QP addresses name it
  uint8_t direct = 0;          // the tenant's same-host peers may use the direct path
  uint8_t pad[7] = {};
  RouterAddress listen;        // where the router listens for other hosts' routers (QP addresses carry it)
  uint32_t pad2 = 0;
};
static_assert(sizeof(RouterAddress) == 20 && sizeof(Welcome) == 120);
// Errors mirror errno values the verbs API uses (EINVAL, ENOMEM, EPERM, ...), so a verbs layer
// can return them unchanged.
struct Error {
  int32_t err = 0;
  char message[200] = {};
};
struct Handle {
  uint32_t id = 0;
};
enum Access : uint32_t {
  local_write = 1,
  remote_write = 2,
  remote_read = 4,
  remote_atomic = 8,
};
struct RegMr {
  uint32_t pd = 0;
  uint32_t access = 0;  // Access bits
  uint64_t len = 0;     // bytes; the router rounds the memfd up to whole pages
  uint64_t va = 0;      // its first byte where the client maps it: verbs addresses are the owner's
  uint64_t offset = 0;  // where in the client's memfd the page of `va` is (regions over the same
                        // pages share one memfd); `va` is that far into the page
};
struct MrGranted {
  uint32_t lkey = 0, rkey = 0;
  uint64_t len = 0;       // as asked
  uint64_t map_len = 0;   // the memfd's size: map this much
};
// What `stats` asks for: the table (text) or the same figures as one JSON object.
enum class StatsFormat : uint32_t { text = 0, json = 1 };
struct StatsAsk {
  uint32_t format = 0;  // StatsFormat
  uint32_t pad = 0;
};
// What two processes' connection managers say to each other (rdmacm/wire.hh) carries the MAC of
// their tenant: the router's HMAC-SHA256 of the tenant's name and these bytes under a key of its
// own (derived from the cluster's key, so routers of one cluster agree). A process signs what it
// sends and checks what it receives by signing it too: only its tenant's MACs match.
struct CmSign {
  static constexpr size_t kMaxBytes = 256;
  uint32_t len = 0, pad = 0;
  uint8_t bytes[kMaxBytes] = {};
};
struct CmSigned {
  uint8_t mac[32] = {};
};
struct StatsText {
  uint32_t len = 0;
};
struct CreateQp {
  uint32_t pd = 0;
  uint32_t srq = 0;      // the SRQ its receives come from; 0: its own receive ring
  uint64_t mem_len = 0;  // bytes of the QP's shared memory (the descriptor rides with the packet)
};
// A shared receive queue: one ring of receives (the owner produces, the router consumes) that
// the SENDs to every QP made with it take from. Its QPs take the router path.
struct CreateSrq {
  uint32_t pd = 0;
  uint32_t pad = 0;
  uint64_t mem_len = 0;  // bytes of the ring's shared memory (the descriptor rides with the packet)
};
struct QpCreated {
  uint32_t qp_num = 0;
};
// Where a datagram QP's SENDs that name this handle go: the router listening at `at`.
struct CreateAh {
  RouterAddress at;
  uint32_t pad = 0;
};
static_assert(sizeof(CreateAh) == 24);
struct ConnectQp {
  uint32_t qp_num = 0;       // the caller's
  uint32_t peer_qp_num = 0;  // from the peer's address; a datagram QP's: its Q_Key (it has no peer)
  uint64_t peer_router = 0;  // the router the peer's address names
  RouterAddress peer_at;     // and where it listens
  uint32_t pad = 0;
};
static_assert(sizeof(ConnectQp) == 40);
struct QpConnected {
  uint64_t peer_mem_len = 0;  // direct path: map this much of the descriptor (the peer QP's memory)
  uint32_t router_path = 0;   // 1: the router moves the bytes; the descriptor is its kick eventfd
  uint32_t peer_srq_len = 0;  // direct path, a peer whose receives come from its SRQ: that SRQ's
                              // memory, asked for with peer_srq (its ring has several consumers)
};
// Direct path: a mapping of a region of the connected peer QP's PD, named by its rkey (for
// WRITE, READ, atomics) or its lkey (a receive buffer a SEND fills).
struct GrantAsk {
  uint32_t qp_num = 0;
  uint32_t key = 0;
};
struct Granted {
  uint64_t va = 0, len = 0, map_len = 0;
  uint32_t access = 0;
  uint32_t first = 0;   // the region's first byte is this far into the mapping
  uint64_t offset = 0;  // map the memfd from here
};

template <class T>
constexpr Type type_of();
template <> constexpr Type type_of<Hello>() { return Type::hello; }
template <> constexpr Type type_of<Welcome>() { return Type::welcome; }
template <> constexpr Type type_of<Error>() { return Type::error; }
template <> constexpr Type type_of<RegMr>() { return Type::reg_mr; }
template <> constexpr Type type_of<MrGranted>() { return Type::mr_granted; }
template <> constexpr Type type_of<StatsText>() { return Type::stats_text; }
template <> constexpr Type type_of<CmSign>() { return Type::cm_sign; }
template <> constexpr Type type_of<CmSigned>() { return Type::cm_signed; }
template <> constexpr Type type_of<CreateQp>() { return Type::create_qp; }
template <> constexpr Type type_of<CreateSrq>() { return Type::create_srq; }
template <> constexpr Type type_of<QpCreated>() { return Type::qp_created; }
template <> constexpr Type type_of<ConnectQp>() { return Type::connect_qp; }
template <> constexpr Type type_of<QpConnected>() { return Type::qp_connected; }
template <> constexpr Type type_of<GrantAsk>() { return Type::grant; }
template <> constexpr Type type_of<Granted>() { return Type::granted; }

// The body size each type must carry; nullopt for a type that is not ours.
std::optional<size_t> body_size(Type t);

struct Message {
  Header h;
  std::span<const uint8_t> body;  // into the packet
  std::span<const uint8_t> tail;  // bytes after the fixed body (stats_text only)
  Type type() const { return Type(h.type); }
  template <class T>
  T as() const {  // the caller has checked type(); body_size guarantees the length
    T v;
    std::memcpy(&v, body.data(), sizeof v);
    return v;
  }
};

// A packet checked: magic, version, a known type, body sizes that match exactly. The reason
// for a refusal is a one-line error.
struct Parsed {
  std::optional<Message> msg;
  std::string error;
};
Parsed parse(std::span<const uint8_t> packet);

std::vector<uint8_t> encode(Type t, uint32_t seq, std::span<const uint8_t> body, std::span<const uint8_t> tail = {});
template <class T>
std::vector<uint8_t> encode(Type t, uint32_t seq, const T& body, std::span<const uint8_t> tail = {}) {
  return encode(t, seq, {reinterpret_cast<const uint8_t*>(&body), sizeof body}, tail);
}
inline std::vector<uint8_t> encode(Type t, uint32_t seq) { return encode(t, seq, std::span<const uint8_t>{}); }

// Copies `s` into a fixed, NUL-terminated field, cut to fit.
void put_text(char* field, size_t size, const std::string& s);
std::string get_text(const char* field, size_t size);

}  // namespace rb::vrdma::proto
