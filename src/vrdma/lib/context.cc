#include "vrdma/lib/context.hh"

#include <poll.h>
#include <sys/eventfd.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

namespace rb::vrdma {
namespace {

template <class T>
Call<T> fail(int err, std::string message) {
  Call<T> c;
  c.error = {err, std::move(message)};
  return c;
}

template <class T>
Call<T> done(T v) {
  Call<T> c;
  c.value = std::move(v);
  return c;
}

int errno_of(Errc c) {
  switch (c) {
    case Errc::timeout: return ETIMEDOUT;
    case Errc::peer_gone: return ECONNRESET;
    case Errc::unavailable: return ENOENT;
    case Errc::invalid_argument: return EINVAL;
    default: return EIO;
  }
}

size_t page_rounded(size_t len) {
  size_t page = size_t(sysconf(_SC_PAGESIZE));
  return (len + page - 1) / page * page;
}

}  // namespace

Result<FixedMapping> FixedMapping::reserve(size_t len) {
  size_t n = page_rounded(len);
  void* p = mmap(nullptr, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return Status(Errc::unavailable, fmt::format("cannot reserve {} B of address space", n));
  return FixedMapping(static_cast<uint8_t*>(p), n);
}

Status FixedMapping::map_over(int fd) {
  void* p = mmap(p_, len_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0);
  if (p == MAP_FAILED) return {Errc::io, fmt::format("mmap of a region: {}", std::strerror(errno))};
  return {};
}

FixedMapping::~FixedMapping() {
  if (p_) munmap(p_, len_);
}

Call<std::unique_ptr<Context>> Context::open(const std::string& socket_path) {
  auto sock = ipc::connect_to(socket_path);
  if (!sock) return fail<std::unique_ptr<Context>>(errno_of(sock.status().code()), sock.status().message());
  std::unique_ptr<Context> c(new Context());
  c->sock_ = std::move(*sock);
  c->path_ = socket_path;
  c->fork_copies_.emplace(c->fork_hooks());
  proto::Hello h;
  h.pid = uint32_t(getpid());
  auto a = c->ask(proto::Type::hello, h, proto::Type::welcome);
  if (!a.ok()) return fail<std::unique_ptr<Context>>(a.error.err, a.error.message);
  auto w = a.value->msg.as<proto::Welcome>();
  c->tenant_ = proto::get_text(w.tenant, proto::kNameBytes);
  c->router_id_ = w.router_id;
  c->router_at_ = w.listen;
  c->direct_ = w.direct != 0;
  c->stop_watch_.reset(eventfd(0, EFD_CLOEXEC));
  if (!c->stop_watch_) return fail<std::unique_ptr<Context>>(errno, "eventfd for the router watcher");
  c->watcher_ = std::thread([ctx = c.get()] { ctx->watch_router(); });
  return done(std::move(c));
}

void Context::add_wake_fd(int fd) {
  std::lock_guard lk(wake_mu_);
  wake_fds_.push_back(fd);
}

void Context::remove_wake_fd(int fd) {
  std::lock_guard lk(wake_mu_);
  wake_fds_.erase(std::remove(wake_fds_.begin(), wake_fds_.end(), fd), wake_fds_.end());
}

// A child of fork() gets private copies of the memory under registered buffers (fork_copy.hh):
// the spans over the caller's own buffers and the regions vrdma_alloc_mr mapped.
ForkCopies::Hooks Context::fork_hooks() {
  return {[this](bool on) {
            if (on) {
              regions_mu_.lock();
              spans_.hold(true);
            } else {
              spans_.hold(false);
              regions_mu_.unlock();
            }
          },
          [this](const std::function<void(uintptr_t, uintptr_t)>& each) {
            spans_.each_span(each);
            for (const auto& [lkey, r] : regions_)
              if (r->owned) each(reinterpret_cast<uintptr_t>(r->owned->data()), reinterpret_cast<uintptr_t>(r->owned->data()) + r->owned->size());
          },
          [this] { leave_to_parent(); }};
}

// The child shares its parent's connection to the router, which takes what comes on it for the
// parent's: a child's vrdma_dereg_mr of an inherited region deregistered the parent's. Its copy
// of the socket becomes one whose peer has gone, so the child's calls fail as on a router that
// went away; its copies of the memfds under registered buffers become empty ones (else it could
// map the parent's pages through them); its copy of the watcher (a thread the child has not) is
// let go, never joined.
void Context::leave_to_parent() {
  int ends[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ends) == 0) {
    dup3(ends[0], sock_.get(), O_CLOEXEC);
    close(ends[0]);
    close(ends[1]);
  }
  spans_.cut_fds_in_child();
  broken_ = true;
  broken_why_ = "a child of fork() cannot use its parent's vrdma context";
  router_gone_.store(true, std::memory_order_relaxed);
  forked_away_ = true;
  if (watcher_.joinable()) watcher_.detach();
}

Context::~Context() {
  if (watcher_.joinable()) {
    uint64_t one = 1;
    (void)!write(stop_watch_.get(), &one, sizeof one);
    watcher_.join();
  }
}

// Waits for the router to hang up, reading nothing (replies stay for ask()).
void Context::watch_router() {
  pollfd p[2] = {{sock_.get(), POLLRDHUP, 0}, {stop_watch_.get(), POLLIN, 0}};
  while (true) {
    int r = poll(p, 2, -1);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 || (p[1].revents & POLLIN)) return;
    if (p[0].revents & (POLLRDHUP | POLLHUP | POLLERR)) {
      router_gone_.store(true, std::memory_order_relaxed);
      std::lock_guard lk(wake_mu_);
      uint64_t one = 1;
      for (int fd : wake_fds_) (void)!write(fd, &one, sizeof one);
      return;
    }
  }
}

