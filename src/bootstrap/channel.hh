#pragma once
// Out-of-band rendezvous over TCP: frames of a kind byte and a 32-bit length. The messages inside
// them belong to src/protocol. Every receive takes a size cap, a timeout and a stop flag, so
// neither a dead peer, nor a Ctrl-C, nor a header claiming gigabytes can hold or bloat a process.
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.hh"

namespace rb::bootstrap {

// The largest frame body any channel carries. The protocol's largest message, a PairRecord (a
// phase's JSON line with its latency histogram), is tens of KiB; anything claiming more is not a
// peer of ours.
constexpr uint32_t kMaxFrameBytes = 1024 * 1024;

struct HostPort {
  std::string host;
  uint16_t port = 0;
};
// "127.0.0.1:7471", "[::1]:7471", "node1:7471"; a bare host gets `default_port`.
Result<HostPort> parse_host_port(const std::string& text, uint16_t default_port, const char* flag);
// The inverse: "127.0.0.1:7471", "[::1]:7471" (an IPv6 host in brackets, so the text parses back).
std::string host_port_text(const HostPort& hp);

// A channel that is not a TCP socket: messages through the launcher (MPI) in cluster mode. Its
// frames keep the TCP channel's contract: bounded waits, size caps, the same kinds.
class FrameLink {
 public:
  virtual ~FrameLink() = default;
  virtual Status send_frame(char kind, const void* data, size_t len) = 0;
  virtual Result<std::vector<uint8_t>> recv_frame(char kind, uint64_t max_len, double timeout_s,
                                                  const std::atomic<bool>* stop) = 0;
  virtual bool readable() const = 0;
  // Readable (POLLIN) while a frame waits, for loops that poll(2) on the channel.
  virtual int wait_fd() const = 0;
  virtual std::string local_ip() const = 0;
  virtual std::string peer() const = 0;
};

class Channel {
 public:
  Channel() = default;
  explicit Channel(int fd) : fd_(fd) {}
  explicit Channel(std::unique_ptr<FrameLink> link) : link_(std::move(link)) {}
  Channel(Channel&& o) noexcept : fd_(o.fd_), link_(std::move(o.link_)) { o.fd_ = -1; }
  Channel& operator=(Channel&& o) noexcept;
  ~Channel();

  static Result<Channel> connect(const HostPort& hp, double timeout_s);

  Status send_frame(char kind, const void* data, size_t len);
  // Waits up to timeout_s for a whole frame of `kind`, waking every 100 ms to look at `stop`. A
  // frame of another kind, or one longer than max_len, is a protocol error found from its header,
  // before anything is allocated for it.
  Result<std::vector<uint8_t>> recv_frame(char kind, uint64_t max_len, double timeout_s,
                                          const std::atomic<bool>* stop = nullptr);
  // True when a frame (or EOF) is waiting, without blocking.
  bool readable() const;
  std::string local_ip() const;
  std::string peer() const;
  // The descriptor to poll(2) for a waiting frame; for a socket, the socket.
  int fd() const { return link_ ? link_->wait_fd() : fd_; }
  bool is_open() const { return fd_ >= 0 || link_ != nullptr; }

 private:
  int fd_ = -1;
  std::unique_ptr<FrameLink> link_;
};

class Listener {
 public:
  Listener() = default;
  Listener(Listener&& o) noexcept : fd_(o.fd_), port_(o.port_) { o.fd_ = -1; }
  ~Listener();
  static Result<Listener> listen(const HostPort& hp);
  uint16_t port() const { return port_; }
  int fd() const { return fd_; }
  // Waits up to wait_s for a client; returns an empty Channel (fd -1) when none came.
  Result<Channel> accept(double wait_s);

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

}  // namespace rb::bootstrap
