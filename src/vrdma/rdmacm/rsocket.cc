// rsocket (librdmacm's sockets over RDMA) is not offered on vrdma yet. librspreload, preloaded to
// carry a program's sockets over rsocket, falls back to the kernel's TCP when rsocket fails: the
// program would run, on something else, with nothing but a line to say so. So where librspreload
// is in the process, the first socket it would carry stops the program, saying why.
#include <link.h>
#include <unistd.h>

#include <cstring>

#include "vrdma/rdmacm/state.hh"

namespace {

bool rspreload_loaded() {
  return dl_iterate_phdr([](dl_phdr_info* info, size_t, void*) { return info->dlpi_name && std::strstr(info->dlpi_name, "librspreload") ? 1 : 0; },
                         nullptr) != 0;
}

}  // namespace

using namespace rb::rdmacm;

RDMACM_EXPORT int rsocket(int, int, int) {
  say("rsocket (librdmacm's sockets over RDMA) is not supported on vrdma");
  if (rspreload_loaded()) {
    say("librspreload would carry this program's sockets over the kernel's TCP instead: stopping");
    _exit(2);
  }
  return fail(EOPNOTSUPP);
}
