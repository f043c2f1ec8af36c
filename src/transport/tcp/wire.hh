#pragma once
// The tcp transport's frames. Every frame is a fixed 32-byte header, then an extension for the
// frames that need one (extension_bytes), then `len` payload bytes for WRITE, SEND and
// READ_RESP. Requests travel on the initiator's outgoing connection and their answers
// (READ_RESP, ATOMIC_RESP, ACK, ERR) come back on the same connection, in order.
//
// The extension exists so that the frames every bench op uses (write, read, send and their
// answers) stay 32 bytes, as they were before atomics and immediates: their per-frame cost, and
// every number measured with them, is unchanged, and a peer built before the extension still
// speaks them. Only fadd/cswap requests (16 bytes: value and compare) and frames flagged imm
// (8 bytes: the immediate) are longer.
#include <cstddef>
#include <cstdint>

namespace rb::transport::tcp {

enum class Frame : uint8_t {
  write = 1,
  read_req = 2,
  read_resp = 3,
  send = 4,
  ack = 5,
  err = 6,
  fadd_req = 7,     // extension: value = the addend
  cswap_req = 8,    // extension: value = what to store on a match, compare = what must be there
  atomic_resp = 9,  // offset = the value the target held before the atomic
};

namespace frame_flag {
constexpr uint8_t ack = 1;  // the initiator wants an ACK once the write is applied (delivery complete)
constexpr uint8_t imm = 2;  // write or send with immediate data: an extension carries it in `value`
}  // namespace frame_flag

struct Header {
  Frame type;
  uint8_t flags;
  uint16_t reserved;  // ERR: the type of the request it answers
  uint32_t len;
  uint64_t offset;  // write/read/atomics: offset in the target region; ATOMIC_RESP: the old value
  uint64_t key;     // write/read/atomics: the target region's key
  uint64_t wr_id;   // echoed in READ_RESP, ATOMIC_RESP, ACK and ERR
};
static_assert(sizeof(Header) == 32);

struct Extension {
  uint64_t value = 0;    // fadd: the addend; cswap: the new value; imm frames: the immediate (low 32 bits)
  uint64_t compare = 0;  // cswap: the value the target must hold
};
static_assert(sizeof(Extension) == 16);

// How many bytes of Extension follow this header on the wire (a prefix of the struct).
constexpr size_t extension_bytes(const Header& h) {
  if (h.type == Frame::fadd_req || h.type == Frame::cswap_req) return sizeof(Extension);
  if ((h.type == Frame::write || h.type == Frame::send) && (h.flags & frame_flag::imm)) return sizeof(uint64_t);
  return 0;
}
constexpr size_t head_bytes(const Header& h) { return sizeof(Header) + extension_bytes(h); }

constexpr int kErrBadKey = 1;
constexpr int kErrOutOfBounds = 2;
constexpr int kErrTruncated = 3;
constexpr int kErrMisaligned = 4;  // an atomic on an address that is not 8-byte aligned

}  // namespace rb::transport::tcp
