#include "vrdma/router/router.hh"

#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/signalfd.h>

#include <csignal>
#include <sys/socket.h>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include <fmt/format.h>

#include "vrdma/ipc/seqpacket.hh"
#include "vrdma/router/data_path.hh"

namespace rb::vrdma {
namespace {

// A connection accepted on --listen that no router vouched for within this is shut (a router
// vouches within about 2 s of making one: its guard's look, a link message, ours).
constexpr int64_t kVouchBoundNs = 10'000'000'000;

Status sys_error(const char* what) { return {Errc::io, fmt::format("{}: {}", what, std::strerror(errno))}; }

}  // namespace

Result<std::unique_ptr<Router>> Router::create(RouterOptions opts) {
  signal(SIGPIPE, SIG_IGN);  // a write to a client's closed pipe or socket is an error, not the router's end
  std::unique_ptr<Router> r(new Router(std::move(opts)));
  if (getrandom(&r->router_id_, sizeof r->router_id_, 0) != sizeof r->router_id_) return sys_error("getrandom");
  r->router_id_ |= 1;  // never 0: a client that names no router id means another host's
  auto l = ipc::listen_at(r->opts_.socket_path);
  if (!l) return l.status();
  r->listen_ = std::move(*l);
  r->descriptors_gated_ = ipc::refuses_descriptors(r->listen_.get());
  r->epoll_.reset(epoll_create1(EPOLL_CLOEXEC));
  if (!r->epoll_) return sys_error("epoll_create1");
  epoll_event ev{EPOLLIN, {.u64 = kListenTag}};
  if (epoll_ctl(r->epoll_.get(), EPOLL_CTL_ADD, r->listen_.get(), &ev) < 0) return sys_error("epoll_ctl");
  r->auth_.set_keys(r->opts_.link_keys);
  r->set_cm_key();
  if (r->opts_.listen.port) {
    auto f = open_fabric(r->opts_.fabric, r->opts_.listen, r->auth_);
    if (!f) return f.status();
    r->fabric_ = std::move(*f);
    epoll_event fe{EPOLLIN, {.u64 = kFabricTag}};
    if (epoll_ctl(r->epoll_.get(), EPOLL_CTL_ADD, r->fabric_->wait_fd(), &fe) < 0) return sys_error("epoll_ctl");
    LinkGuardLimits limits{.per_host = r->opts_.tenants.router().max_link_conns_per_host};
    if (r->auth_.authenticated()) limits.prove_ns = kVouchBoundNs;  // without a key, no router can vouch
    auto g = LinkGuard::create(r->opts_.listen.port, limits, [router = r.get()](const std::string& line) { router->log(line); });
    if (!g) return g.status();
    r->link_guard_ = std::move(*g);
    epoll_event ge{EPOLLIN, {.u64 = kGuardTag}};
    if (epoll_ctl(r->epoll_.get(), EPOLL_CTL_ADD, r->link_guard_->changed_fd(), &ge) < 0) return sys_error("epoll_ctl");
    if (Status st = r->link_guard_->start(); !st) return st;
  }
  if (!r->opts_.metrics_host.empty()) {
    auto m = MetricsServer::open(r->opts_.metrics_host, r->opts_.metrics_port);
    if (!m) return m.status();
    r->metrics_ = std::move(*m);
    epoll_event me{EPOLLIN, {.u64 = kMetricsTag}};
    if (epoll_ctl(r->epoll_.get(), EPOLL_CTL_ADD, r->metrics_->wake_fd(), &me) < 0) return sys_error("epoll_ctl");
  }
  return r;
}

Status Router::start_data_threads() {
  if (opts_.threads <= 1) return {};
  stop_data_.reset(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!stop_data_) return sys_error("eventfd");
  for (int i = 0; i < opts_.threads; ++i) {
    auto d = std::make_unique<DataThread>();
    d->kick.reset(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    d->epoll.reset(epoll_create1(EPOLL_CLOEXEC));
    if (!d->kick || !d->epoll) return sys_error("data thread eventfd/epoll");
    epoll_event k{EPOLLIN, {.u64 = 0}}, st{EPOLLIN, {.u64 = 1}};
    if (epoll_ctl(d->epoll.get(), EPOLL_CTL_ADD, d->kick.get(), &k) < 0 ||
        epoll_ctl(d->epoll.get(), EPOLL_CTL_ADD, stop_data_.get(), &st) < 0)
      return sys_error("epoll_ctl");
    data_.push_back(std::move(d));
  }
  for (auto& d : data_) d->thread = std::thread([this, p = d.get()] { run_data(*p); });
  return {};
}

void Router::stop_data_threads() {
  stopping_.store(true);
  uint64_t one = 1;
  if (stop_data_) (void)!write(stop_data_.get(), &one, sizeof one);
  for (auto& d : data_)
    if (d->thread.joinable()) d->thread.join();
}


Router::~Router() {
  stop_data_threads();
  if (listen_) unlink(opts_.socket_path.c_str());
}

void Router::reload_link_keys() {
  if (opts_.link_key_file.empty()) return log("SIGHUP: no link_key file to reload");
  auto keys = load_link_keys(opts_.link_key_file);
  if (!keys) return log(fmt::format("SIGHUP: {}; the keys in use stay", keys.status().message()));
  auth_.set_keys(std::move(*keys));
  set_cm_key();
  log(fmt::format("SIGHUP: link keys reloaded from {}", opts_.link_key_file));
}

void Router::log(const std::string& line) const {
  if (!opts_.quiet) fmt::print(stderr, "vrdmad: {}\n", line);
}

// What the router serves, said once at start.
void Router::log_start() const {
  log(fmt::format("serving on {} ({}){}", opts_.socket_path,
                  opts_.tenants.from_config() ? fmt::format("{} tenants", opts_.tenants.configured().size())
                                              : "no [[tenant]] in a config: every uid its own tenant",
                  fabric_ ? fmt::format("; routers of other hosts reach it at {} over {}", proto::to_string(opts_.listen),
                                        fabric_->provider())
                          : ""));
  if (fabric_ && !auth_.authenticated())
    log(fmt::format("link messages are NOT authenticated (--insecure-link): any host that reaches {} can link to "
                    "this router and reach its tenants' QPs",
                    proto::to_string(opts_.listen)));
  if (!descriptors_gated_)
    log("this kernel cannot refuse descriptors on a connection not yet served (SO_PASSRIGHTS, Linux 6.16): a tenant "
        "whose closes are stuck can hold one of the router's descriptors with each connection it opens");
  if (metrics_) log(fmt::format("metrics at http://{}:{}/metrics", opts_.metrics_host.find(':') == std::string::npos
                                                                         ? opts_.metrics_host : "[" + opts_.metrics_host + "]",
                                 metrics_->port()));
}

Status Router::run(int stop_fd) {
  stop_fd_ = stop_fd;
  epoll_event ev{EPOLLIN, {.u64 = kStopTag}};
  if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, stop_fd, &ev) < 0) return sys_error("epoll_ctl");
  log_start();
  greet_peers();
  if (Status st = start_data_threads(); !st) return st;
  struct Stop {
    Router* r;
    ~Stop() { r->stop_data_threads(); }
  } stop{this};
  epoll_event evs[32];
  IdleSpin spin(kSpinRounds);
  // The control thread holds every data thread's mutex while it works, and lets go only to spin
  // or sleep: data threads read the tables it changes.
  std::vector<std::unique_lock<std::mutex>> held;
  for (auto& d : data_) held.emplace_back(d->mu, std::defer_lock);
  auto hold = [&](bool on) { hold_data_threads(held, on); };
  hold(true);
  auto idle_turn = [&] {
    if (routed_.empty()) return IdleSpin::Turn::park;
    hold(false);
    IdleSpin::Turn t = spin.turn();
    hold(true);
    return t;
  };
  while (true) {
    // With one thread it does both: control messages, and the router path's requests. It spins
    // (giving the core away each turn) while requests come, then parks in epoll_wait: clients
    // kick it through an eventfd after posting, so an idle router uses no CPU. Next to a process
    // that never yields it naps instead of yielding (see IdleSpin). A request that waits (its
    // tenant's tokens, a receive, room for its answer) is no reason to spin: it is looked at
    // again a millisecond later, so a throttled or stuck tenant costs the router its own work only.
    bool busy = false;
    bool moved = fabric_ && fabric_->poll(*this) > 0;
    bool fabric_moved = moved;
    busy = moved;
    if (fabric_ && fabric_->connection_events() != connection_events_) note_link_connections();
    moved = (!routed_.empty() && pump(routed_, routed_turns_, deferred_, busy)) || moved;
    if (!connects_.empty()) expire_connects();
    if (!probes_.empty() || !unproven_.empty()) expire_probes();
    if (!released_.empty()) sweep_released();
    drop_silent_clients();
    if (!accepting_ && now_ns() >= accept_again_ns_) resume_accepting();
    int64_t timeout_ns = 0;
    bool parked = false;
    IdleSpin::Turn turn = IdleSpin::Turn::again;
    if (busy) {
      spin.worked();
      hold(false);  // data threads get their turn while this one is busy too
      hold(true);
    } else if ((turn = idle_turn()) != IdleSpin::Turn::again) {
      set_parked(routed_, true);
      parked = true;
      bool later = deferred_ || (fabric_ && fabric_->posts_waiting());  // look again in a millisecond
      bool fabric_pending = fabric_ && !fabric_->try_wait();
      bool spin_for_fabric = fabric_ && !fabric_stuck(fabric_moved, fabric_pending) && fabric_pending;
      timeout_ns = work_waiting(routed_) || spin_for_fabric ? 0 : idle_sleep_ns(later, !connects_.empty() || !unproven_.empty(), turn);
      if (int64_t due = next_deadline_ns(); due >= 0 && (timeout_ns < 0 || due < timeout_ns)) timeout_ns = due;
      if (fabric_muted_ && (timeout_ns < 0 || timeout_ns > kMutedPollNs)) timeout_ns = kMutedPollNs;
    }
    if (timeout_ns) hold(false);
    int n = epoll_wait_ns(epoll_.get(), evs, 32, timeout_ns);
    if (timeout_ns) hold(true);
    if (parked) set_parked(routed_, false);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return sys_error("epoll_wait");
    for (int i = 0; i < n; ++i) {
      bool stop_now = false;
      if (Status st = handle_event(evs[i], stop_now); !st || stop_now) return st;
    }
  }
}

