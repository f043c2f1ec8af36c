#pragma once
// One side's view of the control conversation: typed messages over a Channel, each wait bounded
// by the run's --timeout. Silence is what the timeout measures: any frame from the peer, an Alive
// included, shows it is still there, so a peer busy for longer than the timeout stays in the run
// as long as it says so, while a stopped, hung or silent one is dropped within the timeout.
#include <atomic>
#include <chrono>
#include <optional>
#include <string>

#include "bootstrap/channel.hh"
#include "protocol/messages.hh"

namespace rb::protocol {

class Peer {
 public:
  Peer() = default;
  // `who` names the peer in messages: "server", "client".
  Peer(bootstrap::Channel ch, std::string who, double timeout_s);

  void set_timeout(double timeout_s) { timeout_s_ = timeout_s; }
  double timeout() const { return timeout_s_; }

  Status send(const Message& m);
  Status send_bytes(const std::vector<uint8_t>& data);
  // Sends Alive if nothing was sent for a while; cheap to call from a polling loop.
  Status keep_alive();

  // The next message other than Alive. Fails once the peer has been silent for the timeout, on
  // `stop`, or when the connection breaks. An Error from the peer is returned as a message.
  Result<Message> receive(const std::atomic<bool>* stop);
  // The same without blocking: nothing when no frame waits or the frame was an Alive.
  Result<std::optional<Message>> poll();
  // For loops built on poll(): an error once the peer has been silent for the timeout since the
  // last frame heard or message sent.
  Status check_silence() const;
  // A binary frame of at most max_len bytes.
  Result<std::vector<uint8_t>> receive_bytes(uint64_t max_len, const std::atomic<bool>* stop);

  // Waits for an M. The peer's Error becomes a Status saying it came from the peer; any other
  // message is a protocol error naming what was due and what came.
  template <class M>
  Result<M> expect(const std::atomic<bool>* stop) {
    auto m = receive(stop);
    if (!m) return m.status();
    if (auto* v = std::get_if<M>(&m.value())) return std::move(*v);
    return unexpected(m.value(), M::kType);
  }
  // A message that is not the one due, as a Status.
  Status unexpected(const Message& got, const char* due) const;

  const std::string& who() const { return who_; }
  std::string address() const { return ch_.peer(); }
  std::string local_ip() const { return ch_.local_ip(); }
  int fd() const { return ch_.fd(); }

 private:
  using Clock = std::chrono::steady_clock;
  Status silence_error() const;
  Status reason_left_or(const Status& failed);
  bootstrap::Channel ch_;
  std::string who_;
  double timeout_s_ = 10;
  Clock::time_point quiet_since_{};  // last frame heard, message sent or wait begun
  Clock::time_point last_sent_{};
};

// The interval at which a side that is busy but alive sends Alive, for a peer with this timeout.
double alive_interval_s(double timeout_s);

}  // namespace rb::protocol
