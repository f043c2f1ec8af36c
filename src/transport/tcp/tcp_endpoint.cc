#include "transport/tcp/tcp_endpoint.hh"

#include "transport/tcp/fifo.hh"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
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
    case kErrMisaligned: return WcStatus::remote_operation;
  }
  return WcStatus::fatal;
}

// The op a request frame was posted as, for the initiator's completion: the frame type alone
// does not say whether a write or send carried an immediate.
Op op_of_request(Frame type, uint8_t flags) {
  bool imm = flags & frame_flag::imm;
  switch (type) {
    case Frame::write: return imm ? Op::write_imm : Op::write;
    case Frame::send: return imm ? Op::send_imm : Op::send;
    case Frame::read_req: return Op::read;
    case Frame::fadd_req: return Op::fadd;
    case Frame::cswap_req: return Op::cswap;
    default: return Op::write;
  }
}

// Requests whose answer carries data back: the initiator keeps them in order until it comes.
bool is_fetch(Frame type) { return type == Frame::read_req || type == Frame::fadd_req || type == Frame::cswap_req; }

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

struct PendingFetch {  // our READ or atomic waiting for its answer
  uint8_t* dst;
  uint32_t len;
  uint64_t wr_id;
  Op op;
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
//
// Everything that can make a completion appear comes through the one socket (or, before the
// peer connected, the listener), and the endpoint's own state is touched by its one thread only:
// that is why arm_wait can hand out the socket and sleeping on it never misses a completion.
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
      int r = post_one(w);
      if (r < 0) return n ? n : -1;  // the ops before it were taken; the next post reports the error
      if (r == 0) break;
      ++n;
    }
    if (n && !(wrs[size_t(n) - 1].flags & wr_flag::more) && !flush()) return -1;
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
    while (!out_.empty() || !fetches_.empty() || !acks_.empty()) {
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
      case kErrMisaligned: return fmt::format("{}: atomic target not 8-byte aligned", status);
    }
    return fmt::format("{} (code {}): {}", status, c.vendor_err, err_);
  }
  const std::string& last_error() const override { return err_; }

  // Sleeping is safe when every source of a completion is a kernel event on the descriptor
  // handed out: nothing queued, nothing staged that poll() could act on now, and our own
  // unsent frames (an answer the peer waits for, or a post not flushed) reported as EPOLLOUT.
  int arm_wait(WaitHandle& out) override {
    if (!done_.empty()) return 0;
    if (fd_ < 0) ensure_connected();
    if (fd_ < 0) {
      if (listen_fd_ < 0) {
        err_ = "tcp: the endpoint has no connection and no listener to wait on";
        return -1;
      }
      out = {listen_fd_, EPOLLIN};  // the peer's connect wakes us; poll() accepts it
      return 1;
    }
    if (staged_work()) return 0;
    out = {fd_, EPOLLIN | (out_.empty() ? 0u : uint32_t(EPOLLOUT))};
    return 1;
  }

 private:
  static constexpr uint32_t kAnswerRoom = 8192;  // answers the peer can be owed (its queue depth)

  struct AckWait {
    uint64_t wr_id;
    Op op;
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

  // Each post_* returns 1 when the request was taken, 0 when the writer is busy, -1 on error.
  int post_one(const WorkRequest& w) {
    uint8_t* local = static_cast<uint8_t*>(w.mr->addr()) + w.local_off;
    if (w.op == Op::recv) {
      recvs_.push_back({local, w.len, w.wr_id});
      return 1;
    }
    if (out_.queued() >= depth_ * 2) return 0;  // the rest of the writer is room for answers
    switch (w.op) {
      case Op::write:
      case Op::write_imm:
      case Op::send:
      case Op::send_imm: return post_message(w, local);
      case Op::read: return post_read(w, local);
      case Op::fadd:
      case Op::cswap: return post_atomic(w, local);
      default: break;
    }
    err_ = fmt::format("tcp: {} is not an op to post", op_name(w.op));
    return -1;
  }

  Header request(const WorkRequest& w, Frame type) const {
    Header h{};
    h.type = type;
    h.len = w.len;
    h.offset = w.remote_off;
    h.key = remote_key_;
    h.wr_id = w.wr_id;
    return h;
  }

  // Writes and sends carry their payload; an immediate rides in the header's extension.
  int post_message(const WorkRequest& w, uint8_t* local) {
    bool write = w.op == Op::write || w.op == Op::write_imm;
    bool imm = w.op == Op::write_imm || w.op == Op::send_imm;
    bool ack = write && (w.flags & wr_flag::delivery);
    bool sig = w.flags & wr_flag::signal;
    Header h = request(w, write ? Frame::write : Frame::send);
    h.flags = uint8_t((ack ? frame_flag::ack : 0) | (imm ? frame_flag::imm : 0));
    // Completion on hand-off to the kernel, or on the target's ACK for delivery-complete writes.
    if (!out_.push({h, {w.imm, 0}, local, w.len, sig && !ack})) return 0;
    if (ack) acks_.push_back({w.wr_id, w.op, sig});
    return 1;
  }

  int post_read(const WorkRequest& w, uint8_t* local) {
    if (!out_.push({request(w, Frame::read_req), {}, nullptr, 0, false})) return 0;
    fetches_.push_back({local, w.len, w.wr_id, Op::read, bool(w.flags & wr_flag::signal)});
    return 1;
  }

  // The target answers with the value it found, which lands at local_off.
  int post_atomic(const WorkRequest& w, uint8_t* local) {
    Header h = request(w, w.op == Op::fadd ? Frame::fadd_req : Frame::cswap_req);
    h.len = kAtomicBytes;
    if (!out_.push({h, {w.operand, w.compare}, nullptr, 0, false})) return 0;
    fetches_.push_back({local, kAtomicBytes, w.wr_id, w.op, bool(w.flags & wr_flag::signal)});
    return 1;
  }

  bool flush() {
    if (fd_ < 0 && !ensure_connected()) return false;
    if (fd_ < 0) return true;
    sent_.clear();
    if (!out_.flush(sent_)) return fail(fmt::format("tcp: send to peer: {}", strerror(errno)));
    for (auto& f : sent_)  // signaled writes and sends, handed to the kernel
      done_.push_back({f.hdr.wr_id, op_of_request(f.hdr.type, f.hdr.flags), f.hdr.len});
    return true;
  }

  // Bytes already pulled off the socket that poll() can act on now: no kernel event would
  // announce them again. A SEND with no receive posted waits for a post, not for the kernel.
  bool staged_work() const {
    size_t have = reader_.available();
    if (remaining_) return have > 0;
    if (have < sizeof(Header)) return false;
    Header h;
    std::memcpy(&h, reader_.peek(), sizeof h);
    if (h.type == Frame::send && recvs_.empty()) return false;
    return have >= head_bytes(h);
  }

  void answer_error(const Header& req, int code) {
    Header e{};
    e.type = Frame::err;
    e.flags = req.flags;
    e.reserved = uint16_t(req.type);
    e.len = req.len;
    e.offset = uint64_t(code);
    e.wr_id = req.wr_id;
    answer({e, {}, nullptr, 0, false});
  }

  // Answers have kAnswerRoom slots of their own; a peer owing more than that breaks the protocol.
  void answer(const OutFrame& f) {
    if (!out_.push(f)) overflow_ = true;
  }

  // Everything that arrives: the peer's requests (apply writes and atomics, serve reads, deliver
  // sends) and answers to ours (read data, atomic results, acks, errors).
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
      int h = next_header();
      if (h < 0) return fail("tcp: the peer closed the connection");
      if (h == 0) break;
      if (!start_frame()) return false;
    }
    if (overflow_) return fail("tcp: the peer has more requests in flight than this endpoint can answer");
    return flush();
  }

  // 1 when at least n bytes are staged, 0 when they have not arrived yet, -1 when the peer closed.
  int staged(size_t n) {
    if (reader_.available() >= n) return 1;
    if (reader_.drained()) return 0;  // the socket just had nothing more: skip the syscall
    if (reader_.fill() < 0) return -1;
    return reader_.available() >= n ? 1 : 0;
  }

  // Takes the next frame's header and extension off the staging buffer into cur_/cur_ext_:
  // 1 when they are there, 0 when bytes are missing or the frame is a SEND with no receive
  // posted (TCP holds the rest back), -1 when the peer closed.
  int next_header() {
    int r = staged(sizeof(Header));
    if (r <= 0) return r;
    std::memcpy(&cur_, reader_.peek(), sizeof cur_);
    if (cur_.type == Frame::send && recvs_.empty()) return 0;
    size_t head = head_bytes(cur_);
    if ((r = staged(head)) <= 0) return r;
    cur_ext_ = {};
    std::memcpy(&cur_ext_, reader_.peek() + sizeof(Header), head - sizeof(Header));
    reader_.consume(head);
    return 1;
  }

  // Where a request's n bytes lie in our registered memory, or the ERR code that refuses it.
  int locate(const Header& req, uint64_t n, uint8_t** at) {
    uint8_t* base = nullptr;
    size_t len = 0;
    if (!regions_->find(req.key, &base, &len)) return kErrBadKey;
    if (req.offset > len || n > len - req.offset) return kErrOutOfBounds;
    *at = base + req.offset;
    return 0;
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
      case Frame::write: {
        uint8_t* at = nullptr;
        err_code_ = locate(cur_, cur_.len, &at);
        set_payload(err_code_ ? nullptr : at);
        break;
      }
      case Frame::read_req:
        serve_read();
        return true;
      case Frame::fadd_req:
      case Frame::cswap_req:
        serve_atomic();
        return true;
      case Frame::read_resp:
        if (fetches_.empty() || fetches_.front().op != Op::read || fetches_.front().len != cur_.len)
          return fail("tcp: protocol error: unexpected read response");
        set_payload(fetches_.front().dst);
        break;
      case Frame::atomic_resp:
        return complete_atomic();
      case Frame::ack: {
        if (acks_.empty()) return fail("tcp: protocol error: unexpected ack");
        AckWait a = acks_.front();
        acks_.pop_front();
        if (a.signal) done_.push_back({a.wr_id, a.op, cur_.len});
        return true;
      }
      case Frame::err:
        return complete_error();
      default:
        return fail("tcp: protocol error: unknown frame");
    }
    if (!remaining_) finish_frame();
    return true;
  }

  void serve_read() {
    uint8_t* at = nullptr;
    if (int code = locate(cur_, cur_.len, &at)) return answer_error(cur_, code);
    Header h{};
    h.type = Frame::read_resp;
    h.len = cur_.len;
    h.wr_id = cur_.wr_id;
    answer({h, {}, at, cur_.len, false});
  }

  // Checked like a write, plus alignment (atomic_ref needs it, as a NIC does); refused ones
  // touch nothing. Other endpoints and threads of this process may hit the same word, hence
  // atomic_ref rather than a plain load and store.
  void serve_atomic() {
    uint8_t* at = nullptr;
    int code = locate(cur_, kAtomicBytes, &at);
    if (!code && reinterpret_cast<uintptr_t>(at) % kAtomicBytes) code = kErrMisaligned;
    if (code) return answer_error(cur_, code);
    std::atomic_ref<uint64_t> word(*reinterpret_cast<uint64_t*>(at));
    uint64_t old = cur_ext_.compare;  // a failed compare_exchange leaves the value found here
    if (cur_.type == Frame::fadd_req)
      old = word.fetch_add(cur_ext_.value);
    else
      word.compare_exchange_strong(old, cur_ext_.value);
    Header h{};
    h.type = Frame::atomic_resp;
    h.len = kAtomicBytes;
    h.offset = old;
    h.wr_id = cur_.wr_id;
    answer({h, {}, nullptr, 0, false});
  }

  bool complete_atomic() {
    if (fetches_.empty() || fetches_.front().op == Op::read) return fail("tcp: protocol error: unexpected atomic response");
    PendingFetch f = fetches_.front();
    fetches_.pop_front();
    std::memcpy(f.dst, &cur_.offset, kAtomicBytes);
    if (f.signal) done_.push_back({f.wr_id, f.op, kAtomicBytes});
    return true;
  }

  // The target refused one of our requests: it completes with the error, signaled or not.
  bool complete_error() {
    Frame orig = Frame(cur_.reserved);
    if (is_fetch(orig)) {
      if (fetches_.empty()) return fail("tcp: protocol error: unexpected error answer");
      fetches_.pop_front();
    }
    if (orig == Frame::write && (cur_.flags & frame_flag::ack) && !acks_.empty()) acks_.pop_front();
    int code = int(cur_.offset);
    done_.push_back({cur_.wr_id, op_of_request(orig, cur_.flags), cur_.len, status_of_answer(code), code});
    return true;
  }

  void set_payload(uint8_t* dst) {
    remaining_ = cur_.len;
    discard_payload_ = dst == nullptr;
    dst_ = dst ? dst : discard_.data();
  }

  void finish_frame() {
    switch (cur_.type) {
      case Frame::send: finish_send(); break;
      case Frame::write: finish_write(); break;
      case Frame::read_resp: complete_read(); break;
      default: break;
    }
  }

  void finish_send() {
    Completion c{recv_.wr_id, Op::recv, cur_.len, err_code_ ? WcStatus::local_length : WcStatus::success, err_code_};
    c.has_imm = cur_.flags & frame_flag::imm;
    c.imm = c.has_imm ? uint32_t(cur_ext_.value) : 0;
    done_.push_back(c);
    if (err_code_) answer_error(cur_, err_code_);
  }

  // The data is in place before the arrival is queued, so a target that sees the remote_write
  // completion may read it.
  void finish_write() {
    if (err_code_) return answer_error(cur_, err_code_);
    if (cur_.flags & frame_flag::imm) {
      Completion arrival{0, Op::remote_write, cur_.len};
      arrival.has_imm = true;
      arrival.imm = uint32_t(cur_ext_.value);
      done_.push_back(arrival);
    }
    if (cur_.flags & frame_flag::ack) {
      Header a{};
      a.type = Frame::ack;
      a.len = cur_.len;
      a.wr_id = cur_.wr_id;
      answer({a, {}, nullptr, 0, false});
    }
  }

  void complete_read() {
    PendingFetch f = fetches_.front();
    fetches_.pop_front();
    if (f.signal) done_.push_back({f.wr_id, Op::read, f.len});
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
  Fifo<PendingFetch> fetches_;
  Fifo<AckWait> acks_;
  Fifo<PostedRecv> recvs_;
  Header cur_{};
  Extension cur_ext_{};
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