Call<Context::Answer> Context::ask(proto::Type t, std::span<const uint8_t> body, proto::Type want, int fd, int fd2) {
  std::lock_guard lk(mu_);
  if (broken_) return fail<Answer>(ECONNRESET, broken_why_);
  uint32_t seq = ++seq_;
  auto lost = [&](const Status& st) {
    broken_ = true;
    broken_why_ = fmt::format("vrdma router at {}: {}", path_, st.message());
    return fail<Answer>(errno_of(st.code()), broken_why_);
  };
  // A router that refuses the connection itself (too many from this uid) says why in an error
  // numbered 0, then closes: that is the answer, whether our request went out or not.
  auto refused = [&](const proto::Message& m) {
    auto e = m.as<proto::Error>();
    broken_ = true;
    broken_why_ = fmt::format("vrdma router at {} refused the connection: {}", path_,
                              proto::get_text(e.message, sizeof e.message));
    return fail<Answer>(e.err > 0 ? e.err : ECONNREFUSED, broken_why_);
  };
  int timeout_ms = kReplyTimeoutMs;
  Status sent = ipc::send_packet(sock_.get(), proto::encode(t, seq, body), fd, fd2);
  if (!sent) timeout_ms = 0;  // only an answer already waiting can tell more
  auto p = ipc::recv_packet(sock_.get(), proto::kMaxMessage, timeout_ms);
  if (!sent && (!p || p->bytes.empty())) return lost(sent);
  if (!p) return lost(p.status());
  if (p->bytes.empty()) return lost({Errc::peer_gone, "closed the connection"});
  Answer a;
  a.packet = std::move(p->bytes);
  a.fd = std::move(p->fd);
  a.fd2 = std::move(p->fd2);
  proto::Parsed parsed = proto::parse(a.packet);
  if (!parsed.msg) return lost({Errc::io, "answered garbage: " + parsed.error});
  a.msg = *parsed.msg;
  if (a.msg.h.seq == 0 && a.msg.type() == proto::Type::error) return refused(a.msg);
  if (!sent) return lost(sent);
  if (a.msg.h.seq != seq) return lost({Errc::io, fmt::format("answered request {} to request {}", a.msg.h.seq, seq)});
  if (a.msg.type() == proto::Type::error) {
    auto e = a.msg.as<proto::Error>();
    return fail<Answer>(e.err > 0 ? e.err : EIO, proto::get_text(e.message, sizeof e.message));
  }
  if (a.msg.type() != want)
    return lost({Errc::io, fmt::format("answered {} where {} was due", proto::type_name(a.msg.type()), proto::type_name(want))});
  return done(std::move(a));
}

Call<uint32_t> Context::alloc_pd() {
  auto a = ask(proto::Type::alloc_pd, std::span<const uint8_t>{}, proto::Type::handle);
  if (!a.ok()) return fail<uint32_t>(a.error.err, a.error.message);
  return done(a.value->msg.as<proto::Handle>().id);
}

Call<bool> Context::dealloc_pd(uint32_t pd) {
  auto a = ask(proto::Type::dealloc_pd, proto::Handle{pd}, proto::Type::done);
  if (!a.ok()) return fail<bool>(a.error.err, a.error.message);
  return done(true);
}

