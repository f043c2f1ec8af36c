#pragma once
// The router's Fabric over libfabric, to the routers of other hosts: a passive endpoint listening
// at --listen, a connected endpoint for each link connection (made or taken only when the other
// side proves the cluster's key: link_handshake.hh), one CQ and one shared receive context for
// them all, receive buffers for link messages, and RMA on regions registered with the domain
// under keys the router chooses. Other routers are known by where they listen; a post goes down
// the first connection to its router that came up, so a link's ops keep their order.
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/status.hh"
#include "vrdma/proto/link.hh"
#include "core/unique_fd.hh"
#include "vrdma/router/fabric.hh"
#include "vrdma/router/link_handshake.hh"

namespace rb::vrdma {

// libfabric's words for a return code (either sign), with the code.
std::string fi_error(int rc);

// A region registered with the domain; deregistered (remote access revoked) on destruction.
class OfiMr final : public FabricMr {
 public:
  OfiMr(fid_mr* mr, uint64_t key, uint64_t base) : mr_(mr), key_(key), base_(base) {}
  OfiMr(const OfiMr&) = delete;
  OfiMr& operator=(const OfiMr&) = delete;
  ~OfiMr() override;
  uint64_t key() const override { return key_; }
  uint64_t base() const override { return base_; }
  void* desc() const override;

 private:
  fid_mr* mr_;
  uint64_t key_, base_;
};

class OfiFabric final : public Fabric {
 public:
  static Result<std::unique_ptr<OfiFabric>> open(const std::string& provider, const proto::RouterAddress& listen,
                                                 LinkAuth& auth);
  ~OfiFabric() override;
  OfiFabric(const OfiFabric&) = delete;
  OfiFabric& operator=(const OfiFabric&) = delete;

  const std::string& provider() const override { return provider_; }
  std::string last_failure() const override { return last_failure_; }
  int wait_fd() const override { return wait_fd_.get(); }
  // Drives progress; true when nothing is ready and the wait fd will signal what comes.
  bool try_wait() override;
  // Handles up to a batch of completions; the number handled.
  int poll(LinkSink& sink) override;

  // Registers a tenant's region (or the piece of one a pulled op carries): this router may read
  // and write it (it moves the bytes of the owner's own requests); other routers only as
  // `access` (proto::Access) grants remote read and write. Its key is the provider's, or one this
  // router draws at random over all the bits the provider takes (64 with tcp): not the 32-bit
  // rkey, so a host that reaches the fabric but not the authenticated link cannot guess it.
  Result<std::unique_ptr<FabricMr>> register_region(void* p, size_t len, uint32_t access) override;

  // Queues a copy of `bytes` to the router at `to`, and never waits: a post the provider cannot
  // take now (-FI_EAGAIN: a connection being made, a full queue) waits in a queue of that
  // peer's, tried again at each poll(), and fails to the sink (on_send_failed, on_rma) when it
  // has waited a bound. Errors: it cannot be addressed, or the provider refused it outright.
  Status send(const proto::RouterAddress& to, std::span<const uint8_t> bytes, LinkSink& sink) override;
  // Posts wait for the provider: poll() again soon.
  bool posts_waiting() const override { return !waiting_.empty(); }
  size_t sends_in_flight(const proto::RouterAddress& to) const override;
  size_t sends_in_flight() const override { return sends_; }
  uint64_t connection_events() const override { return refused_ + accepted_; }
  size_t connections_refused() const override { return refused_; }
  std::string last_refusal() const override { return last_refusal_; }
  std::vector<proto::RouterAddress> take_accepted_ends() override { return std::exchange(accepted_ends_, {}); }
  bool forget_address(const proto::RouterAddress& to) override;
  // WRITE (delivery complete: on completion the bytes are at the target) or READ, completed
  // to the sink with `cookie`.
  Status write(const proto::RouterAddress& to, std::span<const LocalPiece> local, uint64_t addr, uint64_t key,
               uint64_t cookie, LinkSink& sink) override;
  Status read(const proto::RouterAddress& to, std::span<const LocalPiece> local, uint64_t addr, uint64_t key,
              uint64_t cookie, LinkSink& sink) override;

