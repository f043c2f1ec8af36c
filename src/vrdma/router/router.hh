#pragma once
// vrdmad's control plane: clients connect to a Unix socket, are identified by SO_PEERCRED and
// mapped to tenants, and own protection domains and memory regions the router creates (a memfd
// per region, passed to the owner only, never a name in /dev/shm). A client that goes away has
// everything it owned released; its tenant's usage shrinks with it.
#include <sys/epoll.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <mutex>

#include "core/courteous_yield.hh"
#include "core/shm.hh"
#include "core/status.hh"
#include "core/unique_fd.hh"
#include "vrdma/ipc/seqpacket.hh"
#include "vrdma/proto/control.hh"
#include "vrdma/proto/copy.hh"
#include "vrdma/proto/qp_view.hh"
#include "vrdma/proto/link.hh"
#include "vrdma/router/link_guard.hh"
#include "vrdma/router/link_use.hh"
#include "vrdma/router/metrics.hh"
#include "vrdma/router/stats.hh"
#include "vrdma/proto/qp_layout.hh"
#include "vrdma/router/client_fds.hh"
#include "vrdma/router/fabric.hh"
#include "vrdma/router/host_share.hh"
#include "vrdma/router/pace.hh"
#include "vrdma/router/link_auth.hh"
#include "vrdma/router/qp_numbers.hh"
#include "vrdma/router/tenants.hh"

