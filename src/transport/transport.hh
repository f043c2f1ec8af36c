#pragma once
// The transport contract. A Domain is one process's handle on a fabric (memory registration,
// endpoint factory); an Endpoint is one connection's worth of send/receive queue and completion
// queue, used by exactly one thread. The engine times everything: a transport only moves
// bytes and reports completions. Hot-path calls (post, poll) take spans so a virtual call is
// paid per batch, never allocate, never throw, and report "busy" as a short count, not an error.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.hh"

namespace rb::transport {

// write_imm and send_imm carry WorkRequest::imm to the peer: a write_imm lands like a write and
// also gives the target a remote_write completion (no receive consumed, as fi_writedata); a
// send_imm is a send whose receive completion carries the immediate. fadd and cswap are 8-byte
// atomics on the peer's region (ib_atomic_*): the value found there lands at local_off.
// remote_write is never posted: it is how a peer's write_imm shows up in the target's completions.
enum class Op : uint8_t { write, read, send, recv, write_imm, send_imm, fadd, cswap, remote_write };
const char* op_name(Op op);
constexpr uint32_t kAtomicBytes = 8;

// What a transport's mechanics allow, as it reports them after open. Every field says what the
// transport does, not which bench feature it enables, and defaults to "no": a transport claims
// each one explicitly.
struct Caps {
  bool write = false, read = false, send = false;
  uint64_t max_msg = 0;          // largest single message or RMA in bytes
  uint64_t inject = 0;           // largest message sent inline
  uint32_t tx_depth = 0;         // ops a single endpoint accepts outstanding
  uint32_t rx_depth = 0;         // receives a single endpoint can hold posted
  bool target_progress = false;  // the passive side must poll its CQ for RMA data to land
  bool virtual_addressing = false;  // remote addresses are virtual addresses (else offsets)
  bool selective_completion = false;  // unsignaled ops produce no completion
  bool peer_sees_writes = false;      // a write lands in the target's registered memory, where it can poll for it
  bool peer_memory_readable = false;  // the target process can read what ops put in its registered region
  // ...once the initiator's endpoints have quiesced, when opened with EndpointOptions::validate
  // (dma:cuda, whose far side is a device buffer copied back then): enough for --validate.
  bool peer_memory_at_quiesce = false;
  bool checks_bounds = false;    // an op outside the peer's region completes with remote_access, touching nothing
  bool checks_keys = false;      // an op naming a key the peer did not register completes with remote_access, touching nothing
  bool engine_thread = false;    // a thread of this process moves the data: long waits should yield to it
  bool atomics = false;          // fadd and cswap, applied atomically at the target
  bool imm_data = false;         // write_imm and send_imm
  bool can_wait = false;         // endpoints opened with EndpointOptions::event support arm_wait
  double link_gbps = 0;          // 0 when unknown
};
// The yes/no fields that are set, space separated: "write read send checks_bounds".
std::string caps_flags(const Caps& c);

// Where a registered region can be reached from a peer: the address of its first byte as the
// peer must name it (virtual address or 0 for offset addressing), and its key.
struct RemoteRegion {
  uint64_t base = 0;
  uint64_t key = 0;
  uint64_t len = 0;
  std::vector<uint8_t> handle;  // transport-specific extra (e.g. how a copy engine maps the region)
};

// Memory a Domain can register, from Domain::allocate: page aligned and zeroed. Transports that
// move bytes without a NIC (copy engines) hand out shareable or pinned memory here.
class HostMemory {
 public:
  virtual ~HostMemory() = default;
  virtual uint8_t* data() const = 0;
  virtual size_t size() const = 0;
};
std::unique_ptr<HostMemory> allocate_heap(size_t len);  // plain page-aligned memory; null on failure

// Copies a write into the peer's memory with the last byte stored last, with release order: a
// peer polling that byte (write latency) then sees the whole payload; memcpy alone promises no
// store order. For transports whose writes are stores by a thread of this process.
void copy_last_byte_last(void* dst, const void* src, size_t len);

class MemoryRegion {
 public:
  virtual ~MemoryRegion() = default;
  virtual void* addr() const = 0;
  virtual size_t len() const = 0;
  virtual void* desc() const = 0;  // provider descriptor for local access (may be null)
  virtual RemoteRegion remote() const = 0;
};

namespace wr_flag {
constexpr uint8_t signal = 1;    // ask for a completion
constexpr uint8_t more = 2;      // more posts follow at once (doorbell hint)
constexpr uint8_t delivery = 4;  // complete only once the data is visible at the target
constexpr uint8_t inject = 8;    // copy the payload at post time (len <= Caps::inject); buffer free at once
// The target learns of this write by polling its last byte (write latency): that byte must land
// after all the others. A transport may order every write so; one for which it costs extra (a
// second put) pays only where this is set.
constexpr uint8_t polled = 16;
}  // namespace wr_flag

struct WorkRequest {
  Op op = Op::write;
  uint8_t flags = wr_flag::signal;
  uint32_t len = 0;
  const MemoryRegion* mr = nullptr;  // local memory
  uint64_t local_off = 0;            // offset into mr
  uint64_t remote_off = 0;           // offset into the connected remote region (write/read)
  uint64_t wr_id = 0;                // returned in the completion
  uint64_t operand = 0;              // fadd: what to add; cswap: what to store on a match
  uint64_t compare = 0;              // cswap: the value the target must hold
  uint32_t imm = 0;                  // write_imm, send_imm: the immediate data
};

// How a work request ended, one set for every transport in the manner of ibv_wc_status: each
// transport maps its provider's codes onto it, so the runner and the tests judge an error
// without knowing whose it was. The provider's own code travels beside it for the message.
enum class WcStatus : uint8_t {
  success,
  local_length,      // a received message is longer than the posted receive
  local_protection,  // the local buffer is not registered, or not for this access
  remote_access,     // the target refused the key, the bounds or the access
  remote_operation,  // the target failed the operation (e.g. its receive was too short)
  flushed,           // cancelled: the endpoint is closing or the receive was withdrawn
  retry_exceeded,    // the peer did not answer in time
  rnr,               // the receiver had no receive posted
  fatal,             // anything else: the endpoint is no longer usable
};
const char* wc_status_name(WcStatus s);

struct Completion {
  uint64_t wr_id = 0;
  Op op = Op::write;
  uint32_t len = 0;
  WcStatus status = WcStatus::success;
  int vendor_err = 0;  // the provider's own code, for Endpoint::describe_error
  bool has_imm = false;  // a remote_write, or a recv of a send_imm: imm holds the peer's data
  uint32_t imm = 0;
  bool ok() const { return status == WcStatus::success; }
};

// How a thread sleeps until an endpoint may have a completion: a descriptor and the epoll
// events that mean "poll me now" (perftest's -e, fi_cq_sread's wait object).
struct WaitHandle {
  int fd = -1;
  uint32_t events = 0;
};

class Endpoint {
 public:
  virtual ~Endpoint() = default;
  // Opaque address to hand to the peer out of band.
  virtual std::vector<uint8_t> address() const = 0;
  virtual Status connect(std::span<const uint8_t> peer_address) = 0;
  // The peer region that write/read offsets refer to.
  virtual Status set_remote(const RemoteRegion& region) = 0;
  // Accepts a prefix of `wrs`: returns how many were taken (fewer means the queue is full; poll
  // and retry the rest), or -1 on a fatal error (then last_error() says what).
  virtual int post(std::span<const WorkRequest> wrs) = 0;
  // Returns completions written to `out`, or -1 on a fatal error.
  virtual int poll(std::span<Completion> out) = 0;
  // Ends a phase cleanly: cancels posted receives and reaps the completion of every signaled op
  // still in flight, discarding them, so nothing from this phase reaches the next one.
  // Returns Errc::timeout if ops are still outstanding after timeout_s.
  virtual Status quiesce(double timeout_s) = 0;
  // One line on a failed completion: the shared status and what the provider said about it.
  virtual std::string describe_error(const Completion& c) const = 0;
  virtual const std::string& last_error() const = 0;
  // Prepares to sleep (endpoints opened with EndpointOptions::event on a transport with
  // Caps::can_wait): 1 with `out` set when nothing is ready and the caller may sleep until
  // out.fd reports out.events; 0 when a completion may be ready already (poll, don't sleep);
  // -1 on error (last_error() says what). Sleeping after 1 never misses a completion.
  virtual int arm_wait(WaitHandle& out) = 0;
};

struct EndpointOptions {
  int index = 0;
  uint32_t depth = 1;       // most ops the caller keeps outstanding
  uint32_t rx_slots = 0;    // most receives the caller keeps posted
  bool selective = false;   // caller sets wr_flag::signal on some ops only
  bool event = false;       // the caller will sleep in arm_wait (needs Caps::can_wait)
  // The peer checks the bytes in its registered region after each quiesce (--validate): a
  // transport whose far side only stands in for that region (dma:cuda's device buffer) keeps the
  // two in step around each phase, outside the measured ops.
  bool validate = false;
};

struct DomainInfo {
  std::string transport, provider, fabric, domain;
  std::string library_version;  // the library under the transport and its version ("libfabric 1.17"), or empty
};

class Domain {
 public:
  virtual ~Domain() = default;
  virtual const Caps& caps() const = 0;
  virtual const DomainInfo& info() const = 0;
  // Memory for register_memory. Transports that need special memory override this.
  virtual Result<std::unique_ptr<HostMemory>> allocate(size_t len) {
    auto m = allocate_heap(len);
    if (!m) return Status(Errc::unavailable, "cannot allocate " + std::to_string(len) + " B");
    return m;
  }
  virtual Result<std::unique_ptr<MemoryRegion>> register_memory(void* addr, size_t len) = 0;
  virtual Result<std::unique_ptr<Endpoint>> open_endpoint(const EndpointOptions& opt) = 0;
};

}  // namespace rb::transport
