// What the router receives from clients: a request whose descriptors the router had no room for.
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "forked_child.hh"
#include "vrdma/ipc/seqpacket.hh"

namespace rb::vrdma {
namespace {

// A router out of descriptors cannot take those a well-formed request brings: the kernel cuts the
// packet's control part. That once read as a hostile packet, and the tenant's session was dropped.
TEST(RecvPacket, OutOfDescriptorsTheRequestStillComesAndSaysSo) {
  test::ForkedChild child([] {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) != 0) return 10;
    const uint8_t bytes[] = {1, 2, 3};
    if (!ipc::send_packet(sv[0], bytes, sv[0])) return 11;
    rlimit few{64, 64};
    if (setrlimit(RLIMIT_NOFILE, &few) != 0) return 12;
    while (dup(0) >= 0) {
    }
    auto p = ipc::recv_packet(sv[1], 16, 1000, nullptr);
    if (!p) return 13;  // refused: what the old code did
    return p->bytes.size() == 3 && p->fds_lost && !p->fd ? 0 : 14;
  });
  ASSERT_TRUE(child.started());
  EXPECT_EQ(child.wait(10), 0);
}

}  // namespace
}  // namespace rb::vrdma
