#pragma once
// Out-of-band rendezvous over TCP: control messages as JSON frames and bulk data (coverage maps)
// as binary frames. Every receive takes a timeout and a stop flag, so a dead peer or a Ctrl-C
// ends a wait within a bounded time.
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.hh"

namespace rb::bootstrap {

struct HostPort {
  std::string host;
  uint16_t port = 0;
};
// "127.0.0.1:7471", "[::1]:7471", "node1:7471"; a bare host gets `default_port`.
Result<HostPort> parse_host_port(const std::string& text, uint16_t default_port, const char* flag);

class Channel {
 public:
  Channel() = default;
  explicit Channel(int fd) : fd_(fd) {}
  Channel(Channel&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Channel& operator=(Channel&& o) noexcept;
  ~Channel();

  static Result<Channel> connect(const HostPort& hp, double timeout_s);

  Status send_json(const nlohmann::json& j);
  Status send_bytes(const std::vector<uint8_t>& data);
  // Waits up to timeout_s (<= 0: forever) for a frame, waking every 100 ms to look at `stop`.
  Result<nlohmann::json> recv_json(double timeout_s, const std::atomic<bool>* stop = nullptr);
  Result<std::vector<uint8_t>> recv_bytes(double timeout_s, const std::atomic<bool>* stop = nullptr);
  // True when a frame (or EOF) is waiting, without blocking.
  bool readable() const;
  std::string local_ip() const;
  std::string peer() const;
  int fd() const { return fd_; }

 private:
  Result<std::vector<uint8_t>> recv_frame(char kind, double timeout_s, const std::atomic<bool>* stop);
  Status send_frame(char kind, const void* data, size_t len);
  int fd_ = -1;
};

class Listener {
 public:
  Listener() = default;
  Listener(Listener&& o) noexcept : fd_(o.fd_), port_(o.port_) { o.fd_ = -1; }
  ~Listener();
  static Result<Listener> listen(const HostPort& hp);
  uint16_t port() const { return port_; }
  int fd() const { return fd_; }
  // Waits for a client; returns Errc::interrupted when `stop` is set.
  Result<Channel> accept(const std::atomic<bool>* stop);

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

}  // namespace rb::bootstrap
