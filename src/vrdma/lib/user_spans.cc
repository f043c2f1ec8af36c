#include "vrdma/lib/user_spans.hh"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "vrdma/lib/write_fence.hh"

namespace rb::vrdma {
namespace {

uint64_t page_size() { return uint64_t(sysconf(_SC_PAGESIZE)); }

// Whole transfers: Linux moves at most 0x7ffff000 B a call, so a span of 2 GiB or more came out
// short and its registration failed (EFAULT). False on an error or an end of file.
bool write_all(int fd, const uint8_t* from, size_t len, off_t at) {
  while (len) {
    ssize_t n = pwrite(fd, from, len, at);
    if (n <= 0) return false;
    from += n, len -= size_t(n), at += n;
  }
  return true;
}

bool read_all(int fd, uint8_t* into, size_t len, off_t at) {
  while (len) {
    ssize_t n = pread(fd, into, len, at);
    if (n <= 0) return false;
    into += n, len -= size_t(n), at += n;
  }
  return true;
}

Status sys_error(int err, const std::string& what) {
  return {err == ENOMEM ? Errc::unavailable : Errc::invalid_argument, fmt::format("{}: {}", what, std::strerror(err))};
}

// Puts the memfd's bytes at `file_offset` under [addr, end), with what the caller has there now;
// 0 or an errno. Behind a write fence (write_fence.hh), so no other thread's write to those pages
// is lost between the copy and the remap.
int map_under(int fd, uint64_t file_offset, uintptr_t addr, uintptr_t end) {
  size_t len = end - addr;
  errno = 0;
  WriteFence fence(addr, end);
  if (!fence.up() && errno) return errno == ENOMEM ? EFAULT : errno;  // ENOMEM: not mapped
  if (!write_all(fd, reinterpret_cast<const uint8_t*>(addr), len, off_t(file_offset)) ||
      mmap(reinterpret_cast<void*>(addr), len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, off_t(file_offset)) == MAP_FAILED) {
    int err = errno ? errno : EFAULT;
    mprotect(reinterpret_cast<void*>(addr), len, PROT_READ | PROT_WRITE);  // as it was
    return err;
  }
  return 0;
}

// Whether [addr, end) is the caller's own private, writable memory, all of it mapped: shared
// memory goes under it, which would cut a shared or file mapping off from what it shares and
// make a read-only page writable, so those are refused (as is memory that is not there).
Status own_memory(uintptr_t addr, uintptr_t end) {
  std::ifstream maps("/proc/self/maps");
  uintptr_t covered = addr;
  for (std::string line; covered < end && std::getline(maps, line);) {
    std::istringstream in(line);
    std::string range, perms, offset, dev, inode, path;
    in >> range >> perms >> offset >> dev >> inode;
    std::getline(in >> std::ws, path);
    uintptr_t lo = std::stoull(range.substr(0, range.find('-')), nullptr, 16);
    uintptr_t hi = std::stoull(range.substr(range.find('-') + 1), nullptr, 16);
    if (hi <= covered || lo >= end) continue;
    if (lo > covered) break;  // a hole
    if (perms.size() < 4 || perms[0] != 'r' || perms[1] != 'w' || perms[3] != 'p')
      return Status(Errc::unsupported, fmt::format("vrdma_reg_mr: {:#x} (+{} B) lies in a {} mapping{}{}: vrdma registers "
                                                   "private, writable memory (it maps shared memory under it)", addr,
                                                   end - addr, perms, path.empty() ? "" : " of ", path));
    covered = hi;
  }
  if (covered < end)
    return Status(Errc::invalid_argument, fmt::format("vrdma_reg_mr: {:#x} is not mapped", covered));
  return {};
}

Status mapping_failed(int err, uintptr_t addr, uintptr_t end) {
  return sys_error(err, fmt::format("vrdma_reg_mr: mapping shared memory under {:#x} (+{} B)", addr, end - addr));
}

}  // namespace

Result<UserSpans::Span*> UserSpans::make(uintptr_t addr, uintptr_t end) {
  if (Status st = own_memory(addr, end); !st) return st;
  auto s = std::make_unique<Span>();
  s->fd.reset(memfd_create("vrdma-user-mr", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!s->fd) return sys_error(errno, "vrdma_reg_mr: memfd_create");
  s->start = addr, s->end = end, s->file_offset = kHeadroomPages * page_size();
  // Sealed against shrinking (what the router and peers rely on); not against growing, which is
  // how a span takes in a region that reaches past it.
  if (ftruncate(s->fd.get(), off_t(s->file_offset + (end - addr))) != 0 || fcntl(s->fd.get(), F_ADD_SEALS, F_SEAL_SHRINK) != 0)
    return sys_error(errno, "vrdma_reg_mr: sizing shared memory");
  if (int err = map_under(s->fd.get(), s->file_offset, addr, end)) return mapping_failed(err, addr, end);
  Span* p = s.get();
  spans_.emplace(addr, std::move(s));
  return p;
}

Result<UserSpans::Span*> UserSpans::grow(Span& s, uintptr_t addr, uintptr_t end) {
  if (addr < s.start) {
    uint64_t below = s.start - addr;
    if (Status st = own_memory(addr, s.start); !st) return st;
    if (below > s.file_offset)
      return Status(Errc::unsupported, fmt::format("vrdma_reg_mr: {:#x} (+{} B) reaches {} B below pages registered "
                                                   "already, more than vrdma's {} pages of room there: register the "
                                                   "lower buffer first", addr, end - addr, below, kHeadroomPages));
    if (int err = map_under(s.fd.get(), s.file_offset - below, addr, s.start)) return mapping_failed(err, addr, s.start);
    auto node = spans_.extract(s.start);
    s.file_offset -= below;
    s.start = addr;
    node.key() = addr;
    spans_.insert(std::move(node));
  }
  if (end > s.end) {
    if (Status st = own_memory(s.end, end); !st) return st;
    uint64_t at = s.file_offset + (s.end - s.start);
    if (ftruncate(s.fd.get(), off_t(at + (end - s.end))) != 0) return sys_error(errno, "vrdma_reg_mr: growing shared memory");
    if (int err = map_under(s.fd.get(), at, s.end, end)) return mapping_failed(err, s.end, end);
    s.end = end;
  }
  return &s;
}

Result<UserSpans::Share> UserSpans::share(uintptr_t addr, uint64_t len) {
  uintptr_t end = addr + len;
  std::lock_guard lk(mu_);
  std::vector<Span*> touched;
  auto it = spans_.upper_bound(addr);
  if (it != spans_.begin() && std::prev(it)->second->end > addr) touched.push_back(std::prev(it)->second.get());
  for (; it != spans_.end() && it->first < end; ++it) touched.push_back(it->second.get());
  if (touched.size() > 1)
    return Status(Errc::unsupported, fmt::format("vrdma_reg_mr: {:#x} (+{} B) joins {} runs of pages registered apart; "
                                                 "vrdma cannot make them one", addr, len, touched.size()));
  auto span = touched.empty() ? make(addr, end) : grow(*touched[0], addr, end);
  if (!span) return span.status();
  Span& s = **span;
  ++s.regions;
  return Share{s.fd.get(), s.file_offset + (addr - s.start), &s};
}

void UserSpans::release(Span* span) {
  std::lock_guard lk(mu_);
  if (--span->regions) return;
  // Private memory again, contents kept, so a mapping of the memfd a peer still holds (a stale
  // grant) reaches memory nobody uses. The span (and the map's node) may live in the very pages
  // being given back, which read as zeros until the copy is in: take what the copy needs first.
  auto node = spans_.extract(span->start);
  std::unique_ptr<Span> gone = std::move(node.mapped());
  uintptr_t start = gone->start;
  size_t len = gone->end - gone->start;
  int fd = gone->fd.get();
  off_t from = off_t(gone->file_offset);
  void* at = reinterpret_cast<void*>(start);
  WriteFence fence(start, start + len);  // writers wait; readers see the bytes throughout
  void* copy = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (copy != MAP_FAILED && read_all(fd, static_cast<uint8_t*>(copy), len, from) &&
      // The system call itself: UCX's hook of mremap drops the new address.
      reinterpret_cast<void*>(syscall(SYS_mremap, copy, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, at)) == at)
    return;
  if (copy != MAP_FAILED) munmap(copy, len);
  if (mmap(at, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != MAP_FAILED)
    (void)read_all(fd, static_cast<uint8_t*>(at), len, from);
}

void UserSpans::cut_fds_in_child() {
  UniqueFd empty(memfd_create("vrdma-forked-away", MFD_CLOEXEC));
  if (!empty) return;
  for (auto& [first, s] : spans_) dup3(empty.get(), s->fd.get(), O_CLOEXEC);
}

}  // namespace rb::vrdma
