#pragma once
// The part of a launcher hub that does not care how frames travel: frames queued for the wire,
// frames that arrived filed by (source rank, tag), and the Channel each (peer, tag pair) gets. One
// thread of the hub moves frames between the two; links only wait on their inbox, so every wait
// keeps the Channel contract (bounded, stoppable, pollable).
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bootstrap/channel.hh"

namespace rb::bootstrap {

using Frame = std::vector<uint8_t>;  // kind byte, then the payload

// Frames that arrived from one (source, tag), with an eventfd that is readable while any wait.
struct Inbox {
  Inbox();
  ~Inbox();
  Inbox(const Inbox&) = delete;
  Inbox& operator=(const Inbox&) = delete;
  void push(Frame f);
  std::mutex m;
  std::condition_variable cv;
  std::deque<Frame> frames;
  int efd = -1;
};

struct Outgoing {
  int peer = 0, tag = 0;
  Frame data;
};

class Mailroom {
 public:
  Mailroom(int rank, std::vector<std::string> hosts, std::vector<std::string> ips)
      : rank_(rank), hosts_(std::move(hosts)), ips_(std::move(ips)) {}

  int rank() const { return rank_; }
  int size() const { return int(hosts_.size()); }
  const std::string& host_of(int r) const { return hosts_[size_t(r)]; }
  const std::string& ip_of(int r) const { return ips_[size_t(r)]; }

  std::shared_ptr<Inbox> inbox(int src, int tag);
  // Fails once the wire failed, or its way to `peer` did: later sends report the first failure.
  Status queue(int peer, int tag, Frame f);
  void fail(const std::string& why);
  void fail_peer(int peer, const std::string& why);

  // The wire's side: what was queued, waiting up to `nap` when nothing was; empty and
  // stopping() once stop() was called.
  std::deque<Outgoing> take_queued(std::chrono::microseconds nap);
  bool stopping();
  void stop();

 private:
  int rank_;
  std::vector<std::string> hosts_, ips_;
  std::mutex m_;
  std::condition_variable cv_;  // new sends, or stop
  std::deque<Outgoing> queued_;
  std::map<std::pair<int, int>, std::shared_ptr<Inbox>> inboxes_;
  bool stop_ = false;
  std::string failed_;
  std::map<int, std::string> peer_failed_;
};

// A channel to `peer` through the mailroom.
Channel mail_link(std::shared_ptr<Mailroom> room, int peer, int send_tag, int recv_tag);

}  // namespace rb::bootstrap
