#include "bootstrap/mailroom.hh"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cstring>

#include <fmt/format.h>

namespace rb::bootstrap {

using Clock = std::chrono::steady_clock;

Inbox::Inbox() : efd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}
Inbox::~Inbox() {
  if (efd >= 0) close(efd);
}

void Inbox::push(Frame f) {
  std::lock_guard<std::mutex> g(m);
  frames.push_back(std::move(f));
  uint64_t one = 1;
  (void)!write(efd, &one, sizeof one);
  cv.notify_all();
}

std::shared_ptr<Inbox> Mailroom::inbox(int src, int tag) {
  std::lock_guard<std::mutex> g(m_);
  auto& p = inboxes_[{src, tag}];
  if (!p) p = std::make_shared<Inbox>();
  return p;
}

Status Mailroom::queue(int peer, int tag, Frame f) {
  std::lock_guard<std::mutex> g(m_);
  if (!failed_.empty()) return {Errc::io, failed_};
  if (auto it = peer_failed_.find(peer); it != peer_failed_.end()) return {Errc::io, it->second};
  queued_.push_back({peer, tag, std::move(f)});
  cv_.notify_all();
  return {};
}

void Mailroom::fail(const std::string& why) {
  std::lock_guard<std::mutex> g(m_);
  if (failed_.empty()) failed_ = why;
}

void Mailroom::fail_peer(int peer, const std::string& why) {
  std::lock_guard<std::mutex> g(m_);
  peer_failed_.emplace(peer, why);
}

std::deque<Outgoing> Mailroom::take_queued(std::chrono::microseconds nap) {
  std::unique_lock<std::mutex> g(m_);
  if (queued_.empty() && !stop_) cv_.wait_for(g, nap);
  std::deque<Outgoing> out;
  out.swap(queued_);
  return out;
}

bool Mailroom::stopping() {
  std::lock_guard<std::mutex> g(m_);
  return stop_;
}

void Mailroom::stop() {
  std::lock_guard<std::mutex> g(m_);
  stop_ = true;
  cv_.notify_all();
}

namespace {

class MailLink final : public FrameLink {
 public:
  MailLink(std::shared_ptr<Mailroom> room, int peer, int send_tag, int recv_tag)
      : room_(std::move(room)), peer_(peer), send_tag_(send_tag), in_(room_->inbox(peer, recv_tag)) {}

  Status send_frame(char kind, const void* data, size_t len) override {
    Frame f(len + 1);
    f[0] = uint8_t(kind);
    if (len) std::memcpy(f.data() + 1, data, len);
    return room_->queue(peer_, send_tag_, std::move(f));
  }

  Result<std::vector<uint8_t>> recv_frame(char kind, uint64_t max_len, double timeout_s,
                                          const std::atomic<bool>* stop) override {
    auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
    std::unique_lock<std::mutex> g(in_->m);
    while (in_->frames.empty()) {
      if (stop && stop->load()) return Status(Errc::interrupted, "interrupted");
      if (Clock::now() > deadline)
        return Status(Errc::timeout, fmt::format("the peer at {} sent nothing for {:g} s (--timeout)", peer(), timeout_s));
      in_->cv.wait_for(g, std::chrono::milliseconds(100));
    }
    Frame f = std::move(in_->frames.front());
    in_->frames.pop_front();
    if (in_->frames.empty()) {
      uint64_t v;
      (void)!read(in_->efd, &v, sizeof v);
    }
    g.unlock();
    if (f.empty() || char(f[0]) != kind)
      return Status(Errc::io, fmt::format("control protocol error from {}: a frame of another kind where '{}' was due",
                                          peer(), kind));
    if (f.size() - 1 > max_len)
      return Status(Errc::io, fmt::format("control protocol error from {}: a frame of {} B, over the {} B such a frame "
                                          "can be", peer(), f.size() - 1, max_len));
    return std::vector<uint8_t>(f.begin() + 1, f.end());
  }

  bool readable() const override {
    std::lock_guard<std::mutex> g(in_->m);
    return !in_->frames.empty();
  }
  int wait_fd() const override { return in_->efd; }
  std::string local_ip() const override { return room_->ip_of(room_->rank()); }
  std::string peer() const override { return fmt::format("rank {} ({})", peer_, room_->host_of(peer_)); }

 private:
  std::shared_ptr<Mailroom> room_;
  int peer_, send_tag_;
  std::shared_ptr<Inbox> in_;
};

}  // namespace

Channel mail_link(std::shared_ptr<Mailroom> room, int peer, int send_tag, int recv_tag) {
  return Channel(std::make_unique<MailLink>(std::move(room), peer, send_tag, recv_tag));
}

}  // namespace rb::bootstrap
