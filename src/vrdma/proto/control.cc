#include "vrdma/proto/control.hh"

#include <algorithm>

namespace rb::vrdma::proto {

const char* type_name(Type t) {
  switch (t) {
    case Type::hello: return "hello";
    case Type::welcome: return "welcome";
    case Type::error: return "error";
    case Type::alloc_pd: return "alloc_pd";
    case Type::dealloc_pd: return "dealloc_pd";
    case Type::reg_mr: return "reg_mr";
    case Type::mr_granted: return "mr_granted";
    case Type::dereg_mr: return "dereg_mr";
    case Type::handle: return "handle";
    case Type::done: return "done";
    case Type::stats: return "stats";
    case Type::stats_text: return "stats_text";
    case Type::create_qp: return "create_qp";
    case Type::qp_created: return "qp_created";
    case Type::connect_qp: return "connect_qp";
    case Type::qp_connected: return "qp_connected";
    case Type::grant: return "grant";
    case Type::granted: return "granted";
    case Type::destroy_qp: return "destroy_qp";
    case Type::send_doorbell: return "send_doorbell";
    case Type::create_srq: return "create_srq";
    case Type::destroy_srq: return "destroy_srq";
    case Type::create_ah: return "create_ah";
    case Type::destroy_ah: return "destroy_ah";
    case Type::peer_srq: return "peer_srq";
    case Type::cm_sign: return "cm_sign";
    case Type::cm_signed: return "cm_signed";
  }
  return "unknown";
}

std::optional<size_t> body_size(Type t) {
  switch (t) {
    case Type::hello: return sizeof(Hello);
    case Type::welcome: return sizeof(Welcome);
    case Type::error: return sizeof(Error);
    case Type::alloc_pd:
    case Type::done: return 0;
    case Type::stats: return sizeof(StatsAsk);
    case Type::dealloc_pd:
    case Type::dereg_mr:
    case Type::handle: return sizeof(Handle);
    case Type::reg_mr: return sizeof(RegMr);
    case Type::mr_granted: return sizeof(MrGranted);
    case Type::stats_text: return sizeof(StatsText);
    case Type::create_qp: return sizeof(CreateQp);
    case Type::qp_created: return sizeof(QpCreated);
    case Type::connect_qp: return sizeof(ConnectQp);
    case Type::qp_connected: return sizeof(QpConnected);
    case Type::grant: return sizeof(GrantAsk);
    case Type::granted: return sizeof(Granted);
    case Type::destroy_qp:
    case Type::destroy_srq:
    case Type::destroy_ah:
    case Type::peer_srq:
    case Type::send_doorbell: return sizeof(Handle);
    case Type::create_srq: return sizeof(CreateSrq);
    case Type::create_ah: return sizeof(CreateAh);
    case Type::cm_sign: return sizeof(CmSign);
    case Type::cm_signed: return sizeof(CmSigned);
  }
  return std::nullopt;
}

Parsed parse(std::span<const uint8_t> packet) {
  Parsed out;
  if (packet.size() < sizeof(Header)) {
    out.error = "a packet of " + std::to_string(packet.size()) + " B is shorter than the header";
    return out;
  }
  Message m;
  std::memcpy(&m.h, packet.data(), sizeof m.h);
  if (m.h.magic != kMagic) {
    out.error = "not a vrdma packet (bad magic)";
    return out;
  }
  if (m.h.version != kVersion) {
    out.error = "protocol version " + std::to_string(m.h.version) + ", this side speaks " + std::to_string(kVersion);
    return out;
  }
  auto want = body_size(m.type());
  if (!want) {
    out.error = "unknown message type " + std::to_string(m.h.type);
    return out;
  }
  size_t rest = packet.size() - sizeof(Header);
  if (m.h.body != rest || rest < *want) {
    out.error = std::string(type_name(m.type())) + ": body of " + std::to_string(rest) + " B, header says " +
                std::to_string(m.h.body) + ", the type needs " + std::to_string(*want);
    return out;
  }
  m.body = packet.subspan(sizeof(Header), *want);
  m.tail = packet.subspan(sizeof(Header) + *want);
  // Only stats text carries bytes after its fixed body, exactly as many as it says.
  if (m.type() == Type::stats_text) {
    if (m.as<StatsText>().len != m.tail.size()) {
      out.error = "stats_text: length field disagrees with the packet";
      return out;
    }
  } else if (!m.tail.empty()) {
    out.error = std::string(type_name(m.type())) + ": " + std::to_string(m.tail.size()) + " B too many";
    return out;
  }
  out.msg = m;
  return out;
}

std::vector<uint8_t> encode(Type t, uint32_t seq, std::span<const uint8_t> body, std::span<const uint8_t> tail) {
  Header h;
  h.type = uint16_t(t);
  h.seq = seq;
  h.body = uint32_t(body.size() + tail.size());
  std::vector<uint8_t> out(sizeof h + h.body);
  std::memcpy(out.data(), &h, sizeof h);
  if (!body.empty()) std::memcpy(out.data() + sizeof h, body.data(), body.size());
  if (!tail.empty()) std::memcpy(out.data() + sizeof h + body.size(), tail.data(), tail.size());
  return out;
}

void put_text(char* field, size_t size, const std::string& s) {
  size_t n = std::min(size - 1, s.size());
  std::memcpy(field, s.data(), n);
  std::memset(field + n, 0, size - n);
}

std::string get_text(const char* field, size_t size) { return std::string(field, strnlen(field, size)); }

}  // namespace rb::vrdma::proto
