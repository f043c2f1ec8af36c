#pragma once
// vrdmad's control plane: clients connect to a Unix socket, are identified by SO_PEERCRED and
// mapped to tenants, and own protection domains and memory regions the router creates (a memfd
// per region, passed to the owner only, never a name in /dev/shm). A client that goes away has
// everything it owned released; its tenant's usage shrinks with it.
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "core/shm.hh"
#include "core/status.hh"
#include "core/unique_fd.hh"
#include "vrdma/ipc/seqpacket.hh"
#include "vrdma/proto/control.hh"
#include "vrdma/lib/qp_view.hh"
#include "vrdma/proto/qp_layout.hh"
#include "vrdma/router/tenants.hh"

namespace rb::vrdma {

struct RouterOptions {
  std::string socket_path;
  Tenants tenants;
  bool quiet = false;
};

struct MemoryRegionEntry {
  uint32_t pd = 0, access = 0, lkey = 0, rkey = 0;
  uint64_t len = 0, va = 0;  // va: where the owner mapped it (verbs addresses are the owner's)
  SharedMemory mem;  // the router keeps a mapping: the router path copies through it
};

struct QpEntry {
  uint32_t num = 0, pd = 0, owner = 0;  // owner: the session
  uint32_t peer = 0;                    // the QP it connected to, 0 before
  UniqueFd fd;                          // its shared memory (the owner's memfd), for the peer
  UniqueFd doorbell;                    // an eventfd of the owner's recv CQ (may be absent)
  Mapping mem;                          // mapped here to mark it broken or bump its grant epoch
  uint64_t len = 0;
  uint32_t flags = 0;         // proto::QpFlags as the owner set them at creation
  bool router_path = false;   // the router moves this pair's bytes
  std::optional<QpView> view;  // router path: its four rings, as the router uses them
  int64_t rnr_since_ns = 0;   // router path: a SEND at the head has waited for a receive since
  int64_t throttled_since_ns = 0;  // router path: the head has waited for its tenant's tokens since
  proto::QpHeader* header() const { return reinterpret_cast<proto::QpHeader*>(mem.data()); }
};

struct Session {
  UniqueFd sock;
  uint32_t id = 0, pid = 0, uid = 0;
  bool welcomed = false;
  Tenant tenant;
  std::set<uint32_t> pds, qps;
  std::map<uint32_t, MemoryRegionEntry> mrs;  // by lkey
};

struct TenantUsage {
  uint64_t clients = 0, pds = 0, mrs = 0, qps = 0, reg_bytes = 0;
  uint64_t requests = 0, errors = 0, refused_clients = 0;
  // Router path.
  uint64_t ops_moved = 0, bytes_moved = 0, throttled_ns = 0;
  double tok_ops = 0, tok_bytes = 0;  // token buckets (rate_ops, rate_bytes), refilled as time passes
  int64_t refill_ns = 0;
};

class Router {
 public:
  static Result<std::unique_ptr<Router>> create(RouterOptions opts);
  ~Router();
  // Serves until `stop_fd` (an eventfd or a signalfd) becomes readable.
  Status run(int stop_fd);
  std::string stats_text() const;

 private:
  explicit Router(RouterOptions opts) : opts_(std::move(opts)) {}
  Status accept_clients();
  void serve(Session& s);
  void drop(uint32_t id);
  // One request; the reply (or error) is sent by the caller. Returns the reply bytes and the
  // descriptor to pass along (or -1).
  struct Reply {
    std::vector<uint8_t> bytes;
    int fd = -1, fd2 = -1;
  };
  Reply handle(Session& s, const proto::Message& m, ipc::Packet& p);
  Reply hello(Session& s, const proto::Message& m);
  Reply alloc_pd(Session& s, const proto::Message& m);
  Reply dealloc_pd(Session& s, const proto::Message& m);
  Reply reg_mr(Session& s, const proto::Message& m, UniqueFd& theirs);
  Reply dereg_mr(Session& s, const proto::Message& m);
  Reply create_qp(Session& s, const proto::Message& m, UniqueFd& mem, UniqueFd& doorbell);
  Reply connect_qp(Session& s, const proto::Message& m);
  Reply grant(Session& s, const proto::Message& m);
  Reply destroy_qp(Session& s, const proto::Message& m);
  // The QPs connected to any QP of `s`: their holders map s's regions (direct path).
  void revoke_grants_of(const Session& s);
  void release_qp(uint32_t num);
  void ring(const QpEntry& q);
  // Router path (data_path.cc): runs the requests of router-path QPs; true when any moved.
  bool pump();
  bool pump_qp(QpEntry& q);
  // How long the loop may sleep: -1 with nothing deferred, else until the next tokens.
  int park_ms() const;
  void set_parked(bool parked);
  bool work_waiting() const;
  void wake(QpEntry& q);
  Reply error(Session& s, const proto::Message& m, int err, const std::string& why);
  uint32_t fresh_key();  // random (getrandom), never 0, never one in use: keys are not guessable
  void log(const std::string& line) const;

  RouterOptions opts_;
  UniqueFd listen_, epoll_;
  std::map<uint32_t, Session> sessions_;
  std::map<std::string, TenantUsage> usage_;
  std::set<uint32_t> keys_in_use_;
  std::map<uint32_t, QpEntry> qps_;  // every QP, by number
  std::vector<uint32_t> routed_;     // the QPs on the router path
  UniqueFd kick_;                    // an eventfd clients write after posting while we are parked
  bool deferred_ = false;            // a request waits for tokens (or a receive)
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  uint64_t router_id_ = 0;
  uint32_t next_id_ = 1;
};

}  // namespace rb::vrdma
