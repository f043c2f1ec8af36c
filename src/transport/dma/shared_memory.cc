#include "transport/dma/shared_memory.hh"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include <fmt/format.h>

namespace rb::transport::dma {

Result<std::unique_ptr<SharedMemory>> SharedMemory::create(size_t len) {
  std::unique_ptr<SharedMemory> m(new SharedMemory);
  size_t rounded = (std::max<size_t>(len, 1) + 4095) / 4096 * 4096;
  m->fd_ = memfd_create("rdmabench-dma", MFD_CLOEXEC);
  if (m->fd_ < 0) return Status(Errc::unavailable, fmt::format("memfd_create: {}", strerror(errno)));
  if (ftruncate(m->fd_, off_t(rounded)) != 0)
    return Status(Errc::unavailable, fmt::format("cannot size shared memory to {} B: {}", rounded, strerror(errno)));
  void* p = mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, m->fd_, 0);
  if (p == MAP_FAILED) return Status(Errc::unavailable, fmt::format("mmap of {} B shared memory: {}", rounded, strerror(errno)));
  m->p_ = static_cast<uint8_t*>(p);
  m->len_ = len;
  return m;
}

SharedMemory::~SharedMemory() {
  if (p_) munmap(p_, (std::max<size_t>(len_, 1) + 4095) / 4096 * 4096);
  if (fd_ >= 0) close(fd_);
}

std::vector<uint8_t> ShareHandle::encode() const {
  std::vector<uint8_t> b(24);
  std::memcpy(b.data(), &pid, 4);
  std::memcpy(b.data() + 4, &fd, 4);
  std::memcpy(b.data() + 8, &offset, 8);
  std::memcpy(b.data() + 16, &map_len, 8);
  return b;
}

Result<ShareHandle> ShareHandle::decode(const std::vector<uint8_t>& b) {
  if (b.size() != 24) return Status(Errc::io, "dma: peer region handle is malformed");
  ShareHandle h;
  std::memcpy(&h.pid, b.data(), 4);
  std::memcpy(&h.fd, b.data() + 4, 4);
  std::memcpy(&h.offset, b.data() + 8, 8);
  std::memcpy(&h.map_len, b.data() + 16, 8);
  return h;
}

Result<std::unique_ptr<PeerMapping>> PeerMapping::map(const ShareHandle& h) {
  std::string path = fmt::format("/proc/{}/fd/{}", h.pid, h.fd);
  int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0)
    return Status(Errc::unavailable,
                  fmt::format("dma: cannot open the peer's memory {}: {} (both sides must run on this host as the same user)",
                              path, strerror(errno)));
  void* p = mmap(nullptr, h.map_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return Status(Errc::unavailable, fmt::format("dma: mmap of the peer's memory: {}", strerror(errno)));
  std::unique_ptr<PeerMapping> m(new PeerMapping);
  m->map_ = static_cast<uint8_t*>(p);
  m->map_len_ = h.map_len;
  m->p_ = m->map_ + h.offset;
  return m;
}

PeerMapping::~PeerMapping() {
  if (map_) munmap(map_, map_len_);
}

}  // namespace rb::transport::dma
