#include "vrdma/router/link_guard.hh"

#include <dirent.h>
#include <fcntl.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <poll.h>
#include <linux/sockios.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "vrdma/router/sock_address.hh"
#include "vrdma/router/tcp_owners.hh"

namespace rb::vrdma {

constexpr int kLookMs = 1000;
int64_t monotonic_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return int64_t(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}
constexpr int64_t kReportNs = 10'000'000'000;
constexpr int64_t kVouchKeptNs = 60'000'000'000;  // a vouch for a connection not seen yet waits this long

// An end of a connection as the link names routers: an IPv4 one in its IPv4-mapped form.
std::pair<std::string, uint16_t> vouch_key(const proto::RouterAddress& a) {
  return {std::string(reinterpret_cast<const char*>(a.ip), sizeof a.ip), a.port};
}

struct LinkGuard::Conn {
  int fd = -1;
  uint64_t ino = 0;
  int64_t first_ns = 0;
  bool silent = false;    // nothing received yet
  bool accepted = false;  // on the --listen port (else one this router made)
  bool stuck = false;     // bytes waiting, and none read, for limits_.stuck_ns
  bool vouched = false;   // a router that proved the key said it is its own
  sockaddr_storage self{}, peer{};
};

Result<std::unique_ptr<LinkGuard>> LinkGuard::create(uint16_t port, LinkGuardLimits limits, Log log) {
  std::unique_ptr<LinkGuard> g(new LinkGuard(port, limits, std::move(log)));
  g->fd_dir_.reset(open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  g->null_.reset(open("/dev/null", O_RDONLY | O_CLOEXEC));
  g->slot_.reset(open("/dev/null", O_RDONLY | O_CLOEXEC));
  g->stop_.reset(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  g->changed_.reset(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!g->fd_dir_ || !g->null_ || !g->slot_ || !g->stop_ || !g->changed_)
    return Status(Errc::io, fmt::format("the --listen port's guard: {}", std::strerror(errno)));
  return g;
}

Status LinkGuard::start() {
  thread_ = std::thread([this] {
    pollfd p{stop_.get(), POLLIN, 0};
    for (int n; (n = poll(&p, 1, kLookMs)) == 0 || (n < 0 && errno == EINTR);) {
      int64_t now = monotonic_ns();
      report(sweep(now), now);
    }
  });
  return {};
}

LinkGuard::~LinkGuard() {
  if (thread_.joinable()) {
    uint64_t one = 1;
    (void)!write(stop_.get(), &one, sizeof one);
    thread_.join();
  }
}

// Whether `fd` is a TCP connection; what it is, in `out`. The slot holds a dup of it until the next
// look.
bool LinkGuard::look_at(int fd, int64_t now_ns, Conn& out) {
  if (fd == fd_dir_.get() || fd == slot_.get() || fd == null_.get() || fd == stop_.get() || fd == changed_.get())
    return false;
  if (dup3(fd, slot_.get(), O_CLOEXEC) < 0) return false;
  struct stat st{};
  if (fstat(slot_.get(), &st) != 0 || !S_ISSOCK(st.st_mode)) return false;
  socklen_t sl = sizeof out.self, pl = sizeof out.peer;
  if (getsockname(slot_.get(), reinterpret_cast<sockaddr*>(&out.self), &sl) != 0) return false;
  if (out.self.ss_family != AF_INET && out.self.ss_family != AF_INET6) return false;
  uint16_t local_port = out.self.ss_family == AF_INET ? reinterpret_cast<sockaddr_in&>(out.self).sin_port
                                                      : reinterpret_cast<sockaddr_in6&>(out.self).sin6_port;
  out.accepted = ntohs(local_port) == port_;
  if (getpeername(slot_.get(), reinterpret_cast<sockaddr*>(&out.peer), &pl) != 0) return false;  // a listener
  tcp_info ti{};
  socklen_t tl = sizeof ti;
  if (getsockopt(slot_.get(), IPPROTO_TCP, TCP_INFO, &ti, &tl) != 0) return false;
  Seen& seen = seen_[fd];
  if (seen.ino != st.st_ino) seen = {st.st_ino, now_ns};
  int unread = 0;
  if (ioctl(slot_.get(), SIOCINQ, &unread) != 0 || unread <= 0) unread = 0;
  // What the process has read so far: a busy link with fixed-size messages shows the same count
  // unread at every look, so what says "stuck" is that nothing more has been read.
  bool has_received = tl >= offsetof(tcp_info, tcpi_bytes_received) + sizeof ti.tcpi_bytes_received;
  uint64_t taken = has_received ? ti.tcpi_bytes_received - uint64_t(unread) : 0;
  if (!unread || taken != seen.taken) seen.taken = taken, seen.unread_since_ns = now_ns;
  out.stuck = unread > 0 && now_ns - seen.unread_since_ns >= limits_.stuck_ns;
  out.fd = fd;
  out.ino = st.st_ino;
  out.first_ns = seen.first_ns;
  // bytes_received came with Linux 4.1; before it, a connection counts as having spoken.
  out.silent = has_received && ti.tcpi_bytes_received == 0;
  if (out.accepted && !seen.vouched) seen.vouched = take_vouch(router_address_of(out.peer), now_ns);
  out.vouched = seen.vouched;
  return true;
}

void LinkGuard::vouch(const proto::RouterAddress& end, int64_t now_ns) {
  std::lock_guard lock(mu_);
  if (vouches_.size() >= kMaxVouches)
    std::erase_if(vouches_, [&](const auto& kv) { return now_ns - kv.second > kVouchKeptNs; });
  if (vouches_.size() < kMaxVouches) vouches_[vouch_key(end)] = now_ns;
}

// Whether a router vouched for the connection from `end`; the vouch is spent on it.
bool LinkGuard::take_vouch(const proto::RouterAddress& end, int64_t now_ns) {
  std::lock_guard lock(mu_);
  auto it = vouches_.find(vouch_key(end));
  if (it == vouches_.end()) return false;
  bool fresh = now_ns - it->second <= kVouchKeptNs;
  vouches_.erase(it);
  return fresh;
}

std::vector<MadeConn> LinkGuard::made() const {
  std::lock_guard lock(mu_);
  return made_;
}

void LinkGuard::note_made(std::vector<MadeConn> made) {
  std::sort(made.begin(), made.end(), [](const MadeConn& a, const MadeConn& b) {
    return std::memcmp(&a, &b, sizeof a) < 0;
  });
  std::lock_guard lock(mu_);
  if (made == made_) return;
  made_ = std::move(made);
  uint64_t one = 1;
  (void)!write(changed_.get(), &one, sizeof one);
}

// Shuts down the connection at `fd` if it is still the one seen (`ino`).
bool LinkGuard::shut(int fd, uint64_t ino) {
  struct stat st{};
  if (dup3(fd, slot_.get(), O_CLOEXEC) < 0 || fstat(slot_.get(), &st) != 0 || st.st_ino != ino) return false;
  return shutdown(slot_.get(), SHUT_RDWR) == 0;
}

LinkGuard::Swept LinkGuard::sweep(int64_t now_ns) {
  Swept s;
  std::vector<Conn> conns;
  std::map<int, Seen> still;
  alignas(8) char buf[8192];
  lseek(fd_dir_.get(), 0, SEEK_SET);
  for (ssize_t n; (n = getdents64(fd_dir_.get(), buf, sizeof buf)) > 0;) {
    for (ssize_t at = 0; at < n;) {
      auto* d = reinterpret_cast<dirent64*>(buf + at);
      at += d->d_reclen;
      if (d->d_name[0] < '0' || d->d_name[0] > '9') continue;
      Conn c;
      if (look_at(std::atoi(d->d_name), now_ns, c)) {
        still[c.fd] = seen_[c.fd];
        conns.push_back(c);
      }
    }
  }
  dup3(null_.get(), slot_.get(), O_CLOEXEC);  // the slot holds no connection open between looks
  seen_ = std::move(still);
  std::vector<MadeConn> made;
  s.connections = std::count_if(conns.begin(), conns.end(), [](const Conn& c) { return c.accepted && !c.stuck; });
  std::erase_if(conns, [&](const Conn& c) {
    if (c.stuck) s.stuck += shut(c.fd, c.ino);
    bool late = !c.stuck && c.silent && now_ns - c.first_ns >= limits_.silent_ns;
    if (late && shut(c.fd, c.ino)) ++(c.accepted ? s.silent : s.made_silent);
    bool unproven = !c.stuck && !late && c.accepted && limits_.prove_ns && !c.vouched &&
                    now_ns - c.first_ns >= limits_.prove_ns;
    if (unproven) s.unproven += shut(c.fd, c.ino);
    if (!c.accepted && !c.stuck && !late) made.push_back({router_address_of(c.self), router_address_of(c.peer)});
    return c.stuck || late || unproven || !c.accepted || c.vouched;  // the cap is for unvouched accepted ones
  });
  note_made(std::move(made));
  shut_over_cap(conns, s);
  dup3(null_.get(), slot_.get(), O_CLOEXEC);
  return s;
}

// Per host: a peer of this host is known by its uid (its address says nothing), others by
// address. Without a key the newest past the cap go (what holds a place keeps it); with one, the
// oldest (they had their time to be vouched for, a router's new connection has not).
void LinkGuard::shut_over_cap(std::vector<Conn>& conns, Swept& s) {
  if (conns.size() <= limits_.per_host) return;  // no host can be past the cap
  std::map<std::string, std::vector<const Conn*>> by_host;
  for (const Conn& c : conns) {
    std::optional<uint32_t> uid = local_peer_uid(c.peer, c.self);
    std::string peer = proc_net_text(c.peer);
    by_host[uid ? fmt::format("uid {}", *uid) : peer.substr(0, peer.find(':'))].push_back(&c);
  }
  bool oldest_go = limits_.prove_ns != 0;
  for (auto& [host, list] : by_host) {
    if (list.size() <= limits_.per_host) continue;
    std::sort(list.begin(), list.end(), [&](const Conn* a, const Conn* b) {  // seen in one look: by inode, made in turn
      auto age = [](const Conn* c) { return std::pair(c->first_ns, c->ino); };
      return oldest_go ? age(a) > age(b) : age(a) < age(b);
    });
    for (size_t i = limits_.per_host; i < list.size(); ++i) s.over_cap += shut(list[i]->fd, list[i]->ino);
  }
}

void LinkGuard::report(const Swept& s, int64_t now_ns) {
  unreported_.silent += s.silent;
  unreported_.over_cap += s.over_cap;
  unreported_.made_silent += s.made_silent;
  unreported_.stuck += s.stuck;
  unreported_.unproven += s.unproven;
  if (!unreported_.silent && !unreported_.over_cap && !unreported_.made_silent && !unreported_.stuck &&
      !unreported_.unproven)
    return;
  if (now_ns - reported_ns_ < kReportNs) return;
  log_(fmt::format("--listen port {}: shut down {} connections that sent nothing for {} s, {} no router "
                   "vouched for within {} s and {} past max_link_conns_per_host ({}); {} remain; of this router's "
                   "own connections, {} that got nothing back; {} whose bytes sat unread for {} s",
                   port_, unreported_.silent, limits_.silent_ns / 1'000'000'000, unreported_.unproven,
                   limits_.prove_ns / 1'000'000'000, unreported_.over_cap, limits_.per_host,
                   s.connections - s.silent - s.unproven - s.over_cap, unreported_.made_silent, unreported_.stuck,
                   limits_.stuck_ns / 1'000'000'000));
  unreported_ = {};
  reported_ns_ = now_ns;
}

}  // namespace rb::vrdma
