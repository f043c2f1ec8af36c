#pragma once
// Where a router listens and a client looks for it, unless told: $VRDMA_SOCKET, else
// $XDG_RUNTIME_DIR/vrdma.sock, else /run/vrdma/vrdma.sock.
#include <string>

namespace rb::vrdma::ipc {
std::string default_socket_path();
}  // namespace rb::vrdma::ipc