namespace rb::vrdma {

struct RouterOptions {
  std::string socket_path;
  Tenants tenants;
  bool quiet = false;
  // Threads moving router-path bytes: 1, the control thread does it too; N > 1, N threads of
  // their own share the same-host QPs and the control thread keeps the rest.
  int threads = 1;
  // Routers of other hosts: where this one listens (port 0: it does not) and over what.
  proto::RouterAddress listen;
  std::string fabric = "tcp";
  std::vector<proto::RouterAddress> peers;  // --peer: linked at start (others are learned from QP addresses)
  // The cluster's link keys (the config's [router] link_key): with --listen, link messages are
  // taken only when they prove one. Empty only with --insecure-link.
  std::vector<LinkKey32> link_keys;
  std::string link_key_file;  // reloaded on SIGHUP
  // --metrics: where Prometheus' text format is served (empty host: not served).
  std::string metrics_host;
  uint16_t metrics_port = 0;
};

// Another host's router, as this one knows it.
struct PeerLink {
  proto::RouterAddress at;
  uint64_t router_id = 0;  // 0 until it has spoken
  bool configured = false, unreachable = false;
  std::chrono::steady_clock::time_point heard;
};

// Where a region's bytes are, for the router: its mapping (the router path copies through it) and
// its registration with the routers' fabric (with --listen). Shared: an RMA in flight holds it,
// so a region released meanwhile stays mapped until the fabric has let go of its bytes.
struct RegionBacking {
  SharedMemory mem;
  std::unique_ptr<FabricMr> fabric;
};

struct MemoryRegionEntry {
  uint32_t pd = 0, access = 0, lkey = 0, rkey = 0;
  uint64_t len = 0, va = 0;  // va: where the owner mapped it (verbs addresses are the owner's)
  std::shared_ptr<RegionBacking> backing;
  uint32_t first = 0;  // how far into the mapping (its first page) the region starts
  uint8_t* data() const { return backing->mem.data() + first; }
  const SharedMemory& mem() const { return backing->mem; }
  FabricMr* fabric() const { return backing->fabric.get(); }
};

// Token buckets for an ops rate and a bytes rate, refilled as time passes; each holds 50 ms of
// its rate. A request goes when both have tokens, and takes its share (a bucket may go below 0:
// a large request is paid for by the wait after it).
struct TokenBuckets {
  double ops = 0, bytes = 0;
  int64_t refill_ns = 0;
  bool ready(uint64_t rate_ops, uint64_t rate_bytes, int64_t now);
  void take(uint64_t nbytes) {
    ops -= 1;
    bytes -= double(nbytes);
  }
};

// A WRITE or READ longer than a piece goes as pieces, posted in turns while its tenant's share of
// the links allows: the fabric's queue to a peer is first come, first served, and one 2 GiB RMA
// in it held another tenant's requests past the op bound.
struct CutRma {
  std::vector<LocalPiece> local;  // the owner's memory (pinned for as long as the request lives)
  uint64_t at = 0, key = 0;       // the peer router's registration of the target
  uint64_t total = 0, posted = 0;
  int in_flight = 0;
  bool read = false, failed = false;
  bool all_posted() const { return posted == total || failed; }
};

struct RemoteOut {  // a request of ours in flight to the peer's router
  uint64_t wr_id = 0;
  uint32_t seq = 0;
  uint8_t opcode = 0;
  bool signaled = false, done = false;
  int status = 0;
  uint32_t byte_len = 0;
  uint32_t result_lkey = 0;  // atomics: where the old value goes (looked up again on arrival)
  uint64_t result_addr = 0;
  int64_t posted_ns = 0;
  LinkCharge on_link;  // its bytes, while it is in flight
  bool one_sided = false;    // a WRITE or READ, to the peer's region of
  uint32_t rkey = 0;         // this rkey, which its router has since revoked if
  bool key_revoked = false;  // set: it fails, landed or not (link_revoke)
  std::unique_ptr<CutRma> cut;  // a WRITE or READ that goes in pieces
  bool peer_lost = false;  // the peer's router knew no such QP: fails once the peer timeout has passed
  // A pulled op's payload: registrations of just its bytes, readable by the target's router, and
  // what keeps them mapped, until the op is answered.
  std::vector<std::shared_ptr<FabricMr>> pulls;
  std::vector<std::shared_ptr<const void>> pins;
  // Ends it with a failed completion (no bytes moved).
  void fail(int wc_status) {
    done = true;
    status = wc_status;
    byte_len = 0;
  }
};
struct RemoteIn {  // a peer's op for our QP, carried out in arrival order
  proto::LinkOp op;
  std::vector<uint8_t> payload;
  uint64_t req = 0;
  proto::RouterAddress from;
  int64_t since_ns = 0;
  int reads_left = -1;  // -1: not started; pulls of its payload in flight
  // The pulls still to post, a piece at a time (see CutRma): where they come from and go.
  std::vector<LocalPiece> into;
  uint32_t pull_src = 0, pull_dst = 0;
  uint64_t pull_soff = 0, pull_doff = 0, pull_left = 0;
  bool pulling() const { return pull_left && !read_failed; }
  bool read_failed = false;
  proto::Arrival arrival;  // what it announces when done (SEND, write-imm)
  bool uses_recv = false;
  int status = 0;
  uint32_t byte_len = 0;
  uint64_t old = 0;  // atomics
};
struct RemoteQp {
  proto::RouterAddress peer_at;
  uint64_t peer_router = 0;
  std::deque<RemoteOut> out;
  uint32_t next_seq = 1;
  static constexpr size_t kKeysCached = 256;
  std::map<uint32_t, proto::LinkKey> keys;  // the peer's rkeys we asked about, at most kKeysCached
  uint32_t key_asked = 0;                   // an rkey whose answer we wait for
  int64_t key_asked_ns = 0;
  // Initiator: stamped on each op (proto::LinkOp::epoch), the next one when a request fails after
  // an op went out in it (epoch_sent), 0 skipped; 0 always for a QP that stays ready after a
  // failure. Only so does the target, which forgets a failed epoch once another's op arrives,
  // never see an epoch come round to one it still holds failed: 65,534 failures that never
  // left this router brought it round, and the next SEND was flushed (probe 17).
  uint16_t epoch = 1;
  bool epoch_sent = false;
  std::deque<RemoteIn> in;
  uint16_t failed_epoch = 0;  // target: an op of this epoch failed, so the later ones of it flush
};

// A shared receive queue: its ring is mapped here, and the control thread is its one consumer
// (every QP made with it, and its peer, stay on that thread).
struct SrqEntry {
  uint32_t num = 0, pd = 0, owner = 0;
  UniqueFd fd;  // its memory, for its QPs' peers on the direct path
  std::optional<Mapping> mem;
  std::optional<SpscRing<proto::RecvEntry>> ring;  // several consume it: every one claims
  uint32_t users = 0;  // QPs made with it
  uint64_t len = 0;    // its memory, counted in its tenant's ring_bytes
};

struct QpEntry {
  uint32_t num = 0, pd = 0, owner = 0;  // owner: the session
  uint32_t peer = 0;                    // the QP it connected to; 0 before, and after that QP has gone
  bool peer_gone = false;               // it was connected, and its peer has gone (never reconnects)
  UniqueFd fd;                          // its shared memory (the owner's memfd), for the peer
  UniqueFd doorbell;                    // an eventfd of the owner's recv CQ (may be absent)
  UniqueFd send_doorbell;               // its send CQ's, where that is another CQ
  UniqueFd kick;                        // router path: its owner writes it after a post (see route_qp)
  Mapping mem;                          // mapped here to mark it broken or bump its grant epoch
  uint64_t len = 0;
  uint32_t flags = 0;         // proto::QpFlags as the owner set them at creation
  uint32_t qkey = 0;          // a datagram QP's Q_Key, as its owner last made it ready
  bool router_path = false;   // the router moves this pair's bytes
  std::optional<QpView> view;  // router path: its four rings, as the router uses them
  int64_t rnr_since_ns = 0;   // router path: a SEND at the head has waited for a receive since
  int64_t throttled_since_ns = 0;  // router path: the head has waited for its tenant's tokens since
  int64_t peer_lost_ns = 0;        // router path: when we learned the peer had gone (see peer_lost)
  bool waiting = false;            // router path: its head request waits (tokens, a receive, room): no reason to spin
  uint64_t head_done = 0;          // router path: bytes of its head request moved in earlier turns
  std::optional<proto::RecvEntry> claimed_recv;  // router path: the SRQ receive its head SEND fills
  TokenBuckets tokens;             // router path: the tenant's per-QP rates
  int thread = -1;                 // router path: the data thread that moves it (-1: the control thread)
  std::unique_ptr<RemoteQp> remote;  // its peer is on another host
  std::shared_ptr<SrqEntry> srq;     // where its receives come from, when not its own ring
  // Whom its descriptors count against when they close (its session's Session::owner): each is
  // an eventfd its owner has a copy of, and may watch from an epoll set whose lock it holds.
  int64_t fd_owner = FdCloser::kNoOwner;
  proto::QpHeader* header() const { return reinterpret_cast<proto::QpHeader*>(mem.data()); }
};

struct Session {
  UniqueFd sock;
  uint32_t id = 0, pid = 0, uid = 0;
  int64_t owner = 0;  // what the descriptors it passes count against (Router::owner_of)
  bool welcomed = false;
  // An admin uid (root, or the config's admin_uids) in no tenant: it may read statistics and do
  // nothing else, and it counts in no tenant's usage.
  bool observer = false;
  int64_t hello_by_ns = 0;  // dropped unless welcomed by then
  Tenant tenant;
  std::set<uint32_t> pds, qps, srqs;
  // Address handles: where its datagram QPs' SENDs that name one go (another host's router).
  static constexpr size_t kMaxAhs = 4096;
  std::map<uint32_t, proto::RouterAddress> ahs;
  uint32_t next_ah = 1;
  std::map<uint32_t, MemoryRegionEntry> mrs;  // by lkey
  // Each region's rkey to its lkey: the data path finds a region by rkey in one lookup (a walk
  // over 4,096 regions per request once held every tenant's turn 250 ms).
  std::unordered_map<uint32_t, uint32_t> lkey_of_rkey;
  const MemoryRegionEntry* region_by_rkey(uint32_t rkey) const {
    auto k = lkey_of_rkey.find(rkey);
    if (k == lkey_of_rkey.end()) return nullptr;
    auto it = mrs.find(k->second);
    return it == mrs.end() ? nullptr : &it->second;
  }
};

struct TenantUsage {
  uint64_t clients = 0, pds = 0, mrs = 0, qps = 0, srqs = 0, reg_bytes = 0;
  // Regions released but still held for the fabric's grace period: they count against the
  // tenant's max_reg_bytes and max_mrs until they go, so churn cannot hold more than the limits.
  uint64_t held_mrs = 0, held_bytes = 0;
  // QP and SRQ memory (the owner's memfds, which the router reads and so pulls in): it counts
  // against max_reg_bytes too, or 1,024 QPs of 64 MiB each are memory no limit sees.
  uint64_t ring_bytes = 0;
  uint64_t requests = 0, refused_clients = 0;
  // Address handles of all its clients: each is bounded (Session::kMaxAhs), and so is the tenant,
  // or a tenant of many uids (a user's containers) holds as many as its connections allow.
  static constexpr uint64_t kMaxAhs = 65536;
  uint64_t ahs = 0;
  // Its requests in flight to other hosts' routers, and their bytes (the control thread's): its
  // QPs wait past its share (link_use.hh), so no tenant fills the link every tenant shares.
  std::shared_ptr<LinkUse> on_links = std::make_shared<LinkUse>();
  // QP and SRQ numbers are never issued twice, so making them is paced: a tenant makes up to
  // kQpBurst at once, then kQpRate a second (and all tenants together as QpNumbers paces them).
  static constexpr double kQpBurst = 4096, kQpRate = 1000;
  Pace qp_pace{kQpBurst, kQpRate};
  Pace qp_share{0, 0};  // its part of the router-wide pace (QpNumbers::take)
  // An rkey another host's router refuses costs both routers a round trip and moves nothing. A
  // tenant naming made-up rkeys on a QP that stays usable after errors kept both routers waking
  // 11,000 times a second, and another tenant's ib_write_lat across them went from 73 us typical
  // to 1.4 ms (probe 20). So refusals are paced: past kKeyRefusalBurst its next question about
  // an rkey not yet known waits for this pace (remote_path.cc). A program that names its peer's
  // real keys is never refused, so never waits.
  static constexpr double kKeyRefusalBurst = 64, kKeyRefusalRate = 100;
  Pace key_refusals{kKeyRefusalBurst, kKeyRefusalRate};
  // Counted by data threads too.
  std::atomic<uint64_t> errors{0}, ops_moved{0}, bytes_moved{0}, throttled_ns{0};
  std::mutex tokens_mu;
  TokenBuckets tokens;  // rate_ops, rate_bytes
};

// --threads N > 1: a thread moving a shard of the same-host router-path QPs.
// What one tenant may still move in this turn of a loop (kTenantTurnBytes, kTenantTurnOps), and
// the router's time it may still take (kTenantTurnNs).
struct TurnShare {
  TenantUsage* usage = nullptr;  // the tenant's
  uint64_t bytes = 0;
  int ops = 0;
  int64_t ns = 0;
  bool spent() const { return !bytes || ops <= 0 || ns <= 0; }
};

// A loop's turns over its QPs: where the next starts, and the tenants' shares (kept to reuse).
struct Turns {
  size_t rotor = 0;
  std::vector<TurnShare> shares;
};

struct DataThread {
  std::mutex mu;  // held while it moves; the control thread holds every one while it changes state
  // The control thread is waiting for `mu`: the data thread lets it have it before taking it
  // again (the mutex is not fair: a data thread that took it back at once kept the control
  // thread, and every client's control call, waiting for seconds).
  std::atomic<int> control_waiting{0};
  Turns turns_over_qps;
  std::vector<uint32_t> qps;
  UniqueFd kick, epoll;  // the control thread kicks it; it parks on epoll (kick, stop, its QPs' kicks)
  static constexpr uint64_t kQpKickTag = 2;
  std::atomic<uint64_t> turns{0};  // turns that moved something
  std::thread thread;
};

class Router final : private LinkSink {
 public:
  static Result<std::unique_ptr<Router>> create(RouterOptions opts);
  ~Router();
  // Serves until `stop_fd` (an eventfd or a signalfd) becomes readable.
  Status run(int stop_fd);
  // The port --metrics serves on (0: not served).
  uint16_t metrics_port() const { return metrics_ ? metrics_->port() : 0; }
  // Every tenant's row and the links, or (only) one tenant's.
  StatsSnapshot snapshot(const std::string* only = nullptr) const;
  std::string metrics_text(const MetricsAsk& ask) const;
  void log_start() const;

