#include "transport/tcp/tcp_endpoint.hh"

#include "transport/tcp/fifo.hh"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
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

// The status of one of our requests that the target answered with an ERR frame.
WcStatus status_of_answer(int code) {
  switch (code) {
    case kErrBadKey:
    case kErrOutOfBounds: return WcStatus::remote_access;
    case kErrTruncated: return WcStatus::remote_operation;  // the target's receive was too short
  }
  return WcStatus::fatal;
}

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

// One connection per endpoint pair carries both directions: our requests and our answers to the
// peer's requests go out on it, and the peer's requests and answers come in on it. The side with
// the smaller address connects; the other accepts on first use, so neither ever blocks the
// rendezvous. The writer keeps room for every answer the peer can be owed, so two full sides
// cannot deadlock. One stream carries everything in order: a SEND that waits for a receive to be
// posted also holds back the answers behind it (the runner always has receives posted). A SEND
// completes when handed to the kernel; a truncation the target finds later comes as a second,
// failing completion of the same wr_id.
class TcpEp final : public Endpoint {
 public:
  TcpEp(std::shared_ptr<RegionTable> regions, SocketOptions so, uint32_t depth)
      : regions_(std::move(regions)), so_(so), depth_(depth), out_(depth * 2 + kAnswerRoom), reader_(kStaging) {
    sent_.reserve(256);
    discard_.resize(64 << 10);
  }
  ~TcpEp() override {
    for (int fd : {listen_fd_, fd_})
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
    if (addr_ > s) return {};  // the peer connects to us; accepted on first use
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    tune(fd, so_);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0 && errno != EINPROGRESS) {
      close(fd);
      return {Errc::peer_gone, fmt::format("tcp: connect to {}: {}", s, strerror(errno))};
    }
    // The peer's listener exists before its address is handed out, so the backlog completes this.
    pollfd p{fd, POLLOUT, 0};
    int err = 0;
    socklen_t el = sizeof err;
    if (::poll(&p, 1, 5000) <= 0 || (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el), err)) {
      close(fd);
      return {Errc::peer_gone, fmt::format("tcp: connect to {}: {}", s, err ? strerror(err) : "timed out")};
    }
    attach(fd);
    return {};
  }

  Status set_remote(const RemoteRegion& r) override {
    remote_key_ = r.key;
    return {};
  }

  int post(std::span<const WorkRequest> wrs) override {
    int n = 0;
    for (const auto& w : wrs) {
      if (w.op != Op::write && w.op != Op::read && w.op != Op::send && w.op != Op::recv) {
        err_ = fmt::format("tcp: {} is not supported yet", op_name(w.op));
        return n ? n : -1;
      }
      uint8_t* local = static_cast<uint8_t*>(w.mr->addr()) + w.local_off;
      if (w.op == Op::recv) {
        recvs_.push_back({local, w.len, w.wr_id});
        ++n;
        continue;
      }
      if (out_.queued() >= depth_ * 2) break;  // the rest of the writer is room for answers
      bool sig = w.flags & wr_flag::signal;
      Header h{};
      h.len = w.len;
      h.offset = w.remote_off;
      h.key = remote_key_;
      h.wr_id = w.wr_id;
      if (w.op == Op::read) {
        h.type = Frame::read_req;
        if (!out_.push({h, nullptr, 0, false})) break;
        reads_.push_back({local, w.len, w.wr_id, sig});
      } else {
        bool ack = w.op == Op::write && (w.flags & wr_flag::delivery);
        h.type = w.op == Op::write ? Frame::write : Frame::send;
        h.flags = ack ? frame_flag::ack : 0;
        // Completion on hand-off to the kernel, or on the target's ACK for delivery-complete writes.
        if (!out_.push({h, local, w.len, sig && !ack})) break;
        if (ack) acks_.push_back({w.wr_id, sig});
      }
      ++n;
    }
    if (n && (wrs.empty() || !(wrs[size_t(n) - 1].flags & wr_flag::more)) && !flush()) return -1;
    return n;
  }

  int poll(std::span<Completion> out) override {
    if (!ensure_connected() || !flush() || !receive()) return -1;
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

  std::string describe_error(const Completion& c) const override {
    const char* status = wc_status_name(c.status);
    switch (c.vendor_err) {
      case kErrBadKey: return fmt::format("{}: the target has no region with that key", status);
      case kErrOutOfBounds: return fmt::format("{}: outside the target's registered region", status);
      case kErrTruncated: return fmt::format("{}: message longer than the posted receive", status);
    }
    return fmt::format("{} (code {}): {}", status, c.vendor_err, err_);
  }
  const std::string& last_error() const override { return err_; }
  int arm_wait(WaitHandle&) override {
    err_ = "tcp: event endpoints are not implemented yet";
    return -1;
  }

 private:
  static constexpr uint32_t kAnswerRoom = 8192;  // answers the peer can be owed (its queue depth)

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

  void attach(int fd) {
    fd_ = fd;
    out_.set_fd(fd);
    reader_.set_fd(fd);
    if (listen_fd_ >= 0) {
      close(listen_fd_);
      listen_fd_ = -1;
    }
  }

  bool ensure_connected() {
    if (fd_ >= 0) return true;
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return true;  // the peer has not connected yet
    tune(fd, so_);
    attach(fd);
    return true;
  }

  bool fail(const std::string& what) {
    err_ = what;
    return false;
  }

  bool flush() {
    if (fd_ < 0 && !ensure_connected()) return false;
    if (fd_ < 0) return true;
    sent_.clear();
    if (!out_.flush(sent_)) return fail(fmt::format("tcp: send to peer: {}", strerror(errno)));
    for (auto& f : sent_)  // signaled writes and sends, handed to the kernel
      done_.push_back({f.hdr.wr_id, f.hdr.type == Frame::write ? Op::write : Op::send, f.hdr.len});
    return true;
  }

  void complete_read() {
    PendingRead pr = reads_.front();
    reads_.pop_front();
    if (pr.signal) done_.push_back({pr.wr_id, Op::read, pr.len});
  }

  void answer_error(const Header& req, int code) {
    Header e{};
    e.type = Frame::err;
    e.flags = req.flags;
    e.reserved = uint16_t(req.type);
    e.len = req.len;
    e.offset = uint64_t(code);
    e.wr_id = req.wr_id;
    answer({e, nullptr, 0, false});
  }

  // Answers have kAnswerRoom slots of their own; a peer owing more than that breaks the protocol.
  void answer(const OutFrame& f) {
    if (!out_.push(f)) overflow_ = true;
  }

  // Everything that arrives: the peer's requests (apply writes, serve reads, deliver sends) and
  // answers to ours (read data, acks, errors).
  bool receive() {
    if (fd_ < 0) return true;
    reader_.new_poll();
    for (int frames = 0; frames < 256; ++frames) {
      if (reader_.drained() && reader_.available() == 0) break;
      if (remaining_) {
        size_t want = discard_payload_ ? std::min(remaining_, discard_.size()) : remaining_;
        long r = reader_.read_into(dst_, want);
        if (r < 0) return fail("tcp: the peer closed the connection");
        if (r == 0) break;
        if (!discard_payload_) dst_ += r;
        remaining_ -= size_t(r);
        if (!remaining_) finish_frame();
        continue;
      }
      if (reader_.available() < sizeof(Header)) {
        if (reader_.drained()) break;
        long f = reader_.fill();
        if (f < 0) return fail("tcp: the peer closed the connection");
        if (reader_.available() < sizeof(Header)) break;
      }
      std::memcpy(&cur_, reader_.peek(), sizeof cur_);
      if (cur_.type == Frame::send && recvs_.empty()) break;  // no receive posted: TCP holds the rest back
      reader_.consume(sizeof cur_);
      if (!start_frame()) return false;
    }
    if (overflow_) return fail("tcp: the peer has more requests in flight than this endpoint can answer");
    return flush();
  }

  bool start_frame() {
    err_code_ = 0;
    discard_payload_ = false;
    remaining_ = 0;
    switch (cur_.type) {
      case Frame::send: {
        recv_ = recvs_.front();
        recvs_.pop_front();
        if (cur_.len > recv_.len) err_code_ = kErrTruncated;
        set_payload(err_code_ ? nullptr : recv_.buf);
        break;
      }
      case Frame::write:
      case Frame::read_req: {
        uint8_t* base = nullptr;
        size_t len = 0;
        if (!regions_->find(cur_.key, &base, &len)) err_code_ = kErrBadKey;
        else if (cur_.offset > len || cur_.len > len - cur_.offset) err_code_ = kErrOutOfBounds;
        if (cur_.type == Frame::write) {
          set_payload(err_code_ ? nullptr : base + cur_.offset);
          break;
        }
        if (err_code_) {
          answer_error(cur_, err_code_);
        } else {
          Header h{};
          h.type = Frame::read_resp;
          h.len = cur_.len;
          h.wr_id = cur_.wr_id;
          answer({h, base + cur_.offset, cur_.len, false});
        }
        return true;
      }
      case Frame::read_resp:
        if (reads_.empty()) return fail("tcp: protocol error: unexpected read response");
        set_payload(reads_.front().dst);
        break;
      case Frame::ack: {
        if (acks_.empty()) return fail("tcp: protocol error: unexpected ack");
        AckWait a = acks_.front();
        acks_.pop_front();
        if (a.signal) done_.push_back({a.wr_id, Op::write, cur_.len});
        return true;
      }
      case Frame::err: {
        Frame orig = Frame(cur_.reserved);
        Op op = orig == Frame::read_req ? Op::read : orig == Frame::send ? Op::send : Op::write;
        if (orig == Frame::read_req && !reads_.empty()) reads_.pop_front();
        if (orig == Frame::write && (cur_.flags & frame_flag::ack) && !acks_.empty()) acks_.pop_front();
        done_.push_back({cur_.wr_id, op, cur_.len, status_of_answer(int(cur_.offset)), int(cur_.offset)});
        return true;
      }
      default:
        return fail("tcp: protocol error: unknown frame");
    }
    if (!remaining_) finish_frame();
    return true;
  }

  void set_payload(uint8_t* dst) {
    remaining_ = cur_.len;
    discard_payload_ = dst == nullptr;
    dst_ = dst ? dst : discard_.data();
  }

  void finish_frame() {
    switch (cur_.type) {
      case Frame::send:
        done_.push_back({recv_.wr_id, Op::recv, cur_.len, err_code_ ? WcStatus::local_length : WcStatus::success, err_code_});
        if (err_code_) answer_error(cur_, err_code_);
        break;
      case Frame::write:
        if (err_code_) {
          answer_error(cur_, err_code_);
        } else if (cur_.flags & frame_flag::ack) {
          Header a{};
          a.type = Frame::ack;
          a.len = cur_.len;
          a.wr_id = cur_.wr_id;
          answer({a, nullptr, 0, false});
        }
        break;
      case Frame::read_resp:
        complete_read();
        break;
      default:
        break;
    }
  }

  std::shared_ptr<RegionTable> regions_;
  SocketOptions so_;
  uint32_t depth_;
  int listen_fd_ = -1, fd_ = -1;
  std::string addr_, err_;
  uint64_t remote_key_ = 0;
  FrameWriter out_;
  FrameReader reader_;
  std::vector<OutFrame> sent_;
  Fifo<Completion> done_;
  Fifo<PendingRead> reads_;
  Fifo<AckWait> acks_;
  Fifo<PostedRecv> recvs_;
  Header cur_{};
  PostedRecv recv_{};
  uint8_t* dst_ = nullptr;
  size_t remaining_ = 0;
  bool discard_payload_ = false, overflow_ = false;
  int err_code_ = 0;
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
