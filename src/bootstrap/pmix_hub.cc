#include "bootstrap/pmix_hub.hh"

#include <pmix.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <map>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "bootstrap/mailroom.hh"

namespace rb::bootstrap {
namespace {

using Clock = std::chrono::steady_clock;
constexpr const char* kKey = "rdmabench.control";  // "host ip port token data-ip|-", one per rank
constexpr uint32_t kHelloMagic = 0x58504252;       // "RBPX"
constexpr size_t kHeader = 8;                      // tag, length
// A frame's body is capped by the channel; the frame adds its kind byte.
constexpr uint32_t kMaxFrame = kMaxFrameBytes + 64;

Status pmix_status(pmix_status_t rc, const char* what) {
  return {Errc::io, fmt::format("{}: {}", what, PMIx_Error_string(rc))};
}

struct Where {
  std::string host, ip;  // ip: where its control listener is reached
  std::string data_ip;   // its data-path address; empty: the transport's default
  uint16_t port = 0;
  uint64_t token = 0;
};

struct Hello {
  uint32_t magic, rank;
  uint64_t token;  // the token the target published: proves the caller is of this job
};

// One connection: ours to a peer (we only write) or a peer's to us (we only read).
struct Conn {
  Channel ch;  // owns the descriptor
  int rank = -1;
  std::vector<uint8_t> buf;  // outbound: not yet written; inbound: not yet parsed
  bool dead = false;
};

void append(std::vector<uint8_t>& b, const void* p, size_t n) {
  auto* c = static_cast<const uint8_t*>(p);
  b.insert(b.end(), c, c + n);
}

class PmixWire {
 public:
  PmixWire(Mailroom& room, Listener& listener, std::vector<Where> where, uint64_t token, double timeout_s)
      : room_(room), listener_(listener), where_(std::move(where)), token_(token), timeout_s_(timeout_s) {}

  void run() {
    auto idle_since = Clock::now();
    while (true) {
      auto idle = Clock::now() - idle_since;
      auto nap = idle < std::chrono::milliseconds(20) ? std::chrono::microseconds(200) : std::chrono::microseconds(2000);
      auto fresh = room_.take_queued(nap);
      bool stopping = room_.stopping();
      bool busy = !fresh.empty();
      for (auto& o : fresh) enqueue(o);
      busy |= pump();
      if (busy) idle_since = Clock::now();
      bool pending = false;
      for (auto& [r, c] : out_) pending |= !c.dead && !c.buf.empty();
      if (stopping && (!pending || Clock::now() - idle_since > std::chrono::seconds(5))) return;
    }
  }

 private:
  void enqueue(Outgoing& o) {
    auto it = out_.find(o.peer);
    if (it == out_.end()) {
      const Where& w = where_[size_t(o.peer)];
      auto ch = Channel::connect({w.ip, w.port}, timeout_s_);
      if (!ch) {
        room_.fail_peer(o.peer, fmt::format("rank {} ({}) cannot be reached at {}:{}: {}", o.peer, w.host, w.ip, w.port,
                                            ch.status().message()));
        return;
      }
      it = out_.emplace(o.peer, Conn{std::move(*ch), o.peer}).first;
      Hello h{kHelloMagic, uint32_t(room_.rank()), w.token};
      append(it->second.buf, &h, sizeof h);
    }
    Conn& c = it->second;
    if (c.dead) return;
    uint32_t head[2] = {uint32_t(o.tag), uint32_t(o.data.size())};
    append(c.buf, head, sizeof head);
    append(c.buf, o.data.data(), o.data.size());
  }

  // Writes what waits, accepts new connections, reads and files what arrived. True: it moved bytes.
  bool pump() {
    std::vector<pollfd> fds{{listener_.fd(), POLLIN, 0}};
    std::vector<Conn*> conns{nullptr};
    for (auto& [r, c] : out_)
      if (!c.dead && !c.buf.empty()) fds.push_back({c.ch.fd(), POLLOUT, 0}), conns.push_back(&c);
    for (auto& c : in_)
      if (!c.dead) fds.push_back({c.ch.fd(), POLLIN, 0}), conns.push_back(&c);
    if (::poll(fds.data(), fds.size(), 0) <= 0) return false;
    bool moved = false;
    for (size_t i = 1; i < fds.size(); ++i) {
      if (!fds[i].revents) continue;
      moved = true;
      if (fds[i].events & POLLOUT) write_some(*conns[i]);
      else read_some(*conns[i]);
    }
    std::erase_if(in_, [](const Conn& c) { return c.dead; });
    // Last: it grows in_, which `conns` points into.
    if (fds[0].revents & POLLIN) moved |= accept_all();
    return moved;
  }