// What the fabric did with connections: refusals logged (a few a second at most), and the far
// ends of those it took, which proved the key, vouched for to the link guard at once.
void Router::note_link_connections() {
  connection_events_ = fabric_->connection_events();
  if (fabric_->connections_refused() != refusals_logged_) {
    refusals_logged_ = fabric_->connections_refused();
    log_limited("link refused", fabric_->last_refusal());
  }
  if (!link_guard_) return;
  for (const proto::RouterAddress& end : fabric_->take_accepted_ends()) link_guard_->vouch(end, now_ns());
}

// Takes (or lets go of) every data thread's mutex, saying so first: a data thread lets the
// control thread have it before taking it again (see DataThread).
void Router::hold_data_threads(std::vector<std::unique_lock<std::mutex>>& held, bool on) {
  for (size_t i = 0; i < held.size(); ++i) {
    if (!on) {
      held[i].unlock();
      continue;
    }
    data_[i]->control_waiting.fetch_add(1, std::memory_order_acq_rel);
    held[i].lock();
    data_[i]->control_waiting.fetch_sub(1, std::memory_order_acq_rel);
  }
}

// libfabric 1.17 can keep saying it has work (fi_trywait fails) while it has none to give: a frame
// it never consumes (a stranger's 16-byte one with a zero header size) keeps its socket readable,
// and once the link guard has shut that connection, libfabric keeps the closed socket, readable
// for ever, until the router restarts. Spinning on that cost a core; polling it every millisecond
// cost a thousand wake-ups a second for good. After kStuckTurns such turns in a row lasting
// kStuckNs at least (a link's handshake fails fi_trywait for 5-8 ms with nothing to give: every
// new link was taken for stuck), the fabric's fd is watched edge-triggered: the loop wakes when
// something new comes on any of the fabric's sockets (the stuck one changes no more), and looks
// every kMutedPollNs besides, until fi_trywait succeeds again.
bool Router::fabric_stuck(bool moved, bool pending) {
  if (pending && !moved && stuck_turns_ == 0) stuck_since_ns_ = now_ns();
  stuck_turns_ = pending && !moved ? stuck_turns_ + 1 : 0;
  if (!fabric_muted_ && stuck_turns_ >= kStuckTurns && now_ns() - stuck_since_ns_ >= kStuckNs) {
    epoll_event fe{EPOLLIN | EPOLLET, {.u64 = kFabricTag}};
    epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, fabric_->wait_fd(), &fe);
    fabric_muted_ = true;
    log_limited("link stuck", "link: the fabric says it has work and gives none (a frame it never takes): "
                              "waking for what is new on it only, until it stops");
  } else if (fabric_muted_ && !pending) {
    epoll_event fe{EPOLLIN, {.u64 = kFabricTag}};
    epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, fabric_->wait_fd(), &fe);
    fabric_muted_ = false;
  }
  return fabric_muted_;
}

