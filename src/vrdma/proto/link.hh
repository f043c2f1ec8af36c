#pragma once
// Router-to-router messages, over the routers' libfabric endpoints (--listen, --fabric). A QP
// whose peer is on another host is on the router path at both ends: the initiator's router moves
// WRITE and READ itself as one RMA into or out of the target router's registration of the region
// (after asking once per key what it may reach), and sends everything the target must act on
// (SEND, immediates, atomics, inline WRITEs) as an `op` the target's router carries out in order
// and answers. Routers trust each other (one administrator); what a client put in its rings is
// checked by its own router before anything leaves. Plain data with fixed sizes, parsed with
// bounds checks only, like the client protocol.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "vrdma/proto/control.hh"
#include "vrdma/proto/qp_layout.hh"

namespace rb::vrdma::proto {

constexpr uint32_t kLinkMagic = 0x4b4c5256;  // "VRLK"
constexpr uint16_t kLinkVersion = 5;  // 2: every message ends in a trailer (router/link_auth.hh); 3: 8 pieces an op; 4: datagrams; 5: conn_proof
constexpr uint32_t kLinkInline = 4096;         // payload an op carries itself; larger ones are pulled
constexpr size_t kLinkMessage = 512 + kLinkInline;  // the largest link message

enum class LinkType : uint16_t {
  connect = 1,    // LinkConnect: may my QP talk to yours? reply connect_reply (LinkStatus)
  connect_reply,
  key_ask,        // LinkKeyAsk: what does this rkey of your QP's PD reach? reply key_reply
  key_reply,      // LinkKey
  op,             // LinkOp (+ inline payload): carry it out on your QP; reply op_reply
  op_reply,       // LinkOpReply
  revoke,         // LinkRevoke: a region was deregistered, forget its key
  qp_gone,        // LinkQpGone: the QP is destroyed (or its owner died); yours is broken
  hello,          // LinkHello: a --peer link formed before the first QP needs it; reply hello_reply
  hello_reply,
  datagram,       // LinkDatagram (+ the message): for a datagram QP of yours; no reply
  conn_proof,     // LinkConnProof: these connections to your --listen port are mine; no reply
};

std::string to_string(const RouterAddress& a);
// "HOST:PORT" or "[V6]:PORT" with a numeric host; nullopt and a reason otherwise.
std::optional<RouterAddress> parse_router_address(const std::string& s, std::string* why);

// A network routers may be in: "10.1.0.0/16", "fd00::/8" or one address ("10.1.0.7" is /32). An
// IPv4 network is kept as its IPv4-mapped IPv6 form, as addresses are.
struct RouterNetwork {
  uint8_t ip[16] = {};
  int prefix = 128;
  bool contains(const RouterAddress& a) const;
};
std::string to_string(const RouterNetwork& n);
// nullopt and a reason naming the text and the form it should have.
std::optional<RouterNetwork> parse_router_network(const std::string& s, std::string* why);

struct LinkHeader {
  uint32_t magic = kLinkMagic;
  uint16_t version = kLinkVersion;
  uint16_t type = 0;
  uint64_t from_router = 0;  // the sender's router id
  RouterAddress from;        // and where it listens (the way back)
  uint32_t pad0 = 0;
  uint64_t req = 0;          // a request's number; its reply carries it back
  uint32_t body = 0;         // bytes after the header
  uint32_t pad = 0;
};

struct LinkConnect {
  uint32_t from_qp = 0, to_qp = 0;
  char tenant[kNameBytes] = {};  // the initiator's tenant: a QP connects only within its tenant
};
struct LinkStatus {
  int32_t err = 0;  // an errno; 0: yes
  char message[120] = {};
};
struct LinkKeyAsk {
  uint32_t from_qp = 0, to_qp = 0, rkey = 0, pad = 0;
};
struct LinkKey {
  int32_t err = 0;      // nonzero: the key names no region of the QP's PD
  uint32_t access = 0;  // proto::Access
  uint64_t va = 0, len = 0;  // the owner's view of the region
  uint64_t fabric_key = 0, fabric_base = 0;  // RMA at fabric_base + (addr - va) with this key
};
// A piece of the initiator's memory the target pulls with a READ.
struct LinkPiece {
  uint64_t addr = 0, key = 0;
  uint32_t len = 0, pad = 0;
};
struct LinkOp {
  uint32_t from_qp = 0, to_qp = 0;
  uint8_t opcode = 0;  // vrdma_wr_opcode
  uint8_t npieces = 0; // 0: the payload follows inline (len bytes)
  // The sender QP's error epoch (RemoteQp::epoch), never 0 for a QP that enters the error state
  // on a failure. The target fails at once, undelivered, the ops behind a failed one of the same
  // epoch: they were sent before the sender knew of the failure, and verbs flushes them.
  uint16_t epoch = 0;
  uint32_t imm = 0;
  uint64_t remote_addr = 0;
  uint32_t rkey = 0, len = 0;
  uint64_t compare_add = 0, swap = 0;
  LinkPiece pieces[kMaxSge];
};
// An op's answer when its target QP is not (or no longer) connected to the sender: the sender's
// router treats it as a peer that has gone (vrdma_set_peer_timeout).
constexpr int32_t kNoSuchQp = -1;
struct LinkOpReply {
  int32_t status = 0;    // vrdma_wc_status, or kNoSuchQp
  uint32_t byte_len = 0;
  uint64_t old = 0;      // atomics: the value found
};
struct LinkRevoke {
  uint32_t rkey = 0, pad = 0;
};
struct LinkHello {
  uint64_t pad = 0;
};
// The ends (address, port) of the TCP connections the sender made to the recipient's --listen
// port: its link guard keeps those and shuts what no router vouched for (router/link_guard.hh).
struct LinkConnProof {
  static constexpr uint32_t kMaxEnds = 16;
  uint32_t count = 0, pad = 0;
  RouterAddress ends[kMaxEnds];
};
struct LinkQpGone {
  uint32_t qp = 0, peer_qp = 0;
};
// A datagram QP's SEND to a datagram QP of another host: delivered there as one of that host's
// would be (same tenant, that Q_Key, a receive posted) or dropped.
struct LinkDatagram {
  uint32_t from_qp = 0, to_qp = 0, qkey = 0, imm = 0;
  uint8_t opcode = 0;  // VRDMA_WR_SEND or VRDMA_WR_SEND_WITH_IMM
  uint8_t pad[3] = {};
  uint32_t len = 0;    // the message that follows, at most kLinkInline
  char tenant[kNameBytes] = {};  // the sender's tenant
};

// Explicit padding only: the layouts are the wire (tests/fuzz/make_seeds.py writes them too).
static_assert(sizeof(LinkHeader) == 56 && sizeof(LinkOp) == 48 + 24 * kMaxSge && sizeof(LinkKey) == 40 &&
              sizeof(LinkDatagram) == 24 + kNameBytes);

std::optional<size_t> link_body_size(LinkType t);

struct LinkMessage {
  LinkHeader h;
  std::span<const uint8_t> body, tail;  // tail: an op's inline payload
  LinkType type() const { return LinkType(h.type); }
  template <class T>
  T as() const {
    T v;
    std::memcpy(&v, body.data(), sizeof v);
    return v;
  }
};
std::optional<LinkMessage> parse_link(std::span<const uint8_t> packet, std::string* why);
// Header and body (and tail) into `out`, which is cleared first.
void encode_link(std::vector<uint8_t>& out, const LinkHeader& h, LinkType t, std::span<const uint8_t> body,
                 std::span<const uint8_t> tail = {});
template <class T>
void encode_link(std::vector<uint8_t>& out, const LinkHeader& h, LinkType t, const T& body,
                 std::span<const uint8_t> tail = {}) {
  encode_link(out, h, t, {reinterpret_cast<const uint8_t*>(&body), sizeof body}, tail);
}

}  // namespace rb::vrdma::proto
