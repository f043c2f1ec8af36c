#include "transport/tcp/frame_io.hh"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace rb::transport::tcp {

namespace {
constexpr size_t kMaxIov = 64;
constexpr size_t kDirectRead = 16 << 10;  // payloads at least this large skip the staging copy
constexpr size_t kPackMax = 1024;         // frames up to this size are packed into one buffer
}  // namespace

FrameWriter::FrameWriter(uint32_t capacity) : q_(capacity) {
  iov_.reserve(kMaxIov);
  scratch_.resize(32 << 10);
}

bool FrameWriter::flush(std::vector<OutFrame>& sent) {
  while (head_ != tail_) {
    iov_.clear();
    size_t skip = done_in_head_;
    // Small frames are copied into one contiguous buffer: one iovec per send is measurably
    // cheaper for the kernel than two per frame. Byte accounting below does not care which.
    size_t packed = 0;
    for (uint64_t i = head_; !skip && i != tail_; ++i) {
      const OutFrame& f = q_[i];
      size_t hl = head_bytes(f.hdr);
      size_t len = hl + (f.payload ? f.payload_len : 0);
      if (len > kPackMax || packed + len > scratch_.size()) break;
      std::memcpy(scratch_.data() + packed, f.head(), hl);
      if (f.payload && f.payload_len) std::memcpy(scratch_.data() + packed + hl, f.payload, f.payload_len);
      packed += len;
    }
    if (packed) iov_.push_back({scratch_.data(), packed});
    for (uint64_t i = head_; !packed && i != tail_ && iov_.size() + 2 <= kMaxIov; ++i) {
      OutFrame& f = q_[i];
      size_t hl = head_bytes(f.hdr);
      if (skip < hl) iov_.push_back({const_cast<uint8_t*>(f.head()) + skip, hl - skip});
      size_t pskip = skip > hl ? skip - hl : 0;
      if (f.payload && f.payload_len > pskip)
        iov_.push_back({const_cast<uint8_t*>(f.payload) + pskip, f.payload_len - pskip});
      skip = 0;
    }
    msghdr m{};
    m.msg_iov = iov_.data();
    m.msg_iovlen = iov_.size();
    ssize_t w = sendmsg(fd_, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    size_t left = size_t(w);
    while (left && head_ != tail_) {
      OutFrame& f = q_[head_];
      size_t total = head_bytes(f.hdr) + (f.payload ? f.payload_len : 0);
      size_t need = total - done_in_head_;
      if (left >= need) {
        left -= need;
        done_in_head_ = 0;
        if (f.notify) sent.push_back(f);
        ++head_;
      } else {
        done_in_head_ += left;
        left = 0;
      }
    }
    if (head_ != tail_ && done_in_head_) return true;  // the socket is full; come back later
  }
  return true;
}

FrameReader::FrameReader(size_t staging) : buf_(staging) {}

long FrameReader::fill() {
  if (head_ == tail_) head_ = tail_ = 0;
  if (tail_ == buf_.size()) {
    // Slide the unread bytes to the front to make room.
    std::memmove(buf_.data(), buf_.data() + head_, tail_ - head_);
    tail_ -= head_;
    head_ = 0;
  }
  size_t room = buf_.size() - tail_;
  ssize_t r = recv(fd_, buf_.data() + tail_, room, MSG_DONTWAIT);
  drained_ = r < ssize_t(room);
  if (r == 0) return -1;
  if (r < 0) return (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) ? 0 : -1;
  tail_ += size_t(r);
  return long(available());
}

long FrameReader::read_into(uint8_t* dst, size_t n) {
  size_t got = 0;
  size_t avail = available();
  if (avail) {
    got = std::min(avail, n);
    std::memcpy(dst, buf_.data() + head_, got);
    head_ += got;
    if (got == n) return long(got);
  }
  size_t want = n - got;
  if (want >= kDirectRead) {
    ssize_t r = recv(fd_, dst + got, want, MSG_DONTWAIT);
    drained_ = r < ssize_t(want);
    if (r == 0) return -1;
    if (r < 0) return (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) ? long(got) : -1;
    return long(got + size_t(r));
  }
  if (got) return long(got);
  long f = fill();
  if (f <= 0) return f;
  size_t take = std::min(available(), want);
  std::memcpy(dst, buf_.data() + head_, take);
  head_ += take;
  return long(take);
}

}  // namespace rb::transport::tcp
