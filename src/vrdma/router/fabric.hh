#pragma once
// The router's link to the routers of other hosts, as the router sees it: messages, and RMA on
// regions registered for it, to routers addressed by where they listen. ofi_fabric.hh is the
// implementation over libfabric; a vrdmad built without libfabric has none, and --listen says so.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.hh"
#include "vrdma/proto/link.hh"

namespace rb::vrdma {

// What the fabric's completions are handed to.
class LinkSink {
 public:
  virtual ~LinkSink() = default;
  virtual void on_message(std::span<const uint8_t> bytes) = 0;
  // An RMA posted with `cookie` finished; ok false: it failed (the peer is gone or refused it).
  virtual void on_rma(uint64_t cookie, bool ok) = 0;
  // A message to `to` could not be delivered: the router there is unreachable.
  virtual void on_send_failed(const proto::RouterAddress& to) = 0;
};

// A region registered with the fabric; deregistered (remote access revoked) on destruction.
class FabricMr {
 public:
  virtual ~FabricMr() = default;
  virtual uint64_t key() const = 0;
  virtual uint64_t base() const = 0;  // the RMA address of the region's first byte
  virtual void* desc() const = 0;
};

struct LocalPiece {
  void* p = nullptr;
  size_t len = 0;
  void* desc = nullptr;
  std::shared_ptr<const void> pin;  // what keeps [p, p+len) mapped until the RMA completes
};

class Fabric {
 public:
  virtual ~Fabric() = default;
  virtual const std::string& provider() const = 0;
  // Why the last post or completion that failed did (empty when none has).
  virtual std::string last_failure() const { return {}; }
  virtual int wait_fd() const = 0;
  // Drives progress; true when nothing is ready and the wait fd will signal what comes.
  virtual bool try_wait() = 0;
  // Handles up to a batch of completions; the number handled.
  virtual int poll(LinkSink& sink) = 0;

  // Registers a tenant's region (or the piece of one a pulled op carries): this router may read
  // and write it (it moves the bytes of the owner's own requests); other routers only as
  // `access` (proto::Access) grants remote read and write. Its key is the provider's, or one this
  // router draws at random over all the bits the provider takes (64 with tcp): not the 32-bit
  // rkey, so a host that reaches the fabric but not the authenticated link cannot guess it.
  virtual Result<std::unique_ptr<FabricMr>> register_region(void* p, size_t len, uint32_t access) = 0;

  // Queues a copy of `bytes` to the router at `to`, and never waits: a post the provider cannot
  // take now (a connection being made, a full queue) waits in a queue of that peer's, tried
  // again at each poll(), and fails to the sink (on_send_failed, on_rma) when it has waited a
  // bound. Errors: it cannot be addressed, or the provider refused it outright.
  virtual Status send(const proto::RouterAddress& to, std::span<const uint8_t> bytes, LinkSink& sink) = 0;
  // Posts wait for the provider: poll() again soon.
  virtual bool posts_waiting() const = 0;
  // Messages sent (or waiting to be) and not yet completed: to `to`, and to every router.
  virtual size_t sends_in_flight(const proto::RouterAddress& to) const = 0;
  virtual size_t sends_in_flight() const = 0;
  // Counts the connections refused and taken: the router asks what happened only when it moved.
  virtual uint64_t connection_events() const { return 0; }
  // Connections refused because their other end did not prove the cluster's key, and why the
  // last one was.
  virtual size_t connections_refused() const { return 0; }
  virtual std::string last_refusal() const { return {}; }
  // The far ends of the connections taken since the last call, each from a router that proved
  // the key (the link guard keeps them).
  virtual std::vector<proto::RouterAddress> take_accepted_ends() { return {}; }
  // The address is no router's (it never proved the key): its entry and connection go, unless
  // something to it is still in flight (false: try again later). So addresses a tenant names
  // cannot grow the fabric.
  virtual bool forget_address(const proto::RouterAddress& to) = 0;
  // WRITE (delivery complete: on completion the bytes are at the target) or READ, completed
  // to the sink with `cookie`.
  virtual Status write(const proto::RouterAddress& to, std::span<const LocalPiece> local, uint64_t addr,
                       uint64_t key, uint64_t cookie, LinkSink& sink) = 0;
  virtual Status read(const proto::RouterAddress& to, std::span<const LocalPiece> local, uint64_t addr,
                      uint64_t key, uint64_t cookie, LinkSink& sink) = 0;
};

// provider: as libfabric names it ("tcp"; one with connected endpoints); listen: bind here; auth:
// the keys a connection proves, read at each connection. Fails, saying why, in a build without
// libfabric.
class LinkAuth;
Result<std::unique_ptr<Fabric>> open_fabric(const std::string& provider, const proto::RouterAddress& listen,
                                            LinkAuth& auth);

}  // namespace rb::vrdma