 private:
  explicit Router(RouterOptions opts) : opts_(std::move(opts)) {}
  // What woke the control thread's epoll (a session's events carry its id, below 2^32).
  static constexpr uint64_t kListenTag = 0, kStopTag = 1ull << 62, kKickTag = 1ull << 61, kFabricTag = 1ull << 60,
                            kMetricsTag = 1ull << 59, kGuardTag = 1ull << 58;
  Status accept_clients();
  Status handle_event(const epoll_event& ev, bool& stop);
  void serve(Session& s);
  void drop(uint32_t id);
  void refuse_connection(UniqueFd c, int64_t owner, int err, const std::string& why, bool read_first);
  int64_t owner_of(uint32_t uid) const;
  bool stalled(uint32_t uid, int64_t owner) const;  // closes of what its tenant passed do not return
  std::string stalled_text(uint32_t uid) const;
  // One request; the reply (or error) is sent by the caller. Returns the reply bytes and the
  // descriptor to pass along (or -1).
  struct Reply {
    std::vector<uint8_t> bytes;
    int fd = -1, fd2 = -1;
    bool later = false;  // the answer comes when another router has answered
  };
  Reply handle(Session& s, const proto::Message& m, ipc::Packet& p);
  // The descriptors that came with `m` are of the kinds its type takes (else an error why).
  std::optional<std::string> wrong_fds(const proto::Message& m, const ipc::Packet& p) const;
  Reply hello(Session& s, const proto::Message& m);
  Reply welcome_observer(Session& s, const proto::Message& m);
  Reply alloc_pd(Session& s, const proto::Message& m);
  Reply dealloc_pd(Session& s, const proto::Message& m);
  Reply reg_mr(Session& s, const proto::Message& m, UniqueFd& theirs);
  Reply dereg_mr(Session& s, const proto::Message& m);
  Reply create_qp(Session& s, const proto::Message& m, UniqueFd& mem, UniqueFd& doorbell);
  Reply send_doorbell(Session& s, const proto::Message& m, UniqueFd& fd);
  Reply connect_qp(Session& s, const proto::Message& m);
  Reply ud_ready(Session& s, const proto::Message& m, QpEntry& q, uint32_t qkey);
  Reply grant(Session& s, const proto::Message& m);
  Reply destroy_qp(Session& s, const proto::Message& m);
  Reply create_srq(Session& s, const proto::Message& m, UniqueFd& mem);
  Reply destroy_srq(Session& s, const proto::Message& m);
  Reply create_ah(Session& s, const proto::Message& m);
  Reply peer_srq(Session& s, const proto::Message& m);
  Reply destroy_ah(Session& s, const proto::Message& m);
  // Why `s` may make no more address handles (its own or its tenant's are at their bound); empty
  // when it may. add_ah makes one.
  std::string no_room_for_ah(const Session& s);
  uint32_t add_ah(Session& s, const proto::RouterAddress& at);
  // The QPs connected to any QP of `s`: their holders map s's regions (direct path).
  void revoke_grants_of(const Session& s);
  void release_qp(uint32_t num);
  // A region's entry is going: its registration closes now unless an RMA of ours holds it,
  // its mapping stays a grace period (released_).
  void release_region(const std::string& tenant, MemoryRegionEntry& mr);
  void sweep_released();
  void blank_for_peers(const std::shared_ptr<RegionBacking>& b);
  void keep_pulls_a_while(RemoteOut& o);
  // When the loop must look again at the latest (hello deadlines, the released regions' grace),
  // ns from now; -1: nothing is due.
  int64_t next_deadline_ns() const;
  void drop_silent_clients();
  // A log line that may repeat: at most a few a second for `key`, with a count of those left out.
  void log_limited(const std::string& key, const std::string& line);
  void resume_accepting();
  void ring(QpEntry& q);
  // Rings a doorbell; one its client made blocking is dropped (see ring_doorbell).
  void ring_bell(UniqueFd& bell, int64_t owner);
  // Router path (data_path.cc): runs the requests of router-path QPs; true when any moved.
  // `busy`: some QP moved and has more it could move now (worth spinning for).
  // One turn over `list`, starting one further each turn; each tenant moves at most its share.
  bool pump(const std::vector<uint32_t>& list, Turns& turns, bool& deferred, bool& busy);
  bool pump_qp(QpEntry& q, bool& deferred, TurnShare& share);
  // A datagram QP's SENDs, each to the QP it names (datagram_path.cc).
  bool pump_datagrams(QpEntry& q, bool& deferred, TurnShare& share);
  // The datagram QP a SEND of `from` may reach: `num`, datagram, ready, of the same tenant, with
  // that Q_Key; else null (the datagram is dropped).
  QpEntry* datagram_target(const std::string& tenant, uint32_t num, uint32_t qkey);
  // A datagram to another host's router, as a link message; false: it went nowhere (dropped).
  // It goes only while the link is not busy (see link_busy). Every message to that router waits
  // behind the datagrams in flight there: 64 of 4 KiB are 256 KiB, under 4 ms at the 72k a
  // second a loaded router takes in (256 held a flood's 1 MiB ahead of other tenants), and
  // still more than a router sends in the round trip of their completions.
  static constexpr size_t kDatagramsInFlight = 64, kSendsInFlight = 2048;
  static constexpr int64_t kFailedLatelyNs = 10'000'000'000;
  bool link_busy(const proto::RouterAddress& to) const;
  bool failed_lately(const proto::RouterAddress& to) const;  // a message to it failed in the last 10 s
  std::unordered_map<std::string, int64_t> send_failed_ns_;  // by router address; at most kMaxPeers
  bool send_datagram(const Session& me, const QpEntry& q, const proto::SendEntry& e, const proto::RouterAddress& to,
                     const Piece* msg, int n, uint64_t len);
  // The peer QP `q` may reach, from the router's own records: q's peer, connected back to q (or
  // to nothing yet), of the same tenant; null when there is none (any more).
  QpEntry* connected_peer(QpEntry& q);
  bool fail_lost_peer(QpEntry& q, bool& deferred);
  void run_data(DataThread& d);
  Status start_data_threads();
  void hold_data_threads(std::vector<std::unique_lock<std::mutex>>& held, bool on);
  void stop_data_threads();
  // How long the loop may sleep: -1 with nothing deferred, else until the next tokens.
  void set_parked(const std::vector<uint32_t>& list, bool parked);
  bool work_waiting(const std::vector<uint32_t>& list) const;
  // Rings an owner asleep on its CQ: after an arrival (recv CQ) or an answer (send CQ).
  void wake_recv(QpEntry& q);
  void wake_send(QpEntry& q);
  Reply error(Session& s, const proto::Message& m, int err, const std::string& why);
  bool route_qp(QpEntry& q, uint32_t peer);  // false: out of descriptors

