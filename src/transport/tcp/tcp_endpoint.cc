#include "transport/tcp/tcp_endpoint.hh"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <deque>
#include <string>

#include <fmt/format.h>

namespace rb::transport::tcp {

uint64_t RegionTable::add(uint8_t* p, size_t len) {
  std::lock_guard g(mu_);
  uint64_t k = next_++;
  map_[k] = {p, len};
  return k;
}
void RegionTable::remove(uint64_t key) {
  std::lock_guard g(mu_);
  map_.erase(key);
}
bool RegionTable::find(uint64_t key, uint8_t** p, size_t* len) {
  std::lock_guard g(mu_);
  auto it = map_.find(key);
  if (it == map_.end()) return false;
  *p = it->second.first;
  *len = it->second.second;
  return true;
}

namespace {

constexpr size_t kStaging = 256 << 10;

void tune(int fd, const SocketOptions& so) {
  int one = so.nodelay ? 1 : 0;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (so.sndbuf) setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &so.sndbuf, sizeof so.sndbuf);
  if (so.rcvbuf) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &so.rcvbuf, sizeof so.rcvbuf);
}

struct PostedRecv {
  uint8_t* buf;
  uint32_t len;
  uint64_t wr_id;
};

struct PendingRead {  // our READ waiting for its data
  uint8_t* dst;
  uint32_t len;
  uint64_t wr_id;
  bool signal;
};

class TcpEp final : public Endpoint {
 public:
  TcpEp(std::shared_ptr<RegionTable> regions, SocketOptions so, uint32_t depth)
      : regions_(std::move(regions)), so_(so), out_(depth * 2 + 64), answers_(8192), out_reader_(kStaging),
        in_reader_(kStaging) {
    sent_.reserve(256);
    discard_.resize(64 << 10);
  }
  ~TcpEp() override {
    for (int fd : {listen_fd_, out_fd_, in_fd_})
      if (fd >= 0) close(fd);
  }