Status Router::handle_event(const epoll_event& ev, bool& stop) {
  uint64_t tag = ev.data.u64;
  if (tag == kStopTag) {  // an eventfd (stop), or vrdmad's signalfd: SIGHUP reloads the link keys
    signalfd_siginfo si{};
    if (read(int(stop_fd_), &si, sizeof si) == ssize_t(sizeof si) && si.ssi_signo == SIGHUP) {
      reload_link_keys();
      return {};
    }
    stop = true;
    return {};
  }
  // A kick or the fabric's fd wakes the loop to look; only what it then moves counts as work
  // worth spinning for (a kick for a throttled QP is not).
  if (tag == kKickTag) return {};  // a QP's kick: edge-triggered, never read (see route_qp)
  if (tag == kFabricTag) return {};
  if (tag == kGuardTag) {  // the connections this router made changed: vouch for them
    vouch_for_made_connections();
    return {};
  }
  if (tag == kMetricsTag) {  // the metrics thread waits for the text of a scrape
    metrics_->answer([this](const MetricsAsk& ask) { return metrics_text(ask); });
    return {};
  }
  if (tag == kListenTag) return accept_clients();
  auto it = sessions_.find(uint32_t(tag));
  if (it == sessions_.end()) return {};
  if (ev.events & EPOLLIN) serve(it->second);
  else drop(uint32_t(tag));  // hang-up or error with nothing to read
  return {};
}

