#include "vrdma/ipc/socket_path.hh"

#include <cstdlib>

namespace rb::vrdma::ipc {

std::string default_socket_path() {
  if (const char* s = std::getenv("VRDMA_SOCKET"); s && *s) return s;
  if (const char* d = std::getenv("XDG_RUNTIME_DIR"); d && *d) return std::string(d) + "/vrdma.sock";
  return "/run/vrdma/vrdma.sock";
}

}  // namespace rb::vrdma::ipc
