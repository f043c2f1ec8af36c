// libFuzzer target: what a hostile peer controls in vrdma. Each input is tried as a control
// packet (proto::parse, then the body of whatever type it claims), as a packet on the routers'
// link (its trailer checked by LinkAuth without a key and with one, then proto::parse_link, its
// body and payload, on what is left), as a link connection's request and answer (LinkHandshake,
// without a key and with one) and as a QP's shared memory
// laid out by a peer (view_qp, then the rings popped as the library pops them). `make fuzz` runs
// it under AddressSanitizer and UndefinedBehaviorSanitizer.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "vrdma/proto/qp_view.hh"
#include "vrdma/proto/control.hh"
#include "vrdma/proto/link.hh"
#include "vrdma/router/link_auth.hh"
#include "vrdma/router/link_handshake.hh"

using namespace rb::vrdma;

namespace {

uint64_t touch_message(const proto::Message& m) {
  using proto::Type;
  switch (m.type()) {
    case Type::reg_mr: return m.as<proto::RegMr>().len;
    case Type::mr_granted: return m.as<proto::MrGranted>().map_len;
    case Type::welcome: return proto::get_text(m.as<proto::Welcome>().tenant, proto::kNameBytes).size();
    case Type::error: return proto::get_text(m.as<proto::Error>().message, sizeof(proto::Error::message)).size();
    case Type::create_qp: return m.as<proto::CreateQp>().mem_len;
    case Type::create_srq: return m.as<proto::CreateSrq>().mem_len;
    case Type::connect_qp: return m.as<proto::ConnectQp>().peer_router;
    case Type::granted: return m.as<proto::Granted>().len;
    case Type::stats_text: return m.tail.size();
    default: return m.body.size();
  }
}

uint64_t touch_link(const proto::LinkMessage& m) {
  using proto::LinkType;
  switch (m.type()) {
    case LinkType::connect: return proto::get_text(m.as<proto::LinkConnect>().tenant, proto::kNameBytes).size();
    case LinkType::key_reply: return m.as<proto::LinkKey>().len;
    case LinkType::op: {
      auto op = m.as<proto::LinkOp>();
      uint64_t sum = op.len;
      for (uint8_t i = 0; i < op.npieces; ++i) sum += op.pieces[i].len;
      for (uint8_t b : m.tail) sum += b;
      return sum;
    }
    default: return m.body.size() + proto::to_string(m.h.from).size();
  }
}

uint64_t touch_qp(const uint8_t* data, size_t size) {
  // Cache-line aligned as a mapping is, and sized to the input (to the next 64 B) so the
  // sanitizer sees a read past it.
  size_t len = (size + 63) / 64 * 64;
  std::unique_ptr<uint8_t, decltype(&std::free)> mem(static_cast<uint8_t*>(std::aligned_alloc(64, len ? len : 64)), &std::free);
  std::memcpy(mem.get(), data, size);
  auto v = view_qp({mem.get(), size});
  if (!v) return 0;
  uint64_t sum = 0;
  proto::RecvEntry e;
  for (int i = 0; i < 8 && v->recvs.pop(e); ++i) sum += e.nsge < proto::kMaxSge ? e.sge[e.nsge].len : e.wr_id;
  proto::Arrival a;
  for (int i = 0; i < 8 && v->arrivals.pop(a); ++i) sum += a.byte_len + a.recv_seq;
  return sum;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  volatile uint64_t sink = 0;
  proto::Parsed p = proto::parse({data, size});
  if (p.msg) sink = touch_message(*p.msg);
  std::string why;
  // A router without a key (--insecure-link) gets past the MAC: the time and window checks and
  // the parse behind them are reached; one with a key stops at the MAC.
  static LinkAuth open_link, keyed_link({LinkKey32{1, 2, 3}});
  uint64_t from = size >= 16 ? data[8] : 0;  // few senders: their windows are exercised, not only made
  if (auto body = open_link.open({data, size}, from, proto::RouterAddress{}, &why))
    if (auto l = proto::parse_link(*body, &why)) sink = sink + touch_link(*l);
  if (keyed_link.open({data, size}, from, proto::RouterAddress{}, &why)) std::abort();  // nobody forges a MAC by chance
  // A link connection's request, and its answer, as a router takes them from a stranger.
  static LinkHandshake open_hs(open_link), keyed_hs(keyed_link);
  proto::RouterAddress peer;
  if (auto a = open_hs.take({data, size}, proto::RouterAddress{}, &peer, &why)) sink = sink + a->nonce[0] + peer.port;
  if (keyed_hs.take({data, size}, proto::RouterAddress{}, &peer, &why)) std::abort();
  static const ConnectRequest asked = keyed_hs.request(proto::RouterAddress{}, proto::RouterAddress{});
  if (keyed_hs.answers({data, size}, asked, &why)) std::abort();
  if (auto l = proto::parse_link({data, size}, &why)) sink = sink + touch_link(*l);
  sink = sink + touch_qp(data, size);
  (void)sink;
  return 0;
}