// A client has this long to say hello: a connection that says nothing holds a descriptor.
constexpr int64_t kHelloNs = 2'000'000'000;
// Out of descriptors, the listen socket leaves epoll for this long (else it is readable at once
// again, and the loop spins); a client that goes brings it back sooner.
constexpr int64_t kAcceptPauseNs = 100'000'000;

// Told why in one packet, then closed. When `read_first`, what it sent already (its hello,
// usually) is read first: a socket closed with unread input resets, and the client would see that
// instead of the reason. Where the kernel refuses descriptors until a connection is served, this
// one holds none: it is read and closed here, at once. Elsewhere its descriptors, and then the
// socket, go to the closer: a descriptor the kernel dropped here would close here, where a socket
// it passed with a long SO_LINGER would hold the loop.
void Router::refuse_connection(UniqueFd c, int64_t owner, int err, const std::string& why, bool read_first) {
  auto stray = [this, owner](UniqueFd fd) { closer_->close_later(std::move(fd), owner); };
  read_first = read_first || descriptors_gated_;
  for (int packets = 0; read_first && packets < 16; ++packets) {
    auto p = ipc::recv_packet(c.get(), proto::kMaxMessage, 0, stray);
    if (!p || p->bytes.empty()) break;
    closer_->close_later(std::move(p->fd), owner);
    closer_->close_later(std::move(p->fd2), owner);
  }
  proto::Error e;
  e.err = err;
  proto::put_text(e.message, sizeof e.message, why);
  (void)ipc::send_packet(c.get(), proto::encode(proto::Type::error, 0, e), -1, -1);
  if (!descriptors_gated_) closer_->close_later(std::move(c), owner);
}