  bool accept_all() {
    bool any = false;
    while (true) {
      auto ch = listener_.accept(0);
      if (!ch || !ch->is_open()) return any;
      in_.push_back(Conn{std::move(*ch)});
      any = true;
    }
  }

  void write_some(Conn& c) {
    ssize_t n = ::send(c.ch.fd(), c.buf.data(), c.buf.size(), MSG_NOSIGNAL);
    if (n > 0) c.buf.erase(c.buf.begin(), c.buf.begin() + n);
    if (n < 0 && errno != EAGAIN && errno != EINTR) {
      c.dead = true;
      const Where& w = where_[size_t(c.rank)];
      room_.fail_peer(c.rank, fmt::format("rank {} ({}) is gone: {}", c.rank, w.host, strerror(errno)));
    }
  }

  void read_some(Conn& c) {
    uint8_t chunk[64 * 1024];
    ssize_t n = ::recv(c.ch.fd(), chunk, sizeof chunk, 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
      c.dead = true;  // the peer closed: its links time out, as over MPI
      return;
    }
    if (n > 0) append(c.buf, chunk, size_t(n));
    parse(c);
  }

  // Files every whole frame; a stranger (no hello with our token) or an oversized frame ends the
  // connection, so a process outside the job cannot inject or bloat anything.
  void parse(Conn& c) {
    size_t at = 0;
    if (c.rank < 0) {
      if (c.buf.size() < sizeof(Hello)) return;
      Hello h;
      std::memcpy(&h, c.buf.data(), sizeof h);
      if (h.magic != kHelloMagic || h.token != token_ || h.rank >= uint32_t(room_.size())) {
        c.dead = true;
        return;
      }
      c.rank = int(h.rank);
      at = sizeof h;
    }
    while (c.buf.size() - at >= kHeader) {
      uint32_t head[2];
      std::memcpy(head, c.buf.data() + at, sizeof head);
      if (head[1] > kMaxFrame) {
        c.dead = true;
        return;
      }
      if (c.buf.size() - at - kHeader < head[1]) break;
      auto* p = c.buf.data() + at + kHeader;
      room_.inbox(c.rank, int(head[0]))->push(Frame(p, p + head[1]));
      at += kHeader + head[1];
    }
    c.buf.erase(c.buf.begin(), c.buf.begin() + long(at));
  }

  Mailroom& room_;
  Listener& listener_;
  std::vector<Where> where_;
  uint64_t token_;
  double timeout_s_;
  std::map<int, Conn> out_;
  std::vector<Conn> in_;
};

class PmixHub final : public Hub {
 public:
  explicit PmixHub(pmix_proc_t me) : me_(me) {}  // PMIx is up: the destructor finalizes it
  ~PmixHub() override {
    if (thread_.joinable()) {
      room_->stop();
      thread_.join();
    }
    PMIx_Finalize(nullptr, 0);
  }

  Status exchange(const std::string& data_ip, double timeout_s);
  int rank() const override { return room_->rank(); }
  int size() const override { return room_->size(); }
  const std::string& host_of(int r) const override { return room_->host_of(r); }
  const std::string& data_ip_of(int r) const override { return room_->ip_of(r); }
  Channel link(int peer, int send_tag, int recv_tag) override { return mail_link(room_, peer, send_tag, recv_tag); }
  const char* kind() const override { return "PMIx"; }

 private:
  Result<uint32_t> job_size();
  Status publish(const Where& mine, double timeout_s);
  Result<Where> lookup(uint32_t rank);

