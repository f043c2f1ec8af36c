#pragma once
// One packet over a Unix SOCK_SEQPACKET socket, with at most two descriptors riding along
// (SCM_RIGHTS: a QP's memory and its doorbell). The socket keeps packet boundaries, so a reader never reassembles anything, and
// a packet longer than the buffer is refused rather than cut.
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "core/status.hh"
#include "core/unique_fd.hh"

namespace rb::vrdma::ipc {

// Sends `bytes` (and `fd`, `fd2` when >= 0) as one packet. MSG_NOSIGNAL: a dead peer is an
// error, not SIGPIPE.
Status send_packet(int sock, std::span<const uint8_t> bytes, int fd = -1, int fd2 = -1);

struct Packet {
  std::vector<uint8_t> bytes;  // empty: the peer closed the connection
  UniqueFd fd, fd2;            // descriptors that came with it, in the order sent
  bool fds_lost = false;       // the receiver was out of descriptors: some that came were not taken
};
// Receives one packet of at most `max` bytes, waiting at most `timeout_ms` (-1: no limit).
// Errc::timeout when none came in time, Errc::peer_gone on a reset. Descriptors past two, or
// with a packet that is refused, go to `stray` when given (a daemon closes what a client sent
// where that cannot make it wait), else they are closed here.
Result<Packet> recv_packet(int sock, size_t max, int timeout_ms,
                           const std::function<void(UniqueFd)>& stray = {});

// A listening socket at `path` (an old socket file there is replaced), readable and writable by
// everyone: who may use it is decided per connection from SO_PEERCRED. Its connections refuse
// descriptors where the kernel can (see let_pass_descriptors), until the daemon lets them in.
Result<UniqueFd> listen_at(const std::string& path);

// SO_PASSRIGHTS (Linux 6.16): whether a peer may pass `sock` descriptors (a sender is refused
// with EPERM). A listener's setting is each connection's from its connect on, so one a daemon
// refuses never held a descriptor. False where the kernel has no such switch.
bool let_pass_descriptors(int sock, bool allowed);
// True when `sock` refuses descriptors; false where the kernel cannot refuse them.
bool refuses_descriptors(int sock);

Result<UniqueFd> connect_to(const std::string& path);

struct PeerCred {
  uint32_t pid = 0, uid = 0, gid = 0;
};
Result<PeerCred> peer_cred(int sock);

}  // namespace rb::vrdma::ipc