// Whom the descriptors a uid passes count against: its tenant (a user's container uids are one
// owner, not 65,536 of them each with its own allowance), or the uid when it is in none.
int64_t Router::owner_of(uint32_t uid) const {
  auto t = opts_.tenants.of_uid(uid);
  if (!t) return uid;
  const auto& listed = opts_.tenants.configured();
  for (size_t i = 0; i < listed.size(); ++i)
    if (listed[i].name == t->name) return (int64_t(1) << 32) + int64_t(i);
  return t->uids.empty() ? uid : t->uids.front();  // every uid its own tenant ("uid-N", or its user's)
}

bool Router::stalled(uint32_t uid, int64_t owner) const { return uid != 0 && closer_->stalled(owner); }

std::string Router::stalled_text(uint32_t uid) const {
  return fmt::format("uid {}: {} or more descriptors its tenant passed wait in closes that have not returned (a file "
                     "on a stalled filesystem?); it is served again once they return", uid, FdCloser::kStalledAt);
}

Status Router::accept_clients() {
  while (accepting_) {
    UniqueFd c(accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!c) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ECONNABORTED) return {};
      if (errno == EMFILE || errno == ENFILE) {
        log_limited("emfile", "out of descriptors: new clients wait until one goes");
        epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, listen_.get(), nullptr);
        accepting_ = false;
        accept_again_ns_ = now_ns() + kAcceptPauseNs;
        return {};
      }
      return sys_error("accept4");
    }
    auto cred = ipc::peer_cred(c.get());
    if (!cred) {
      closer_->close_later(std::move(c));
      continue;
    }
    int64_t owner = owner_of(cred->uid);
    if (stalled(cred->uid, owner)) {
      // Not even its hello is read where it may carry descriptors: that would take in more.
      refuse_connection(std::move(c), owner, EAGAIN, stalled_text(cred->uid), false);
      log_limited(fmt::format("stalled {}", cred->uid),
                  fmt::format("uid {} (pid {}) refused: {}", cred->uid, cred->pid, stalled_text(cred->uid)));
      continue;
    }
    uint32_t& held = clients_of_uid_[cred->uid];
    if (held >= opts_.tenants.router().max_clients_per_uid) {
      refuse_connection(std::move(c), owner, EUSERS,
                        fmt::format("uid {} holds {} connections to this router, its max_clients_per_uid", cred->uid, held), true);
      log_limited(fmt::format("cap {}", cred->uid),
                  fmt::format("uid {} (pid {}) refused: {} connections, its max_clients_per_uid", cred->uid, cred->pid, held));
      continue;
    }
    if (descriptors_gated_ && !ipc::let_pass_descriptors(c.get(), true)) {
      closer_->close_later(std::move(c), owner);
      continue;
    }
    uint32_t id = next_id_++;
    epoll_event ev{EPOLLIN | EPOLLRDHUP, {.u64 = id}};
    if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, c.get(), &ev) < 0) return sys_error("epoll_ctl");
    ++held;
    Session& s = sessions_[id];
    s.sock = std::move(c);
    s.id = id;
    s.pid = cred->pid;
    s.uid = cred->uid;
    s.owner = owner;
    s.hello_by_ns = now_ns() + kHelloNs;
  }
  return {};
}

void Router::resume_accepting() {
  if (accepting_) return;
  epoll_event ev{EPOLLIN, {.u64 = kListenTag}};
  if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, listen_.get(), &ev) == 0) accepting_ = true;
  else accept_again_ns_ = now_ns() + kAcceptPauseNs;
}

