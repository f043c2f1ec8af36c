#pragma once
// Memory two processes on one host can both map: a memfd. The owner describes a registered
// range as (pid, fd, offset); the peer maps it through /proc/<pid>/fd/<fd>.
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "core/status.hh"
#include "transport/transport.hh"

namespace rb::transport::dma {

class SharedMemory final : public HostMemory {
 public:
  static Result<std::unique_ptr<SharedMemory>> create(size_t len);
  ~SharedMemory() override;
  uint8_t* data() const override { return p_; }
  size_t size() const override { return len_; }
  int fd() const { return fd_; }

 private:
  SharedMemory() = default;
  int fd_ = -1;
  uint8_t* p_ = nullptr;
  size_t len_ = 0;
};

struct ShareHandle {
  uint32_t pid = 0, fd = 0;
  uint64_t offset = 0, map_len = 0;
  std::vector<uint8_t> encode() const;
  static Result<ShareHandle> decode(const std::vector<uint8_t>& b);
};

// The peer's memory mapped here; unmapped on destruction.
class PeerMapping {
 public:
  static Result<std::unique_ptr<PeerMapping>> map(const ShareHandle& h);
  ~PeerMapping();
  uint8_t* base() const { return p_; }  // first byte of the registered range

 private:
  PeerMapping() = default;
  uint8_t* map_ = nullptr;
  size_t map_len_ = 0;
  uint8_t* p_ = nullptr;
};

}  // namespace rb::transport::dma
