#pragma once
// The tcp transport's frames. Every frame is a fixed header, followed by `len` payload bytes for
// WRITE, SEND and READ_RESP. Requests travel on the initiator's outgoing connection and their
// answers (READ_RESP, ACK, ERR) come back on the same connection, in order.
#include <cstdint>

namespace rb::transport::tcp {

enum class Frame : uint8_t { write = 1, read_req = 2, read_resp = 3, send = 4, ack = 5, err = 6 };

namespace frame_flag {
constexpr uint8_t ack = 1;  // the initiator wants an ACK once the write is applied (delivery complete)
}

struct Header {
  Frame type;
  uint8_t flags;
  uint16_t reserved;
  uint32_t len;
  uint64_t offset;  // write/read: offset in the target region
  uint64_t key;     // write/read: the target region's key
  uint64_t wr_id;   // echoed in READ_RESP, ACK and ERR
};
static_assert(sizeof(Header) == 32);

constexpr int kErrBadKey = 1;
constexpr int kErrOutOfBounds = 2;
constexpr int kErrTruncated = 3;

}  // namespace rb::transport::tcp
