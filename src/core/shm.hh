#pragma once
// Memory two processes on one host can both map: a memfd, sealed at its size so that no holder
// can shrink it under another's mapping (the next access there would be SIGBUS). The owner hands
// it to a peer either as a descriptor over a Unix socket (send_fd / recv_fd) or as a
// (pid, fd, offset) handle the peer opens through /proc (same host, same user).
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/status.hh"
#include "core/unique_fd.hh"

namespace rb {

// A shared, read-write mapping of a memfd in this process; unmapped on destruction.
class Mapping {
 public:
  // Maps `len` bytes of `fd` from `offset` (a whole number of pages), which must be a memfd sealed
  // against shrinking and at least `offset + len` long: memory a peer passed us is checked before
  // it is touched. `populate` faults every page in now (the owner's own buffers); a daemon
  // mapping a client's memory does not, since that is work (and memory) the size of whatever the
  // client asked for.
  static Result<Mapping> map(int fd, size_t len, bool populate = true, uint64_t offset = 0);
  Mapping(Mapping&& o) noexcept;
  Mapping& operator=(Mapping&& o) noexcept;
  ~Mapping();
  uint8_t* data() const { return p_; }
  size_t size() const { return len_; }
  std::span<uint8_t> bytes() const { return {p_, len_}; }
  // Puts private zero pages where the file's are, in one step (no moment with nothing mapped
  // there): what still reaches the range by address lands in them, never in the file. The
  // kernel unmaps the file's pages meanwhile, which takes time with gigabytes of them touched.
  Status zero_in_place();

 private:
  Mapping(uint8_t* p, size_t len) : p_(p), len_(len) {}
  uint8_t* p_ = nullptr;
  size_t len_ = 0;
};

struct ProcFdHandle;

// A memfd of its own, mapped here.
class SharedMemory {
 public:
  // `name` shows in /proc/<pid>/fd and maps (debugging only). The file is a whole number of
  // pages, sealed at that size; size() is what was asked for.
  static Result<SharedMemory> create(const std::string& name, size_t len, bool populate = true);
  // Takes over a memfd another process made and passed us, mapping `len` bytes (rounded to pages)
  // from `offset`: it must be sealed against shrinking and long enough, as Mapping::map checks.
  static Result<SharedMemory> adopt(UniqueFd fd, size_t len, bool populate = true, uint64_t offset = 0);
  uint8_t* data() const { return map_.data(); }
  size_t size() const { return len_; }
  size_t mapped_size() const { return map_.size(); }
  std::span<uint8_t> bytes() const { return {data(), len_}; }
  int fd() const { return fd_.get(); }
  uint64_t offset() const { return offset_; }  // where in the file data() is
  Status zero_in_place() { return map_.zero_in_place(); }  // see Mapping::zero_in_place
  // How a peer on this host finds the byte at `offset`.
  ProcFdHandle handle(uint64_t offset) const;

 private:
  SharedMemory(UniqueFd fd, Mapping map, size_t len, uint64_t offset = 0)
      : fd_(std::move(fd)), map_(std::move(map)), len_(len), offset_(offset) {}
  UniqueFd fd_;
  Mapping map_;
  size_t len_;
  uint64_t offset_ = 0;
};

// Names a range of a process's memfd: the peer maps /proc/<pid>/fd/<fd>, map_len bytes, and
// uses the range from `offset`.
struct ProcFdHandle {
  uint32_t pid = 0, fd = 0;
  uint64_t offset = 0, map_len = 0;
  std::vector<uint8_t> encode() const;
  static Result<ProcFdHandle> decode(std::span<const uint8_t> b);
};

// The peer's memory mapped here.
class PeerMapping {
 public:
  static Result<PeerMapping> map(const ProcFdHandle& h);
  uint8_t* base() const { return map_.data() + offset_; }  // the handle's first byte

 private:
  PeerMapping(Mapping map, size_t offset) : map_(std::move(map)), offset_(offset) {}
  Mapping map_;
  size_t offset_;
};

// Passes a descriptor over a connected Unix socket (SCM_RIGHTS, one byte of payload with it).
Status send_fd(int unix_socket, int fd);
// Receives one; it arrives close-on-exec. Blocks unless the socket is non-blocking.
Result<UniqueFd> recv_fd(int unix_socket);

}  // namespace rb