  // QPs across hosts (link_control.cc: connect, keys, revocation; remote_path.cc: requests).
  // A client's request that waits on another router: a QP's connect (sent: asked of that
  // router; not yet: its address has not proven the key yet), or an address handle (made once
  // its router has proven the key).
  struct PendingConnect {
    enum Kind : uint8_t { connect, address_handle } kind = connect;
    bool sent = false;
    uint32_t session = 0, seq = 0, qp = 0, peer_qp = 0;
    uint64_t peer_router = 0;
    proto::RouterAddress peer_at;
    std::chrono::steady_clock::time_point deadline;
  };
  Reply connect_remote(Session& s, const proto::Message& m, proto::ConnectQp req);
  bool send_connect(uint64_t id, PendingConnect& pc, const std::string& tenant);
  void expire_connects();

  // Which routers a tenant's requests may go to (link_reach.cc): ones inside [router]
  // link_networks that have proven the cluster's key; an address not yet heard from is greeted
  // first (a probe), a few at a time.
  enum class Reach { ready, probing, refused };
  struct Probe {
    proto::RouterAddress at;
    std::string tenant;              // whose probe it is (counted against kMaxProbesPerTenant)
    std::set<std::string> tenants;   // every tenant waiting on it
    std::chrono::steady_clock::time_point deadline;
  };
  static constexpr auto kProofLapse = std::chrono::seconds(5);
  static constexpr size_t kMaxProbes = 16, kMaxProbesPerTenant = 4;
  std::map<std::string, Probe> probes_;                        // by address
  std::unordered_map<std::string, int64_t> probe_failed_ns_;  // by "tenant address"; at most kMaxPeers
  std::deque<proto::RouterAddress> unproven_;  // for the fabric to forget; at most kMaxPeers
  Reach reach(const Session& s, const proto::RouterAddress& at, int* err, std::string* why);
  bool proven(const proto::RouterAddress& at) const;
  void on_proven(const proto::RouterAddress& at);  // a probe answered: what waited on it goes
  void expire_probes();
  void on_message(std::span<const uint8_t> bytes) override;
  void on_rma(uint64_t cookie, bool ok) override;
  void on_send_failed(const proto::RouterAddress& to) override;
  bool link_send(const proto::RouterAddress& to, proto::LinkType t, uint64_t req, std::span<const uint8_t> body,
                 std::span<const uint8_t> tail = {});
  template <class T>
  bool link_send(const proto::RouterAddress& to, proto::LinkType t, uint64_t req, const T& body,
                 std::span<const uint8_t> tail = {}) {
    return link_send(to, t, req, {reinterpret_cast<const uint8_t*>(&body), sizeof body}, tail);
  }
  void link_connect(const proto::LinkMessage& m);
  void link_connected(const proto::LinkMessage& m);
  void link_key_ask(const proto::LinkMessage& m);
  void link_key(const proto::LinkMessage& m);
  void link_op(const proto::LinkMessage& m);
  void link_op_reply(const proto::LinkMessage& m);
  void link_revoke(const proto::LinkMessage& m);
  void link_qp_gone(const proto::LinkMessage& m);
  void link_datagram(const proto::LinkMessage& m);
  void link_hello(const proto::LinkMessage& m);
  void link_conn_proof(const proto::LinkMessage& m);
  Reply cm_sign(Session& s, const proto::Message& m);
  void set_cm_key();
  void vouch_for_made_connections();
  void greet_peers();
  std::vector<LinkFigures> links_figures() const;
  QpEntry* remote_peer_of(uint32_t qp, uint64_t from_router, uint32_t from_qp);
  void tell_peers_revoked(const Session& s, uint32_t rkey);
  void break_qp(QpEntry& q);
  void peer_lost(QpEntry& q);
  bool pump_remote(QpEntry& q);
  static constexpr int kWaitingForKey = -1;
  bool post_pieces(const RemoteQp& r, RemoteOut& o, uint64_t cookie);
  void pull_more(QpEntry& q, RemoteIn& in);
  int post_one_sided(QpEntry& q, const proto::SendEntry& e, std::span<const LocalPiece> pieces, uint64_t total,
                     RemoteOut& o, uint64_t cookie);
  bool post_remote(QpEntry& q, const Session& me, proto::SendEntry& e, RemoteOut& o);
  bool register_pulls(std::span<const LocalPiece> local, RemoteOut& o, proto::LinkPiece* pull);
  bool retire_remote(QpEntry& q, TenantUsage& u);
  bool serve_inbound(QpEntry& q);
  bool start_inbound(QpEntry& q, RemoteIn& in);
  void finish_inbound(QpEntry& q, RemoteIn& in);
  void answer(Session& s, const Reply& r);
  // Random (getrandom) within `mask`, never 0, never one in use: keys are not guessable.
  uint32_t fresh_key(uint32_t mask = ~0u);
  void log(const std::string& line) const;

