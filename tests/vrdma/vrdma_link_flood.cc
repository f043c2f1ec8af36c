// A stranger at a router's --listen port, for the e2e security tests: it speaks the link's own
// fabric (tcp;ofi_rxm) but holds no key, and sends link messages as fast as the fabric takes
// them for SECONDS. Each costs the router a MAC check (badmac: full-size messages with a trailer
// of zeros) or a length check (short: 8 bytes).
//   vrdma_link_flood ROUTER_PORT OWN_PORT SECONDS badmac|short   prints "sent=N"
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "vrdma/proto/link.hh"
#include "vrdma/router/fabric.hh"
#include "vrdma/router/link_auth.hh"

using namespace rb::vrdma;

namespace {

struct Sink : LinkSink {
  void on_message(std::span<const uint8_t>) override {}
  void on_rma(uint64_t, bool) override {}
  void on_send_failed(const proto::RouterAddress&) override {}
};

std::vector<uint8_t> garbage_op(const proto::RouterAddress& me) {
  proto::LinkHeader h;
  h.from_router = 0x1234567;
  h.from = me;
  h.req = 1;
  std::vector<uint8_t> inline_bytes(proto::kLinkInline, 0);
  proto::LinkOp op{};
  op.len = proto::kLinkInline;
  std::vector<uint8_t> msg;
  proto::encode_link(msg, h, proto::LinkType::op, std::span<const uint8_t>(reinterpret_cast<uint8_t*>(&op), sizeof op),
                     std::span<const uint8_t>(inline_bytes));
  msg.resize(msg.size() + sizeof(LinkTrailer));  // a MAC of zeros: it never verifies
  return msg;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: vrdma_link_flood ROUTER_PORT OWN_PORT SECONDS badmac|short\n");
    return 2;
  }
  std::string why;
  auto to = proto::parse_router_address(std::string("127.0.0.1:") + argv[1], &why);
  auto me = proto::parse_router_address(std::string("127.0.0.1:") + argv[2], &why);
  if (!to || !me) return std::fprintf(stderr, "vrdma_link_flood: %s\n", why.c_str()), 2;
  auto fabric = open_fabric("tcp;ofi_rxm", *me);
  if (!fabric) return std::fprintf(stderr, "vrdma_link_flood: %s\n", fabric.status().message().c_str()), 1;
  std::vector<uint8_t> msg = std::strcmp(argv[4], "short") == 0 ? std::vector<uint8_t>(8, 0) : garbage_op(*me);
  Sink sink;
  long sent = 0;
  auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(std::atof(argv[3]));
  while (std::chrono::steady_clock::now() < until) {
    (*fabric)->poll(sink);
    if ((*fabric)->posts_waiting()) continue;
    for (int k = 0; k < 32 && (*fabric)->send(*to, msg, sink); ++k) ++sent;
  }
  for (int i = 0; i < 1000; ++i) (*fabric)->poll(sink);  // let the last posts go out
  std::printf("sent=%ld\n", sent);
  return 0;
}