  Status listen_on(const std::string& ip) {
    sockaddr_storage ss{};
    socklen_t len = 0;
    if (!to_sockaddr(ip, 0, &ss, &len)) return {Errc::invalid_argument, fmt::format("tcp: bad local address {}", ip)};
    listen_fd_ = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (listen_fd_ < 0 || bind(listen_fd_, reinterpret_cast<sockaddr*>(&ss), len) != 0 || listen(listen_fd_, 4) != 0)
      return {Errc::io, fmt::format("tcp: cannot listen on {}: {}", ip, strerror(errno))};
    sockaddr_storage me{};
    socklen_t ml = sizeof me;
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&me), &ml);
    char buf[INET6_ADDRSTRLEN] = {};
    uint16_t port;
    if (me.ss_family == AF_INET6) {
      inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6&>(me).sin6_addr, buf, sizeof buf);
      port = ntohs(reinterpret_cast<sockaddr_in6&>(me).sin6_port);
    } else {
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in&>(me).sin_addr, buf, sizeof buf);
      port = ntohs(reinterpret_cast<sockaddr_in&>(me).sin_port);
    }
    addr_ = fmt::format("{} {}", buf, port);
    return {};
  }

  std::vector<uint8_t> address() const override { return {addr_.begin(), addr_.end()}; }

  Status connect(std::span<const uint8_t> peer) override {
    std::string s(peer.begin(), peer.end());
    auto sp = s.find(' ');
    sockaddr_storage ss{};
    socklen_t len = 0;
    if (sp == std::string::npos || !to_sockaddr(s.substr(0, sp), uint16_t(std::stoi(s.substr(sp + 1))), &ss, &len))
      return {Errc::io, "tcp: malformed peer address"};
    out_fd_ = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    tune(out_fd_, so_);
    if (::connect(out_fd_, reinterpret_cast<sockaddr*>(&ss), len) != 0 && errno != EINPROGRESS)
      return {Errc::peer_gone, fmt::format("tcp: connect to {}: {}", s, strerror(errno))};
    // The peer's listener exists before its address is handed out, so the backlog completes this.
    pollfd p{out_fd_, POLLOUT, 0};
    int err = 0;
    socklen_t el = sizeof err;
    if (::poll(&p, 1, 5000) <= 0 || (getsockopt(out_fd_, SOL_SOCKET, SO_ERROR, &err, &el), err))
      return {Errc::peer_gone, fmt::format("tcp: connect to {}: {}", s, err ? strerror(err) : "timed out")};
    out_.set_fd(out_fd_);
    out_reader_.set_fd(out_fd_);
    return {};
  }

  Status set_remote(const RemoteRegion& r) override {
    remote_key_ = r.key;
    return {};
  }

  int post(std::span<const WorkRequest> wrs) override {
    int n = 0;
    for (const auto& w : wrs) {
      uint8_t* local = static_cast<uint8_t*>(w.mr->addr()) + w.local_off;
      if (w.op == Op::recv) {
        recvs_.push_back({local, w.len, w.wr_id});
        ++n;
        continue;
      }
      if (out_.full() || (w.op == Op::read && reads_.size() >= 8192)) break;
      bool sig = w.flags & wr_flag::signal;
      Header h{};
      h.len = w.len;
      h.offset = w.remote_off;
      h.key = remote_key_;
      h.wr_id = w.wr_id;
      if (w.op == Op::read) {
        h.type = Frame::read_req;
        out_.push({h, nullptr, 0, false});
        reads_.push_back({local, w.len, w.wr_id, sig});
      } else {
        bool ack = w.op == Op::write && (w.flags & wr_flag::delivery);
        h.type = w.op == Op::write ? Frame::write : Frame::send;
        h.flags = ack ? frame_flag::ack : 0;
        // Completion on hand-off to the kernel, or on the target's ACK for delivery-complete writes.
        out_.push({h, local, w.len, sig && !ack});
        if (ack) acks_.push_back({w.wr_id, sig});
      }
      ++n;
    }
    if (n && (wrs.empty() || !(wrs[size_t(n) - 1].flags & wr_flag::more)) && !flush_out()) return -1;
    return n;
  }

  int poll(std::span<Completion> out) override {
    if (!flush_out() || !read_answers() || !serve_peer()) return -1;
    size_t n = 0;
    while (n < out.size() && !done_.empty()) {
      out[n++] = done_.front();
      done_.pop_front();
    }
    return int(n);
  }

  Status quiesce(double timeout_s) override {
    recvs_.clear();  // posted receives are cancelled: they complete with nothing
    auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    Completion sink[64];
    while (!out_.empty() || !reads_.empty() || !acks_.empty()) {
      if (poll(sink) < 0) return {Errc::io, err_};
      if (std::chrono::steady_clock::now() > end)
        return {Errc::timeout, fmt::format("tcp: ops still in flight after {:.0f} s at the end of a phase", timeout_s)};
    }
    while (poll(sink) > 0) {
    }
    done_.clear();
    return {};
  }

  std::string describe_error(int err) const override {
    switch (err) {
      case kErrBadKey: return "the target has no region with that key";
      case kErrOutOfBounds: return "outside the target's registered region";
      case kErrTruncated: return "message longer than the posted receive";
    }
    return fmt::format("error {}: {}", err, err_);
  }
  const std::string& last_error() const override { return err_; }

 private:
  struct AckWait {
    uint64_t wr_id;
    bool signal;
  };

  static bool to_sockaddr(const std::string& ip, uint16_t port, sockaddr_storage* ss, socklen_t* len) {
    auto* v4 = reinterpret_cast<sockaddr_in*>(ss);
    auto* v6 = reinterpret_cast<sockaddr_in6*>(ss);
    if (inet_pton(AF_INET, ip.c_str(), &v4->sin_addr) == 1) {
      v4->sin_family = AF_INET;
      v4->sin_port = htons(port);
      *len = sizeof *v4;
      return true;
    }
    if (inet_pton(AF_INET6, ip.c_str(), &v6->sin6_addr) == 1) {
      v6->sin6_family = AF_INET6;
      v6->sin6_port = htons(port);
      *len = sizeof *v6;
      return true;
    }
    return false;
  }

  bool fail(const std::string& what) {
    err_ = what;
    return false;
  }

  bool flush_out() {
    sent_.clear();
    if (!out_.flush(sent_)) return fail(fmt::format("tcp: send to peer: {}", strerror(errno)));
    for (auto& f : sent_)
      done_.push_back({f.hdr.wr_id, f.hdr.type == Frame::write ? Op::write : Op::send, f.hdr.len, 0});
    return true;
  }

  // Answers to our own requests: READ_RESP, ACK, ERR, on the connection we opened.
  bool read_answers() {
    while (true) {
      if (ans_remaining_) {  // payload of a READ_RESP
        long r = out_reader_.read_into(ans_dst_, ans_remaining_);
        if (r < 0) return fail("tcp: the peer closed the connection");
        if (r == 0) return true;
        ans_dst_ += r;
        ans_remaining_ -= size_t(r);
        if (ans_remaining_) continue;
        PendingRead pr = reads_.front();
        reads_.pop_front();
        if (pr.signal) done_.push_back({pr.wr_id, Op::read, pr.len, 0});
        continue;
      }
      if (out_reader_.available() < sizeof(Header)) {
        long f = out_reader_.fill();
        if (f < 0) return fail("tcp: the peer closed the connection");
        if (out_reader_.available() < sizeof(Header)) return true;
      }
      Header h;
      std::memcpy(&h, out_reader_.peek(), sizeof h);
      out_reader_.consume(sizeof h);
      if (h.type == Frame::read_resp) {
        if (reads_.empty()) return fail("tcp: protocol error: unexpected read response");
        ans_dst_ = reads_.front().dst;
        ans_remaining_ = h.len;
        if (!h.len) {
          PendingRead pr = reads_.front();
          reads_.pop_front();
          if (pr.signal) done_.push_back({pr.wr_id, Op::read, pr.len, 0});
        }
      } else if (h.type == Frame::ack) {
        if (acks_.empty()) return fail("tcp: protocol error: unexpected ack");
        AckWait a = acks_.front();
        acks_.pop_front();
        if (a.signal) done_.push_back({a.wr_id, Op::write, h.len, 0});
      } else if (h.type == Frame::err) {
        Frame orig = Frame(h.reserved);
        Op op = orig == Frame::read_req ? Op::read : orig == Frame::send ? Op::send : Op::write;
        if (orig == Frame::read_req && !reads_.empty()) reads_.pop_front();
        if (orig == Frame::write && (h.flags & frame_flag::ack) && !acks_.empty()) acks_.pop_front();
        done_.push_back({h.wr_id, op, h.len, int(h.offset)});
      } else {
        return fail("tcp: protocol error: unknown answer frame");
      }
    }
  }

  void answer_error(const Header& req, int code) {
    Header e{};
    e.type = Frame::err;
    e.flags = req.flags;
    e.reserved = uint16_t(req.type);
    e.len = req.len;
    e.offset = uint64_t(code);
    e.wr_id = req.wr_id;
    answers_.push({e, nullptr, 0, false});
  }

  // The peer's requests, on the connection we accepted: apply writes, serve reads, deliver sends.
  bool serve_peer() {
    if (in_fd_ < 0) {
      in_fd_ = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (in_fd_ < 0) return true;  // the peer has not connected yet
      tune(in_fd_, so_);
      in_reader_.set_fd(in_fd_);
      answers_.set_fd(in_fd_);
      close(listen_fd_);
      listen_fd_ = -1;
    }
    for (int frames = 0; frames < 256; ++frames) {
      if (req_remaining_) {
        long r = in_reader_.read_into(req_dst_, std::min<size_t>(req_remaining_, req_discard_ ? discard_.size() : req_remaining_));
        if (r < 0) return fail("tcp: the peer closed the connection");
        if (r == 0) break;
        if (!req_discard_) req_dst_ += r;
        req_remaining_ -= size_t(r);
        if (req_remaining_) continue;
        finish_request();
        continue;
      }
      if (answers_.full()) break;  // let our answers drain before taking more requests
      if (in_reader_.available() < sizeof(Header)) {
        long f = in_reader_.fill();
        if (f < 0) return fail("tcp: the peer closed the connection");
        if (in_reader_.available() < sizeof(Header)) break;
      }
      std::memcpy(&req_, in_reader_.peek(), sizeof req_);
      if (req_.type == Frame::send && recvs_.empty()) break;  // no receive posted: TCP holds the rest back
      in_reader_.consume(sizeof req_);
      start_request();
    }
    sent_.clear();
    if (!answers_.flush(sent_)) return fail(fmt::format("tcp: send to peer: {}", strerror(errno)));
    return true;
  }

  void start_request() {
    req_err_ = 0;
    req_discard_ = false;
    req_remaining_ = 0;
    if (req_.type == Frame::send) {
      PostedRecv r = recvs_.front();
      recvs_.pop_front();
      recv_ = r;
      if (req_.len > r.len) req_err_ = kErrTruncated;
      req_dst_ = r.buf;
      req_remaining_ = req_.len;
      if (req_err_) {
        req_dst_ = discard_.data();
        req_discard_ = true;
      }
    } else {
      uint8_t* base;
      size_t len;
      if (!regions_->find(req_.key, &base, &len)) req_err_ = kErrBadKey;
      else if (req_.offset > len || req_.len > len - req_.offset) req_err_ = kErrOutOfBounds;
      if (req_.type == Frame::write) {
        req_remaining_ = req_.len;
        req_dst_ = req_err_ ? discard_.data() : base + req_.offset;
        req_discard_ = req_err_ != 0;
      } else if (req_.type == Frame::read_req) {
        if (req_err_) {
          answer_error(req_, req_err_);
        } else {
          Header h{};
          h.type = Frame::read_resp;
          h.len = req_.len;
          h.wr_id = req_.wr_id;
          answers_.push({h, base + req_.offset, req_.len, false});
        }
        return;
      }
    }
    if (!req_remaining_) finish_request();
  }

  void finish_request() {
    if (req_.type == Frame::send) {
      done_.push_back({recv_.wr_id, Op::recv, req_.len, req_err_});
      if (req_err_) answer_error(req_, req_err_);
      return;
    }
    if (req_err_) {
      answer_error(req_, req_err_);
    } else if (req_.flags & frame_flag::ack) {
      Header a{};
      a.type = Frame::ack;
      a.len = req_.len;
      a.wr_id = req_.wr_id;
      answers_.push({a, nullptr, 0, false});
    }
  }

  std::shared_ptr<RegionTable> regions_;
  SocketOptions so_;
  int listen_fd_ = -1, out_fd_ = -1, in_fd_ = -1;
  std::string addr_, err_;
  uint64_t remote_key_ = 0;
  FrameWriter out_, answers_;
  FrameReader out_reader_, in_reader_;
  std::vector<OutFrame> sent_;
  std::deque<Completion> done_;
  std::deque<PendingRead> reads_;
  std::deque<AckWait> acks_;
  std::deque<PostedRecv> recvs_;
  uint8_t* ans_dst_ = nullptr;
  size_t ans_remaining_ = 0;
  Header req_{};
  PostedRecv recv_{};
  uint8_t* req_dst_ = nullptr;
  size_t req_remaining_ = 0;
  bool req_discard_ = false;
  int req_err_ = 0;
  std::vector<uint8_t> discard_;
};

}  // namespace

Result<std::unique_ptr<Endpoint>> open_tcp_endpoint(std::shared_ptr<RegionTable> regions, const std::string& local_ip,
                                                    const SocketOptions& so, uint32_t depth) {
  auto ep = std::make_unique<TcpEp>(std::move(regions), so, depth);
  Status s = ep->listen_on(local_ip.empty() ? "127.0.0.1" : local_ip);
  if (!s) return s;
  return std::unique_ptr<Endpoint>(std::move(ep));
}

}  // namespace rb::transport::tcp