  pmix_proc_t me_;
  std::optional<Listener> listener_;
  std::shared_ptr<Mailroom> room_;
  std::thread thread_;
};

Result<uint32_t> PmixHub::job_size() {
  pmix_proc_t job;
  PMIX_LOAD_PROCID(&job, me_.nspace, PMIX_RANK_WILDCARD);
  pmix_value_t* v = nullptr;
  pmix_status_t rc = PMIx_Get(&job, PMIX_JOB_SIZE, nullptr, 0, &v);
  if (rc != PMIX_SUCCESS) return pmix_status(rc, "PMIx_Get(job size)");
  uint32_t n = v->type == PMIX_UINT32 ? v->data.uint32 : 0;
  PMIX_VALUE_RELEASE(v);
  if (n == 0) return Status(Errc::io, "PMIx_Get(job size): not a count");
  return n;
}

Status PmixHub::publish(const Where& mine, double timeout_s) {
  std::string text = fmt::format("{} {} {} {} {}", mine.host, mine.ip, mine.port, mine.token,
                                 mine.data_ip.empty() ? "-" : mine.data_ip);
  pmix_value_t v;
  PMIX_VALUE_LOAD(&v, text.c_str(), PMIX_STRING);
  pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, kKey, &v);
  PMIX_VALUE_DESTRUCT(&v);
  if (rc != PMIX_SUCCESS) return pmix_status(rc, "PMIx_Put");
  if (rc = PMIx_Commit(); rc != PMIX_SUCCESS) return pmix_status(rc, "PMIx_Commit");
  pmix_info_t info[2];
  bool collect = true;
  int seconds = std::max(1, int(timeout_s));
  PMIX_INFO_LOAD(&info[0], PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
  PMIX_INFO_LOAD(&info[1], PMIX_TIMEOUT, &seconds, PMIX_INT);
  rc = PMIx_Fence(nullptr, 0, info, 2);
  PMIX_INFO_DESTRUCT(&info[0]);
  PMIX_INFO_DESTRUCT(&info[1]);
  if (rc != PMIX_SUCCESS)
    return Status(Errc::timeout, fmt::format("PMIx_Fence: {} (not every rank of the job started within {:g} s, --timeout)",
                                             PMIx_Error_string(rc), timeout_s));
  return {};
}

Result<Where> PmixHub::lookup(uint32_t rank) {
  pmix_proc_t p;
  PMIX_LOAD_PROCID(&p, me_.nspace, rank);
  pmix_value_t* v = nullptr;
  pmix_status_t rc = PMIx_Get(&p, kKey, nullptr, 0, &v);
  if (rc != PMIX_SUCCESS) return pmix_status(rc, "PMIx_Get(a rank's control address)");
  Where w;
  char host[256] = {}, ip[256] = {}, data[64] = {};
  unsigned port = 0;
  unsigned long long token = 0;
  bool ok = v->type == PMIX_STRING && v->data.string &&
            std::sscanf(v->data.string, "%255s %255s %u %llu %63s", host, ip, &port, &token, data) == 5 && port > 0 && port < 65536;
  PMIX_VALUE_RELEASE(v);
  if (!ok) return Status(Errc::io, fmt::format("PMIx: rank {} published a control address that does not parse", rank));
  w.host = host;
  w.ip = ip;
  w.port = uint16_t(port);
  w.token = token;
  w.data_ip = std::strcmp(data, "-") == 0 ? "" : data;
  return w;
}

Status PmixHub::exchange(const std::string& data_ip, double timeout_s) {
  auto n = job_size();
  if (!n) return n.status();
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  // Listen where the data path is, so control and data share the network the user named; with
  // no data address, on every address, published by host name.
  auto l = Listener::listen({data_ip.empty() ? "0.0.0.0" : data_ip, 0});
  if (!l) return l.status();
  listener_.emplace(std::move(*l));
  Where mine{name, data_ip.empty() ? name : data_ip, data_ip, listener_->port(), 0};
  if (getrandom(&mine.token, sizeof mine.token, 0) != sizeof mine.token) return Status(Errc::io, "getrandom failed");
  if (Status s = publish(mine, timeout_s); !s) return s;
  std::vector<Where> where;
  std::vector<std::string> hosts, ips;
  for (uint32_t r = 0; r < *n; ++r) {
    auto w = r == me_.rank ? Result<Where>(mine) : lookup(r);
    if (!w) return w.status();
    hosts.push_back(w->host);
    ips.push_back(w->data_ip);
    where.push_back(std::move(*w));
  }
  room_ = std::make_shared<Mailroom>(int(me_.rank), std::move(hosts), std::move(ips));
  thread_ = std::thread([r = room_.get(), l = &*listener_, w = std::move(where), t = mine.token, timeout_s]() mutable {
    PmixWire(*r, *l, std::move(w), t, timeout_s).run();
  });
  return {};
}

}  // namespace

Result<std::unique_ptr<Hub>> start_pmix_hub(const std::string& data_ip, double timeout_s) {
  pmix_proc_t me;
  pmix_status_t rc = PMIx_Init(&me, nullptr, 0);
  if (rc != PMIX_SUCCESS)
    return Status(Errc::io, fmt::format("PMIx_Init: {} (the launcher's PMIx server cannot be reached)", PMIx_Error_string(rc)));
  auto hub = std::make_unique<PmixHub>(me);
  if (Status s = hub->exchange(data_ip, timeout_s); !s) return s;
  return Result<std::unique_ptr<Hub>>(std::move(hub));
}

}  // namespace rb::bootstrap
