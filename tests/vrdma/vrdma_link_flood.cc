// A stranger at a router's --listen port, for the e2e security tests: it speaks the link's own
// fabric (tcp) but holds no key, and sends link messages as fast as the fabric takes them for
// SECONDS: badmac, full-size messages with a trailer of zeros; short, 8 bytes. Its connection's
// request proves no key, so a router refuses it and the messages never leave (what it sent is
// what it posted). hold:N opens N endpoints instead (own ports OWN_PORT..OWN_PORT+N-1), each
// sends one short message and then holds what it has for SECONDS.
//   vrdma_link_flood ROUTER OWN SECONDS badmac|short|hold:N   prints "sent=N"
// ROUTER and OWN are PORT (on 127.0.0.1) or HOST:PORT.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "vrdma/proto/link.hh"
#include "vrdma/router/fabric.hh"
#include "vrdma/router/link_auth.hh"

using namespace rb::vrdma;

namespace {

// A stranger holds no key: its connections' requests carry no MAC that verifies.
LinkAuth stranger;

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

// "PORT" on 127.0.0.1, or "HOST:PORT".
std::optional<proto::RouterAddress> address(const std::string& arg, uint16_t plus, std::string* why) {
  std::string text = arg.find(':') == std::string::npos ? "127.0.0.1:" + arg : arg;
  auto a = proto::parse_router_address(text, why);
  if (a) a->port = uint16_t(a->port + plus);
  return a;
}

// N strangers at once, each on a connection of its own that spoke once; held until `until`.
template <class Until>
int hold(const proto::RouterAddress& to, const std::string& own, int n, Until until) {
  std::vector<std::unique_ptr<Fabric>> held;
  Sink sink;
  std::string why;
  for (int i = 0; i < n; ++i) {
    auto me = address(own, uint16_t(i), &why);
    if (!me) return std::fprintf(stderr, "vrdma_link_flood: %s\n", why.c_str()), 2;
    auto f = open_fabric("tcp", *me, stranger);
    if (!f) return std::fprintf(stderr, "vrdma_link_flood: %s\n", f.status().message().c_str()), 1;
    (void)(*f)->send(to, std::vector<uint8_t>(8, 0), sink);
    held.push_back(std::move(*f));
  }
  while (std::chrono::steady_clock::now() < until)
    for (auto& f : held) f->poll(sink);
  std::printf("sent=%d\n", n);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: vrdma_link_flood ROUTER OWN SECONDS badmac|short|hold:N\n");
    return 2;
  }
  std::string why;
  auto to = address(argv[1], 0, &why);
  auto me = address(argv[2], 0, &why);
  if (!to || !me) return std::fprintf(stderr, "vrdma_link_flood: %s\n", why.c_str()), 2;
  auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(std::atof(argv[3]));
  if (std::strncmp(argv[4], "hold:", 5) == 0) return hold(*to, argv[2], std::atoi(argv[4] + 5), until);
  auto fabric = open_fabric("tcp", *me, stranger);
  if (!fabric) return std::fprintf(stderr, "vrdma_link_flood: %s\n", fabric.status().message().c_str()), 1;
  std::vector<uint8_t> msg = std::strcmp(argv[4], "short") == 0 ? std::vector<uint8_t>(8, 0) : garbage_op(*me);
  Sink sink;
  long sent = 0;
  while (std::chrono::steady_clock::now() < until) {
    (*fabric)->poll(sink);
    if ((*fabric)->posts_waiting()) continue;
    for (int k = 0; k < 32 && (*fabric)->send(*to, msg, sink); ++k) ++sent;
  }
  for (int i = 0; i < 1000; ++i) (*fabric)->poll(sink);  // let the last posts go out
  std::printf("sent=%ld\n", sent);
  return 0;
}