 private:
  struct Context;
  struct RmaGroup;
  struct Event {
    enum Kind { message, rma, send_failed } kind = message;
    bool ok = true;
    uint64_t cookie = 0;
    proto::RouterAddress to;
    std::vector<uint8_t> bytes;
  };
  // One connection to another router.
  struct Link {
    fid_ep* ep = nullptr;
    uint64_t peer = 0;  // its router, in peers_
    enum State { connecting, accepting, up } state = connecting;
    bool made = false;    // this router made it (else it took it)
    ConnectRequest sent;  // connecting: what its answer must answer
    int64_t since_ns = 0;  // when it was begun or taken
  };
  struct Peer {
    proto::RouterAddress at;
    // Where posts to it go: the connection this router made to it, once its answer proved the
    // key. A connection it made to us carries only what it sends: its request proves the key but
    // not that the connector is there (an on-path host could replay a request it held back).
    Link* out = nullptr;
    Link* making = nullptr;  // the connection this router made or is making to it, until it goes
    size_t links = 0;        // its connections, either way, up or being made
    int64_t retry_ns = 0;  // after a failed connection, none is tried before this
  };
  using Post = std::function<ssize_t(fid_ep*)>;
  struct Waiting {
    Context* c;
    Post post;
    int64_t until_ns;
  };

  explicit OfiFabric(LinkAuth& auth);
  Status open_passive(const std::string& provider);
  void deliver(Context* c, bool ok, std::span<const uint8_t> msg, LinkSink& sink);
  void dispatch(Event& ev, LinkSink& sink);
  Result<uint64_t> peer_of(const proto::RouterAddress& a);
  Status post_recv(Context* c);
  Status rma(bool is_write, const proto::RouterAddress& to, std::span<const LocalPiece> local, uint64_t addr,
             uint64_t key, uint64_t cookie, LinkSink& sink);
  // Posts now, or queues behind what waits for the same peer (their order is the link's).
  Status post_rma(bool is_write, uint64_t peer, const proto::RouterAddress& to, std::span<const LocalPiece> local,
                  uint64_t addr, uint64_t key, uint64_t cookie, std::shared_ptr<RmaGroup> group);
  Status post_or_wait(uint64_t peer, Context* c, const char* what, Post post);
  void post_waiting(LinkSink& sink);
  void forget(Context* c);  // a send or RMA completed or failed: out of in_flight_

  // Connections (ofi_link.cc).
  fid_ep* out_ep(uint64_t peer);  // where a post to `peer` goes now; nullptr: not yet (one is being made)
  Status connect(uint64_t peer);
  Result<fid_ep*> open_ep(fi_info* info, Link* link);
  void handle_connections();
  void on_request(fi_info* info, std::span<const uint8_t> data);
  void on_connected(Link* l, std::span<const uint8_t> data);
  Link* link_of(fid_t f);
  void close_link(Link* l, const std::string& why);
  void close_oldest(uint64_t peer);
  void expire_links(int64_t now_ns);
  static int64_t mono_ns();

  std::string provider_;
  std::string last_failure_;
  proto::RouterAddress self_;
  LinkHandshake handshake_;
  fi_info* info_ = nullptr;
  size_t iov_limit_ = 1;  // local pieces one RMA post takes
  fid_fabric* fabric_ = nullptr;
  fid_domain* domain_ = nullptr;
  fid_eq* eq_ = nullptr;      // connection events
  fid_pep* pep_ = nullptr;    // listening at --listen
  fid_ep* srx_ = nullptr;     // the receives every connection shares
  fid_cq* cq_ = nullptr;
  UniqueFd wait_fd_;          // an epoll of the CQ's and the EQ's wait fds
  int cq_fd_ = -1, eq_fd_ = -1;
  bool virt_addr_ = false, prov_key_ = false;
  size_t key_bytes_ = 8;  // what the provider takes of a requested key
  std::map<std::vector<uint8_t>, uint64_t> addrs_;  // RouterAddress bytes -> peer
  std::map<uint64_t, Peer> peers_;
  uint64_t next_peer_ = 1;
  std::map<Link*, std::unique_ptr<Link>> links_;
  size_t connecting_ = 0;    // links not yet up
  uint32_t turns_ = 0;       // polls, to look at connection events every few
  bool events_due_ = true;   // look at connection events at the next poll
  size_t refused_ = 0;       // connection requests or answers that did not prove the key
  std::string last_refusal_;
  std::vector<proto::RouterAddress> accepted_ends_;  // far ends of connections taken, not yet asked for
  uint64_t accepted_ = 0;                            // connections taken
  std::vector<std::unique_ptr<Context>> recvs_;
  std::map<Context*, std::unique_ptr<Context>> in_flight_;  // sends and RMAs, until completed
  std::vector<Event> backlog_;  // completions read while a handler ran
  bool reading_ = false;        // a handler is running
  std::map<uint64_t, std::deque<Waiting>> waiting_;  // by peer
  std::map<uint64_t, size_t> sends_to_;  // sends in flight, by peer
  size_t sends_ = 0;
};

}  // namespace rb::vrdma