void Router::drop_silent_clients() {
  int64_t now = now_ns();
  std::vector<uint32_t> late;
  for (const auto& [id, s] : sessions_)
    if (!s.welcomed && s.hello_by_ns && now >= s.hello_by_ns) late.push_back(id);
  for (uint32_t id : late) {
    const Session& s = sessions_.at(id);
    log_limited("silent", fmt::format("client {} (pid {}, uid {}) said no hello within {} s; disconnected", s.id, s.pid,
                                      s.uid, kHelloNs / 1'000'000'000));
    drop(id);
  }
}

int64_t Router::next_deadline_ns() const {
  int64_t now = now_ns(), due = -1;
  auto at = [&](int64_t t) {
    int64_t in = std::max<int64_t>(t - now, 0);
    if (due < 0 || in < due) due = in;
  };
  for (const auto& [id, s] : sessions_)
    if (!s.welcomed && s.hello_by_ns) at(s.hello_by_ns);
  if (!released_.empty()) at(released_.front().until_ns);
  if (!accepting_) at(accept_again_ns_);
  return due;
}

// Up to kLogBurst lines a second for each key; past that they are counted, and the next line
// that goes out says how many were left out.
constexpr int kLogBurst = 10;

void Router::log_limited(const std::string& key, const std::string& line) {
  if (log_limits_.size() > 1024 && !log_limits_.count(key)) log_limits_.clear();  // keys are bounded
  LogLimit& l = log_limits_[key];
  int64_t now = now_ns();
  if (now - l.since_ns >= 1'000'000'000) {
    l.since_ns = now;
    l.lines = 0;
  }
  if (l.lines >= kLogBurst) {
    ++l.left_out;
    return;
  }
  ++l.lines;
  log(l.left_out ? fmt::format("{} ({} more like it left out)", line, l.left_out) : line);
  l.left_out = 0;
}

void Router::serve(Session& s) {
  if (stalled(s.uid, s.owner)) {  // nothing more is taken from it: what it queued goes with the socket, unread
    log_limited(fmt::format("stalled {}", s.uid), fmt::format("client {} (pid {}, uid {}) dropped: {}", s.id, s.pid, s.uid,
                                                              stalled_text(s.uid)));
    drop(s.id);
    return;
  }
  auto stray = [this, owner = s.owner](UniqueFd fd) { closer_->close_later(std::move(fd), owner); };
  auto p = ipc::recv_packet(s.sock.get(), proto::kMaxMessage, 0, stray);
  if (!p || p->bytes.empty()) {
    drop(s.id);
    return;
  }
  struct Leftovers {  // whatever the handler did not take is closed off this thread
    ipc::Packet& p;
    FdCloser& c;
    int64_t owner;
    ~Leftovers() {
      c.close_later(std::move(p.fd), owner);
      c.close_later(std::move(p.fd2), owner);
    }
  } leftovers{*p, *closer_, s.owner};
  proto::Parsed parsed = proto::parse(p->bytes);
  if (!parsed.msg) {
    // A client that speaks something else is not served further: nothing it sends can be trusted.
    log_limited(fmt::format("garbage {}", s.uid),
                fmt::format("client {} (pid {}, uid {}): {}; disconnected", s.id, s.pid, s.uid, parsed.error));
    if (s.welcomed && !s.observer) ++usage_[s.tenant.name].errors;
    drop(s.id);
    return;
  }
  // Out of descriptors, the kernel took what came with a well-formed request away: a session
  // dropped for it (seen while a hostile uid filled the router's table) cost a tenant its QPs.
  if (p->fds_lost) return answer(s, error(s, *parsed.msg, EMFILE, "the router is out of descriptors: try again"));
  if (auto why = wrong_fds(*parsed.msg, *p)) return answer(s, error(s, *parsed.msg, EINVAL, *why));
  answer(s, handle(s, *parsed.msg, *p));
}

std::optional<std::string> Router::wrong_fds(const proto::Message& m, const ipc::Packet& p) const {
  using proto::Type;
  FdKind want = FdKind::none, want2 = FdKind::none;
  bool optional = false, optional2 = false;
  switch (m.type()) {
    case Type::reg_mr: want = FdKind::memfd, optional = true; break;  // the client's own buffer, or none
    case Type::create_qp: want = FdKind::memfd, want2 = FdKind::eventfd, optional2 = true; break;
    case Type::send_doorbell: want = FdKind::eventfd; break;
    case Type::create_srq: want = FdKind::memfd; break;
    default: break;
  }
  FdKind got = fd_kind(p.fd.get()), got2 = fd_kind(p.fd2.get());
  if ((got != want && !(optional && got == FdKind::none)) || (got2 != want2 && !(optional2 && got2 == FdKind::none)))
    return fmt::format("{} came with {}{}; it takes {}{}", proto::type_name(m.type()), fd_kind_name(got),
                       p.fd2 ? fmt::format(" and {}", fd_kind_name(got2)) : "", fd_kind_name(want),
                       want2 != FdKind::none ? fmt::format(" and {}", fd_kind_name(want2)) : "");
  return std::nullopt;
}

Router::Reply Router::handle(Session& s, const proto::Message& m, ipc::Packet& p) {
  using proto::Type;
  if (m.type() == Type::hello) return hello(s, m);
  if (!s.welcomed) return error(s, m, EPROTO, "the first message must be hello");
  if (s.observer && m.type() != Type::stats)
    return error(s, m, EPERM, fmt::format("uid {} is in no tenant of the config: as an admin it may read statistics, "
                                          "nothing more (add it to a tenant's uids to use vrdma)", s.uid));
  if (!s.observer) ++usage_[s.tenant.name].requests;
  switch (m.type()) {
    case Type::alloc_pd: return alloc_pd(s, m);
    case Type::dealloc_pd: return dealloc_pd(s, m);
    case Type::reg_mr: return reg_mr(s, m, p.fd);
    case Type::dereg_mr: return dereg_mr(s, m);
    case Type::create_qp: return create_qp(s, m, p.fd, p.fd2);
    case Type::connect_qp: return connect_qp(s, m);
    case Type::grant: return grant(s, m);
    case Type::destroy_qp: return destroy_qp(s, m);
    case Type::send_doorbell: return send_doorbell(s, m, p.fd);
    case Type::create_srq: return create_srq(s, m, p.fd);
    case Type::destroy_srq: return destroy_srq(s, m);
    case Type::create_ah: return create_ah(s, m);
    case Type::destroy_ah: return destroy_ah(s, m);
    case Type::peer_srq: return peer_srq(s, m);
    case Type::cm_sign: return cm_sign(s, m);
    case Type::stats: {
      // A tenant sees its own row; root and the config's admin_uids see every tenant and the links.
      // The answer travels in one packet: what does not fit is counted, not shown.
      constexpr size_t kRoom = proto::kMaxMessage - sizeof(proto::Header) - sizeof(proto::StatsText) - 32;
      bool admin = opts_.tenants.router().is_admin(s.uid);
      StatsSnapshot snap = snapshot(admin ? nullptr : &s.tenant.name);
      bool json = m.as<proto::StatsAsk>().format == uint32_t(proto::StatsFormat::json);
      std::string text = json ? stats_json(snap, kRoom) : stats_table(snap, kRoom);
      proto::StatsText st{uint32_t(text.size())};
      return {proto::encode(Type::stats_text, m.h.seq, st, {reinterpret_cast<const uint8_t*>(text.data()), text.size()})};
    }
    default: return error(s, m, EPROTO, fmt::format("{} is not a request", proto::type_name(m.type())));
  }
}

void Router::drop(uint32_t id) {
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return;
  Session& s = it->second;
  if (s.welcomed && !s.observer) {
    TenantUsage& u = usage_[s.tenant.name];
    --u.clients;
    u.pds -= s.pds.size();
    u.mrs -= s.mrs.size();
    for (uint32_t pd : s.pds) keys_in_use_.erase(pd);
    u.qps -= s.qps.size();
    u.ahs -= s.ahs.size();
    revoke_grants_of(s);
    for (uint32_t q : std::set<uint32_t>(s.qps)) release_qp(q);
    for (uint32_t n : s.srqs) {
      u.ring_bytes -= srqs_.at(n)->len;
      closer_->drop_later(srqs_.at(n));
      srqs_.erase(n);
    }
    u.srqs -= s.srqs.size();
    for (auto& [lkey, mr] : s.mrs) {
      u.reg_bytes -= mr.len;
      keys_in_use_.erase(mr.lkey);
      keys_in_use_.erase(mr.rkey);
      release_region(s.tenant.name, mr);
    }
    log_limited(fmt::format("gone {}", s.uid), fmt::format("client {} (pid {}, tenant {}) gone: released {} PDs, {} MRs", s.id, s.pid, s.tenant.name,
                    s.pds.size(), s.mrs.size()));
  }
  epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, s.sock.get(), nullptr);
  closer_->close_later(std::move(s.sock), s.owner);  // descriptors still queued in it close with it
  if (auto c = clients_of_uid_.find(s.uid); c != clients_of_uid_.end() && --c->second == 0) clients_of_uid_.erase(c);
  sessions_.erase(it);
  resume_accepting();  // a descriptor came free
}

uint32_t Router::fresh_key(uint32_t mask) {
  while (true) {
    uint32_t k = 0;
    if (getrandom(&k, sizeof k, 0) != sizeof k) continue;
    k &= mask;
    if (k != 0 && keys_in_use_.insert(k).second) return k;
  }
}

// A scrape's text: a connection from another host sees all (the operator bound the endpoint off
// loopback); one from this host as its uid may, like vrdmactl stats.
std::string Router::metrics_text(const MetricsAsk& ask) const {
  if (ask.unknown) return "# this host's scraper's socket has no owner in /proc/net/tcp{,6}: no tenant is shown\n";
  if (!ask.local || opts_.tenants.router().is_admin(ask.uid)) return stats_prometheus(snapshot(nullptr));
  auto t = opts_.tenants.of_uid(ask.uid);
  if (!t) return "# uid " + std::to_string(ask.uid) + " is in no tenant of this router\n";
  return stats_prometheus(snapshot(&t->name));
}

// The figures a client may see: its tenant's, or (an admin) every tenant's, the links and the router's.
StatsSnapshot Router::snapshot(const std::string* only) const {
  StatsSnapshot out;
  std::map<std::string, uint64_t> queued;  // requests waiting in each tenant's router-path send rings
  for (const auto& [num, q] : qps_)
    if (q.router_path && q.view) queued[sessions_.at(q.owner).tenant.name] += q.view->sends.waiting();
  for (const auto& [name, u] : usage_) {
    if (only && name != *only) continue;
    out.tenants.push_back({name, u.clients, u.pds, u.mrs, u.qps, u.reg_bytes, u.ring_bytes, u.requests, u.errors.load(),
                           u.refused_clients, u.ops_moved.load(), u.bytes_moved.load(), u.throttled_ns.load() / 1000000,
                           queued.count(name) ? queued.at(name) : 0});
  }
  out.admin = !only;
  if (only && out.tenants.empty()) out.tenants.push_back({*only});  // its own row, before it has any figure
  if (only) return out;
  out.links = links_figures();
  // The router's own CPU since it started: the cost of being the NIC.
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  out.router.cpu_s = double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
  out.router.up_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  out.router.routed_qps = routed_.size();
  out.router.link_ops = on_links_->ops;
  out.router.link_bytes = on_links_->bytes;
  out.router.link_bytes_peak = on_links_->peak_bytes;
  out.router.link_refused = fabric_ ? fabric_->connections_refused() : 0;
  for (const auto& d : data_) {
    out.router.routed_qps += d->qps.size();
    out.router.data_thread_turns.push_back(d->turns.load());
  }
  return out;
}

}  // namespace rb::vrdma
