#include "vrdma/lib/context.hh"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include <fmt/format.h>

namespace rb::vrdma {
namespace {

template <class T>
Call<T> fail(int err, std::string message) {
  Call<T> c;
  c.error = {err, std::move(message)};
  return c;
}

template <class T>
Call<T> done(T v) {
  Call<T> c;
  c.value = std::move(v);
  return c;
}

int errno_of(Errc c) {
  switch (c) {
    case Errc::timeout: return ETIMEDOUT;
    case Errc::peer_gone: return ECONNRESET;
    case Errc::unavailable: return ENOENT;
    case Errc::invalid_argument: return EINVAL;
    default: return EIO;
  }
}

}  // namespace

std::string default_socket_path() {
  if (const char* s = std::getenv("VRDMA_SOCKET"); s && *s) return s;
  if (const char* d = std::getenv("XDG_RUNTIME_DIR"); d && *d) return std::string(d) + "/vrdma.sock";
  return "/run/vrdma/vrdma.sock";
}

Call<std::unique_ptr<Context>> Context::open(const std::string& socket_path) {
  auto sock = ipc::connect_to(socket_path);
  if (!sock) return fail<std::unique_ptr<Context>>(errno_of(sock.status().code()), sock.status().message());
  std::unique_ptr<Context> c(new Context());
  c->sock_ = std::move(*sock);
  c->path_ = socket_path;
  proto::Hello h;
  h.pid = uint32_t(getpid());
  auto a = c->ask(proto::Type::hello, h, proto::Type::welcome);
  if (!a.ok()) return fail<std::unique_ptr<Context>>(a.error.err, a.error.message);
  c->tenant_ = proto::get_text(a.value->msg.as<proto::Welcome>().tenant, proto::kNameBytes);
  return done(std::move(c));
}

Call<Context::Answer> Context::ask(proto::Type t, std::span<const uint8_t> body, proto::Type want) {
  std::lock_guard lk(mu_);
  if (broken_) return fail<Answer>(ECONNRESET, broken_why_);
  uint32_t seq = ++seq_;
  auto lost = [&](const Status& st) {
    broken_ = true;
    broken_why_ = fmt::format("vrdma router at {}: {}", path_, st.message());
    return fail<Answer>(errno_of(st.code()), broken_why_);
  };
  if (Status st = ipc::send_packet(sock_.get(), proto::encode(t, seq, body)); !st) return lost(st);
  auto p = ipc::recv_packet(sock_.get(), proto::kMaxMessage, kReplyTimeoutMs);
  if (!p) return lost(p.status());
  if (p->bytes.empty()) return lost({Errc::peer_gone, "closed the connection"});
  Answer a;
  a.packet = std::move(p->bytes);
  a.fd = std::move(p->fd);
  proto::Parsed parsed = proto::parse(a.packet);
  if (!parsed.msg) return lost({Errc::io, "answered garbage: " + parsed.error});
  a.msg = *parsed.msg;
  if (a.msg.h.seq != seq) return lost({Errc::io, fmt::format("answered request {} to request {}", a.msg.h.seq, seq)});
  if (a.msg.type() == proto::Type::error) {
    auto e = a.msg.as<proto::Error>();
    return fail<Answer>(e.err > 0 ? e.err : EIO, proto::get_text(e.message, sizeof e.message));
  }
  if (a.msg.type() != want)
    return lost({Errc::io, fmt::format("answered {} where {} was due", proto::type_name(a.msg.type()), proto::type_name(want))});
  return done(std::move(a));
}

Call<uint32_t> Context::alloc_pd() {
  auto a = ask(proto::Type::alloc_pd, std::span<const uint8_t>{}, proto::Type::handle);
  if (!a.ok()) return fail<uint32_t>(a.error.err, a.error.message);
  return done(a.value->msg.as<proto::Handle>().id);
}

Call<bool> Context::dealloc_pd(uint32_t pd) {
  auto a = ask(proto::Type::dealloc_pd, proto::Handle{pd}, proto::Type::done);
  if (!a.ok()) return fail<bool>(a.error.err, a.error.message);
  return done(true);
}

Call<std::unique_ptr<Region>> Context::alloc_mr(uint32_t pd, uint64_t len, uint32_t access) {
  auto a = ask(proto::Type::reg_mr, proto::RegMr{pd, access, len}, proto::Type::mr_granted);
  if (!a.ok()) return fail<std::unique_ptr<Region>>(a.error.err, a.error.message);
  auto g = a.value->msg.as<proto::MrGranted>();
  if (!a.value->fd || g.len != len || g.map_len < len)
    return fail<std::unique_ptr<Region>>(EIO, "vrdma router granted a region without its memory");
  auto m = Mapping::map(a.value->fd.get(), g.map_len);
  if (!m) return fail<std::unique_ptr<Region>>(ENOMEM, m.status().message());
  return done(std::make_unique<Region>(Region{g.lkey, g.rkey, pd, len, std::move(*m)}));
}

Call<bool> Context::dereg_mr(const Region& r) {
  auto a = ask(proto::Type::dereg_mr, proto::Handle{r.lkey}, proto::Type::done);
  if (!a.ok()) return fail<bool>(a.error.err, a.error.message);
  return done(true);
}

Call<std::string> Context::stats() {
  auto a = ask(proto::Type::stats, std::span<const uint8_t>{}, proto::Type::stats_text);
  if (!a.ok()) return fail<std::string>(a.error.err, a.error.message);
  auto tail = a.value->msg.tail;
  return done(std::string(tail.begin(), tail.end()));
}

}  // namespace rb::vrdma