Call<std::unique_ptr<Region>> Context::alloc_mr(uint32_t pd, uint64_t len, uint32_t access) {
  auto where = FixedMapping::reserve(len);
  if (!where) return fail<std::unique_ptr<Region>>(ENOMEM, where.status().message());
  uint64_t va = reinterpret_cast<uint64_t>(where->data());
  auto a = ask(proto::Type::reg_mr, proto::RegMr{pd, access, len, va}, proto::Type::mr_granted);
  if (!a.ok()) return fail<std::unique_ptr<Region>>(a.error.err, a.error.message);
  auto g = a.value->msg.as<proto::MrGranted>();
  if (!a.value->fd || g.len != len || g.map_len < where->size())
    return fail<std::unique_ptr<Region>>(EIO, "vrdma router granted a region without its memory");
  if (Status st = where->map_over(a.value->fd.get()); !st) return fail<std::unique_ptr<Region>>(ENOMEM, st.message());
  // Its pages are made here, as verbs pins a region's pages when it is registered: else the
  // router's first touch of each (a cross-host RMA of it) allocates and zeroes it on the router's
  // loop, where every tenant waits (1 GiB of it held another tenant 100-160 ms at a time).
  // Kernels before 5.14 lack the advice: the pages are then made where first touched.
  (void)madvise(where->data(), where->size(), MADV_POPULATE_WRITE);
  auto r = std::make_unique<Region>(Region{g.lkey, g.rkey, pd, access, len, where->data(), std::move(*where), {}});
  std::lock_guard lk(regions_mu_);
  regions_[r->lkey] = r.get();
  return done(std::move(r));
}

Call<std::unique_ptr<Region>> Context::reg_mr(uint32_t pd, void* addr, uint64_t len, uint32_t access) {
  uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
  if (len == 0) return fail<std::unique_ptr<Region>>(EINVAL, "vrdma_reg_mr: the buffer is empty");
  uintptr_t start = reinterpret_cast<uintptr_t>(addr) & ~(page - 1);
  uintptr_t end = (reinterpret_cast<uintptr_t>(addr) + len + page - 1) & ~(page - 1);
  auto shared = spans_.share(start, end - start);
  if (!shared)
    return fail<std::unique_ptr<Region>>(shared.status().code() == Errc::unsupported        ? EOPNOTSUPP
                                         : shared.status().code() == Errc::invalid_argument ? EFAULT
                                                                                             : ENOMEM,
                                         shared.status().message());
  uint64_t va = reinterpret_cast<uint64_t>(addr);
  auto a = ask(proto::Type::reg_mr, proto::RegMr{pd, access, len, va, shared->offset}, proto::Type::mr_granted, shared->fd);
  if (!a.ok()) {
    spans_.release(shared->span);
    return fail<std::unique_ptr<Region>>(a.error.err, a.error.message);
  }
  auto g = a.value->msg.as<proto::MrGranted>();
  auto r = std::make_unique<Region>(Region{g.lkey, g.rkey, pd, access, len, static_cast<uint8_t*>(addr), {}, shared->span});
  std::lock_guard lk(regions_mu_);
  regions_[r->lkey] = r.get();
  return done(std::move(r));
}

Call<bool> Context::dereg_mr(Region& r) {
  auto a = ask(proto::Type::dereg_mr, proto::Handle{r.lkey}, proto::Type::done);
  if (!a.ok()) return fail<bool>(a.error.err, a.error.message);
  if (r.span) spans_.release(r.span);
  std::lock_guard lk(regions_mu_);
  regions_.erase(r.lkey);
  regions_epoch_.fetch_add(1, std::memory_order_release);
  return done(true);
}

const Region* Context::region(uint32_t lkey) const {
  std::lock_guard lk(regions_mu_);
  auto it = regions_.find(lkey);
  return it == regions_.end() ? nullptr : it->second;
}

Call<uint32_t> Context::create_qp(uint32_t pd, int memfd, uint64_t mem_len, int doorbell, uint32_t srq) {
  proto::CreateQp c;
  c.pd = pd;
  c.srq = srq;
  c.mem_len = mem_len;
  auto a = ask(proto::Type::create_qp, c, proto::Type::qp_created, memfd, doorbell);
  if (!a.ok()) return fail<uint32_t>(a.error.err, a.error.message);
  return done(a.value->msg.as<proto::QpCreated>().qp_num);
}

Call<uint32_t> Context::create_srq(uint32_t pd, int memfd, uint64_t mem_len) {
  auto a = ask(proto::Type::create_srq, proto::CreateSrq{pd, 0, mem_len}, proto::Type::handle, memfd);
  if (!a.ok()) return fail<uint32_t>(a.error.err, a.error.message);
  return done(a.value->msg.as<proto::Handle>().id);
}

