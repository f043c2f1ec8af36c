#include "core/shm.hh"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace rb {
namespace {

Status sys_error(Errc code, const std::string& what) { return {code, fmt::format("{}: {}", what, strerror(errno))}; }

size_t whole_pages(size_t len) {
  size_t page = size_t(sysconf(_SC_PAGESIZE));
  return (std::max<size_t>(len, 1) + page - 1) / page * page;
}

// What a mapper relies on: the file cannot shrink under it, it is as long as the mapping, and it
// is ordinary shared memory. A hugetlbfs memfd passes the seals, but a hole punched in it frees
// the page (and its reservation) under every mapping: the next touch is SIGBUS.
Status check_mappable(int fd, size_t len) {
  int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0) return sys_error(Errc::invalid_argument, "shared memory: not a sealable memfd");
  if (!(seals & F_SEAL_SHRINK)) return {Errc::invalid_argument, "shared memory: memfd is not sealed against shrinking"};
  struct statfs fs {};
  if (fstatfs(fd, &fs) != 0) return sys_error(Errc::io, "shared memory: fstatfs");
  if (fs.f_type != TMPFS_MAGIC)
    return {Errc::invalid_argument, fmt::format("shared memory: memfd is {} (filesystem {:#x}), not plain memory: "
                                                "memfd_create without MFD_HUGETLB",
                                                fs.f_type == HUGETLBFS_MAGIC ? "hugetlb" : "not tmpfs", fs.f_type)};
  struct stat st {};
  if (fstat(fd, &st) != 0) return sys_error(Errc::io, "shared memory: fstat");
  if (uint64_t(st.st_size) < len)
    return {Errc::invalid_argument, fmt::format("shared memory: memfd has {} B, {} B asked for", st.st_size, len)};
  return {};
}

// One byte of payload (a Unix socket carries no descriptor alone) and room for one descriptor.
struct FdMessage {
  char byte = 0;
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr m{};
  FdMessage() {
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = control;
    m.msg_controllen = sizeof control;
  }
  FdMessage(const FdMessage&) = delete;  // points into itself
};

}  // namespace

Result<Mapping> Mapping::map(int fd, size_t len, bool populate, uint64_t offset) {
  if (len == 0) return Status(Errc::invalid_argument, "shared memory: nothing to map (length 0)");
  if (offset % uint64_t(sysconf(_SC_PAGESIZE)) || offset > (1ull << 48))
    return Status(Errc::invalid_argument, fmt::format("shared memory: offset {} is not a page's start", offset));
  if (Status s = check_mappable(fd, offset + len); !s) return s;
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED | (populate ? MAP_POPULATE : 0), fd, off_t(offset));
  if (p == MAP_FAILED) return sys_error(Errc::unavailable, fmt::format("mmap of {} B shared memory", len));
  return Mapping(static_cast<uint8_t*>(p), len);
}

Mapping::Mapping(Mapping&& o) noexcept : p_(std::exchange(o.p_, nullptr)), len_(std::exchange(o.len_, 0)) {}

Mapping& Mapping::operator=(Mapping&& o) noexcept {
  std::swap(p_, o.p_);
  std::swap(len_, o.len_);
  return *this;
}

Status Mapping::zero_in_place() {
  void* p = mmap(p_, len_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  if (p == MAP_FAILED) return sys_error(Errc::unavailable, fmt::format("mmap of {} B of zero pages over a mapping", len_));
  return {};
}

Mapping::~Mapping() {
  if (p_) munmap(p_, len_);
}

Result<SharedMemory> SharedMemory::create(const std::string& name, size_t len, bool populate) {
  UniqueFd fd(memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd) return sys_error(Errc::unavailable, "memfd_create");
  size_t file_len = whole_pages(len);
  if (ftruncate(fd.get(), off_t(file_len)) != 0)
    return sys_error(Errc::unavailable, fmt::format("cannot size shared memory to {} B", file_len));
  if (fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
    return sys_error(Errc::unavailable, "sealing shared memory");
  auto map = Mapping::map(fd.get(), file_len, populate);
  if (!map) return map.status();
  return SharedMemory(std::move(fd), std::move(*map), len);
}

Result<SharedMemory> SharedMemory::adopt(UniqueFd fd, size_t len, bool populate, uint64_t offset) {
  auto map = Mapping::map(fd.get(), whole_pages(len), populate, offset);
  if (!map) return map.status();
  return SharedMemory(std::move(fd), std::move(*map), len, offset);
}

ProcFdHandle SharedMemory::handle(uint64_t offset) const {
  return {uint32_t(getpid()), uint32_t(fd()), offset, mapped_size()};
}

std::vector<uint8_t> ProcFdHandle::encode() const {
  std::vector<uint8_t> b(24);
  std::memcpy(b.data(), &pid, 4);
  std::memcpy(b.data() + 4, &fd, 4);
  std::memcpy(b.data() + 8, &offset, 8);
  std::memcpy(b.data() + 16, &map_len, 8);
  return b;
}

Result<ProcFdHandle> ProcFdHandle::decode(std::span<const uint8_t> b) {
  if (b.size() != 24) return Status(Errc::io, "shared memory: peer region handle is malformed");
  ProcFdHandle h;
  std::memcpy(&h.pid, b.data(), 4);
  std::memcpy(&h.fd, b.data() + 4, 4);
  std::memcpy(&h.offset, b.data() + 8, 8);
  std::memcpy(&h.map_len, b.data() + 16, 8);
  return h;
}

Result<PeerMapping> PeerMapping::map(const ProcFdHandle& h) {
  if (h.offset > h.map_len)
    return Status(Errc::invalid_argument,
                  fmt::format("shared memory: peer handle offset {} is outside its {} B", h.offset, h.map_len));
  std::string path = fmt::format("/proc/{}/fd/{}", h.pid, h.fd);
  UniqueFd fd(open(path.c_str(), O_RDWR | O_CLOEXEC));
  if (!fd)
    return Status(Errc::unavailable,
                  fmt::format("cannot open the peer's memory {}: {} (both sides must run on this host as the same user)",
                              path, strerror(errno)));
  auto m = Mapping::map(fd.get(), h.map_len);
  if (!m) return Status(m.status().code(), fmt::format("the peer's memory {}: {}", path, m.status().message()));
  return PeerMapping(std::move(*m), h.offset);
}

Status send_fd(int unix_socket, int fd) {
  FdMessage msg;
  cmsghdr* c = CMSG_FIRSTHDR(&msg.m);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  ssize_t n;
  do n = sendmsg(unix_socket, &msg.m, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  if (n < 0) return sys_error(errno == EPIPE ? Errc::peer_gone : Errc::io, "sending a descriptor");
  return {};
}

Result<UniqueFd> recv_fd(int unix_socket) {
  FdMessage msg;
  msghdr& m = msg.m;
  ssize_t n;
  do n = recvmsg(unix_socket, &m, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  if (n < 0) return sys_error(Errc::io, "receiving a descriptor");
  if (n == 0) return Status(Errc::peer_gone, "receiving a descriptor: the peer closed the socket");
  // Every descriptor that arrived is ours to close, however many the peer sent.
  std::vector<UniqueFd> got;
  for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); ++i) {
      int raw;
      std::memcpy(&raw, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      got.emplace_back(raw);
    }
  }
  if (got.size() > 1 || (m.msg_flags & MSG_CTRUNC))
    return Status(Errc::io, "receiving a descriptor: the peer sent more than one");
  if (got.empty()) return Status(Errc::io, "receiving a descriptor: the message carried none");
  return std::move(got.front());
}

}  // namespace rb