  // Declared first, destroyed last: what closes a client's descriptors outlives them all.
  std::unique_ptr<FdCloser> closer_ = std::make_unique<FdCloser>();
  RouterOptions opts_;
  UniqueFd listen_, epoll_;
  // Before the sessions and the released regions: their registrations close while it is open.
  std::unique_ptr<Fabric> fabric_;  // to the routers of other hosts (with --listen)
  std::unique_ptr<MetricsServer> metrics_;  // --metrics
  std::unique_ptr<LinkGuard> link_guard_;   // with --listen; stops before the fabric closes
  LinkKey32 cm_key_{};                      // signs tenants' rdma_cm messages (cm_sign.cc)
  // The grace a released region's mapping gets while the routers of other hosts might still reach
  // it: a peer's RMA that passed the key check before the revocation reached it lands well within
  // this (its router gives up on an op after 3 s). Without a fabric nothing outside this process
  // reaches a region through the router, and it goes at once.
  static constexpr int64_t kReleaseGraceNs = 5'000'000'000;
  // Regions released while the fabric might still reach them (a peer's RMA that passed the key
  // check before the revocation), and pieces a peer may still pull: kept until the deadline (ns).
  struct Released {
    int64_t until_ns = 0;
    std::string tenant;
    uint64_t bytes = 0;
    std::shared_ptr<RegionBacking> backing;  // a region; or (none) an op's pulled pieces:
    std::vector<std::shared_ptr<FabricMr>> pulls;
    std::vector<std::shared_ptr<const void>> pins;
    LinkCharge on_link;  // what the peer's router may still pull of them, on its tenant's share
  };
  std::deque<Released> released_;
  std::map<uint32_t, Session> sessions_;
  std::map<std::string, TenantUsage> usage_;
  std::shared_ptr<LinkUse> on_links_ = std::make_shared<LinkUse>();  // every tenant's together
  HostShare host_share_ = HostShare::of_this_process();  // read after vrdmad raised its limits
  // Whether the tenant of `u` may take `more` of the router's mappings and descriptors.
  bool host_allows(const TenantUsage& u, const HostCost& more, std::string* why) const;
  bool memory_allowed(const Session& s, const TenantUsage& u, uint64_t len, const char* what, std::string* why);
  std::set<uint32_t> keys_in_use_;
  QpNumbers qp_numbers_;             // QP and SRQ numbers: never one issued before
  // A QP or SRQ number for a tenant, paced per tenant and router-wide; 0, with `err` (errno)
  // and `why`, when there is none to give now.
  uint32_t issue_number(const Session& s, TenantUsage& u, const char* what, int& err, std::string& why);
  std::map<uint32_t, QpEntry> qps_;  // every QP, by number
  std::map<uint32_t, uint32_t> clients_of_uid_;  // connections held, by uid (max_clients_per_uid)
  bool accepting_ = true;             // false while out of descriptors: the listen socket is off epoll
  // The kernel refuses descriptors on a connection until the router serves it (SO_PASSRIGHTS): a
  // connection it refuses holds none, and closes at once, never behind its tenant's stuck closes.
  bool descriptors_gated_ = false;
  int64_t accept_again_ns_ = 0;
  struct LogLimit {
    int64_t since_ns = 0;  // this second's start
    int lines = 0;         // lines out in it
    uint64_t left_out = 0;
  };
  std::map<std::string, LogLimit> log_limits_;
  std::map<uint32_t, std::shared_ptr<SrqEntry>> srqs_;  // every SRQ, by number
  std::vector<uint32_t> routed_;     // the QPs on the router path
  Turns routed_turns_;
  bool deferred_ = false;            // a request waits for tokens (or a receive)
  std::vector<std::unique_ptr<DataThread>> data_;
  std::atomic<bool> stopping_{false};
  UniqueFd stop_data_;               // an eventfd every data thread's epoll holds
  size_t next_thread_ = 0;
  std::map<uint64_t, PendingConnect> connects_;  // by link request number
  // A fabric that keeps failing fi_trywait with nothing to give (router.cc, fabric_stuck).
  static constexpr int kStuckTurns = 4096;
  static constexpr int64_t kStuckNs = 100'000'000;
  static constexpr int64_t kMutedPollNs = 10'000'000;
  int stuck_turns_ = 0;
  int64_t stuck_since_ns_ = 0;
  bool fabric_muted_ = false;
  bool fabric_stuck(bool moved, bool pending);
  uint64_t connection_events_ = 0;  // the fabric's connection_events(), as last looked at
  size_t refusals_logged_ = 0;      // the fabric's refused connections, as last logged
  void note_link_connections();
  std::map<std::string, PeerLink> peers_;          // by address; at most kMaxPeers
  static constexpr size_t kMaxPeers = 1024;
  LinkAuth auth_;
  void note_peer(const proto::LinkMessage& m);
 public:
  // SIGHUP: the link keys again from their file (a key rotation); the old ones stay on error.
  void reload_link_keys();
 private:
  uint64_t next_req_ = 1;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  uint64_t router_id_ = 0;
  uint32_t next_id_ = 1;
  int stop_fd_ = -1;
};

}  // namespace rb::vrdma