Call<bool> Context::destroy_srq(uint32_t srq) {
  auto a = ask(proto::Type::destroy_srq, proto::Handle{srq}, proto::Type::done);
  if (!a.ok()) return fail<bool>(a.error.err, a.error.message);
  return done(true);
}

Call<uint32_t> Context::create_ah(const proto::RouterAddress& at) {
  proto::CreateAh req;
  req.at = at;
  auto a = ask(proto::Type::create_ah, req, proto::Type::handle);
  if (!a.ok()) return fail<uint32_t>(a.error.err, a.error.message);
  return done(a.value->msg.as<proto::Handle>().id);
}

Call<bool> Context::destroy_ah(uint32_t ah) {
  auto a = ask(proto::Type::destroy_ah, proto::Handle{ah}, proto::Type::done);
  if (!a.ok()) return fail<bool>(a.error.err, a.error.message);
  return done(true);
}

Call<bool> Context::send_doorbell(uint32_t qp_num, int doorbell) {
  auto a = ask(proto::Type::send_doorbell, proto::Handle{qp_num}, proto::Type::done, doorbell);
  if (!a.ok()) return fail<bool>(a.error.err, a.error.message);
  return done(true);
}

Call<Connected> Context::connect_qp(uint32_t qp_num, uint32_t peer_qp, uint64_t peer_router,
                                    const proto::RouterAddress& peer_at) {
  auto a = ask(proto::Type::connect_qp, proto::ConnectQp{qp_num, peer_qp, peer_router, peer_at}, proto::Type::qp_connected);
  if (!a.ok()) return fail<Connected>(a.error.err, a.error.message);
  if (!a.value->fd) return fail<Connected>(EIO, "vrdma router connected a QP without the peer's queue memory");
  auto q = a.value->msg.as<proto::QpConnected>();
  return done(Connected{std::move(a.value->fd), std::move(a.value->fd2), q.peer_mem_len, q.router_path != 0,
                        q.peer_srq_len});
}

Call<Grant> Context::grant(uint32_t qp_num, uint32_t key) {
  auto a = ask(proto::Type::grant, proto::GrantAsk{qp_num, key}, proto::Type::granted);
  if (!a.ok()) return fail<Grant>(a.error.err, a.error.message);
  auto g = a.value->msg.as<proto::Granted>();
  if (!a.value->fd || g.map_len < g.len || g.map_len - g.len < g.first)
    return fail<Grant>(EIO, "vrdma router granted a region without its memory");
  auto m = Mapping::map(a.value->fd.get(), g.map_len, true, g.offset);
  if (!m) return fail<Grant>(ENOMEM, m.status().message());
  return done(Grant{g.va, g.len, g.access, std::move(*m), g.first});
}

Call<Mapping> Context::peer_srq(uint32_t qp_num, uint64_t len) {
  auto a = ask(proto::Type::peer_srq, proto::Handle{qp_num}, proto::Type::done);
  if (!a.ok()) return fail<Mapping>(a.error.err, a.error.message);
  if (!a.value->fd) return fail<Mapping>(EIO, "vrdma router gave the peer's SRQ without its memory");
  auto m = Mapping::map(a.value->fd.get(), len);
  if (!m) return fail<Mapping>(ENOMEM, m.status().message());
  return done(std::move(*m));
}

Call<bool> Context::destroy_qp(uint32_t qp_num) {
  auto a = ask(proto::Type::destroy_qp, proto::Handle{qp_num}, proto::Type::done);
  if (!a.ok()) return fail<bool>(a.error.err, a.error.message);
  return done(true);
}

Call<std::string> Context::stats(proto::StatsFormat format) {
  auto a = ask(proto::Type::stats, proto::StatsAsk{uint32_t(format), 0}, proto::Type::stats_text);
  if (!a.ok()) return fail<std::string>(a.error.err, a.error.message);
  auto tail = a.value->msg.tail;
  return done(std::string(tail.begin(), tail.end()));
}

Call<std::array<uint8_t, 32>> Context::cm_sign(std::span<const uint8_t> bytes) {
  using Mac = std::array<uint8_t, 32>;
  proto::CmSign req;
  if (bytes.size() > sizeof req.bytes) return fail<Mac>(EINVAL, "vrdma_cm_sign: at most 256 bytes are signed");
  req.len = uint32_t(bytes.size());
  std::memcpy(req.bytes, bytes.data(), bytes.size());
  auto a = ask(proto::Type::cm_sign, req, proto::Type::cm_signed);
  if (!a.ok()) return fail<Mac>(a.error.err, a.error.message);
  Mac mac;
  std::memcpy(mac.data(), a.value->msg.as<proto::CmSigned>().mac, mac.size());
  return done(mac);
}

}  // namespace rb::vrdma
