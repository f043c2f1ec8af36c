#include "protocol/peer.hh"

#include <poll.h>

#include <algorithm>

#include <fmt/format.h>

namespace rb::protocol {
namespace {
constexpr char kJsonFrame = 'J', kBytesFrame = 'B';
}

double alive_interval_s(double timeout_s) { return std::clamp(timeout_s / 4, 0.05, 1.0); }

Peer::Peer(bootstrap::Channel ch, std::string who, double timeout_s)
    : ch_(std::move(ch)), who_(std::move(who)), timeout_s_(timeout_s), quiet_since_(Clock::now()), last_sent_(Clock::now()) {}

Status Peer::send(const Message& m) {
  std::string text = to_json(m).dump();
  Status s = ch_.send_frame(kJsonFrame, text.data(), text.size());
  if (!std::holds_alternative<Alive>(m)) quiet_since_ = Clock::now();  // a reply is due from now on
  last_sent_ = Clock::now();
  return s ? s : reason_left_or(s);
}

Status Peer::send_bytes(const std::vector<uint8_t>& data) {
  last_sent_ = quiet_since_ = Clock::now();
  Status s = ch_.send_frame(kBytesFrame, data.data(), data.size());
  return s ? s : reason_left_or(s);
}

// A peer that fails sends its Error and closes. A send of ours that meets the closed connection
// (reset, since our last frames were still unread there) must not hide that reason: it has
// arrived before the reset and is still there to read.
Status Peer::reason_left_or(const Status& failed) {
  if (failed.code() != Errc::peer_gone) return failed;
  while (ch_.readable()) {
    auto m = poll();
    if (!m) break;
    if (m.value() && std::holds_alternative<Error>(*m.value())) return unexpected(*m.value(), Error::kType);
  }
  return failed;
}

Status Peer::keep_alive() {
  if (std::chrono::duration<double>(Clock::now() - last_sent_).count() < alive_interval_s(timeout_s_)) return {};
  return send(Alive{});
}

Status Peer::silence_error() const {
  return {Errc::timeout, fmt::format("the {} at {} sent nothing for {:g} s (--timeout): it is stopped, hung, or not "
                                     "an rdmabench {}", who_, ch_.peer(), timeout_s_, who_)};
}

Status Peer::check_silence() const {
  if (std::chrono::duration<double>(Clock::now() - quiet_since_).count() > timeout_s_) return silence_error();
  return {};
}

Result<std::optional<Message>> Peer::poll() {
  if (!ch_.readable()) return std::optional<Message>();
  auto frame = ch_.recv_frame(kJsonFrame, kMaxMessageBytes, timeout_s_);
  if (!frame) return frame.status();
  quiet_since_ = Clock::now();
  auto j = nlohmann::json::parse(frame->begin(), frame->end(), nullptr, false);
  if (j.is_discarded())
    return Status(Errc::io, fmt::format("control protocol error: the {} at {} sent a frame that is not JSON", who_, ch_.peer()));
  auto m = from_json(j);
  if (!m) return Status(m.status().code(), fmt::format("{} (from the {} at {})", m.status().message(), who_, ch_.peer()));
  if (std::holds_alternative<Alive>(m.value())) return std::optional<Message>();
  return std::optional<Message>(std::move(m.value()));
}

Result<Message> Peer::receive(const std::atomic<bool>* stop) {
  quiet_since_ = Clock::now();  // this wait gets the whole timeout
  while (true) {
    if (stop && stop->load()) return Status(Errc::interrupted, "interrupted");
    auto m = poll();
    if (!m) return m.status();
    if (m.value()) return std::move(*m.value());
    Status quiet = check_silence();
    if (!quiet) return quiet;
    pollfd pf{ch_.fd(), POLLIN, 0};
    ::poll(&pf, 1, 100);
  }
}

Result<std::vector<uint8_t>> Peer::receive_bytes(uint64_t max_len, const std::atomic<bool>* stop) {
  auto b = ch_.recv_frame(kBytesFrame, max_len, timeout_s_, stop);
  if (b) quiet_since_ = Clock::now();
  return b;
}

Status Peer::unexpected(const Message& got, const char* due) const {
  if (auto* e = std::get_if<Error>(&got)) {
    Status s = status_of(*e);
    return {s.code(), fmt::format("{}: {}", who_, s.message())};
  }
  return {Errc::io, fmt::format("control protocol error: the {} sent '{}' where '{}' was due", who_, type_name(got), due)};
}

}  // namespace rb::protocol
