// vrdma0's character device, as programs that look for one see it. UCX (and other libraries that
// check a device is usable before opening it) lists a verbs device only when
// /dev/infiniband/<dev_name> is a character device it may read and write. vrdma0 has no kernel
// device, and the host's /dev is not ours to change for every program, so inside a vrdma-run
// program alone stat() and access() answer for that one path as for a device node open to all;
// every other path goes to the C library untouched.
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstring>

#include "vrdma/verbs/export.hh"
#include "vrdma/verbs/objects.hh"

using namespace rb::verbs;

namespace {

// infiniband_verbs' major number, and a minor no kernel device takes (they count up from 192).
constexpr unsigned kVerbsMajor = 231;
constexpr unsigned kVrdmaMinor = 255;

bool is_our_node(const char* path) { return path && std::strcmp(path, kDeviceNodePath) == 0; }

void fill_node(struct stat* st) {
  std::memset(st, 0, sizeof *st);
  st->st_mode = S_IFCHR | 0666;
  st->st_rdev = makedev(kVerbsMajor, kVrdmaMinor);
  st->st_nlink = 1;
  st->st_blksize = 4096;
}

// The C library's own definition, looked up once.
template <typename Fn>
Fn next_definition(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

int no_definition() {
  errno = ENOSYS;
  return -1;
}

}  // namespace

VERBS_EXPORT int stat(const char* path, struct stat* st) {
  if (is_our_node(path)) return fill_node(st), 0;
  static auto next = next_definition<int (*)(const char*, struct stat*)>("stat");
  return next ? next(path, st) : no_definition();
}

VERBS_EXPORT int stat64(const char* path, struct stat64* st) {
  if (is_our_node(path)) return fill_node(reinterpret_cast<struct stat*>(st)), 0;
  static auto next = next_definition<int (*)(const char*, struct stat64*)>("stat64");
  return next ? next(path, st) : no_definition();
}

VERBS_EXPORT int access(const char* path, int mode) {
  if (is_our_node(path)) return (mode & X_OK) ? (errno = EACCES, -1) : 0;
  static auto next = next_definition<int (*)(const char*, int)>("access");
  return next ? next(path, mode) : no_definition();
}

static_assert(sizeof(struct stat) == sizeof(struct stat64), "stat and stat64 are one layout on 64-bit Linux");
