#pragma once
// Non-blocking framed I/O on one socket. FrameWriter queues frames (header + payload pointer)
// and writes them with writev, many per system call; FrameReader pulls bytes into a staging
// buffer and hands out headers and payload bytes, or receives a large payload straight into its
// destination. Neither allocates after construction.
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/ring_slots.hh"
#include "transport/tcp/wire.hh"

namespace rb::transport::tcp {

struct OutFrame {
  Header hdr;
  Extension ext;           // only its first extension_bytes(hdr) go on the wire
  const uint8_t* payload;  // null when the frame has none
  uint32_t payload_len;
  bool notify;             // report when fully sent (FrameWriter::flush's `sent` list)
  // The header and its extension, contiguous: what goes on the wire before the payload.
  const uint8_t* head() const { return reinterpret_cast<const uint8_t*>(this); }
};
static_assert(offsetof(OutFrame, hdr) == 0 && offsetof(OutFrame, ext) == sizeof(Header));

class FrameWriter {
 public:
  explicit FrameWriter(uint32_t capacity);
  void set_fd(int fd) { fd_ = fd; }
  bool full() const { return tail_ - head_ >= q_.capacity(); }
  bool empty() const { return tail_ == head_; }
  size_t queued() const { return tail_ - head_; }
  // False when full (the frame is not queued).
  bool push(const OutFrame& f) {
    if (full()) return false;
    q_[tail_++] = f;
    return true;
  }
  // Writes what the socket takes; appends the wr_id of every fully sent frame marked `notify`
  // to `sent`. Returns false on a socket error (errno set).
  bool flush(std::vector<OutFrame>& sent);

 private:
  int fd_ = -1;
  RingSlots<OutFrame> q_;
  uint64_t head_ = 0, tail_ = 0;
  size_t done_in_head_ = 0;  // bytes of the head frame already written
  std::vector<iovec> iov_;
  std::vector<uint8_t> scratch_;  // small frames packed for one send
};

class FrameReader {
 public:
  explicit FrameReader(size_t staging);
  void set_fd(int fd) { fd_ = fd; }
  // Result of a read attempt: bytes now available, 0 = would block, -1 = closed or error.
  long fill();
  size_t available() const { return tail_ - head_; }
  const uint8_t* peek() const { return buf_.data() + head_; }
  void consume(size_t n) { head_ += n; }
  // Receives up to n payload bytes into dst: first from staging, then straight from the
  // socket. Returns bytes delivered (0 = would block), -1 on close or error.
  long read_into(uint8_t* dst, size_t n);
  // True when a recv since new_poll() got less than it asked for: the socket had nothing more
  // queued, so asking again at once would most likely be a syscall for nothing (on a ping-pong's
  // critical path).
  bool drained() const { return drained_; }
  void new_poll() { drained_ = false; }

 private:
  int fd_ = -1;
  std::vector<uint8_t> buf_;
  size_t head_ = 0, tail_ = 0;
  bool drained_ = false;
};

}  // namespace rb::transport::tcp
