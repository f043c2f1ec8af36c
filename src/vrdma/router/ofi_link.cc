// OfiFabric's connections: made to a router when something is first posted to it, taken from a
// router that connects, each only once its other end has proved the cluster's key
// (link_handshake.hh). Their events come on one EQ, read every few polls and whenever the
// router wakes from a park.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "vrdma/router/ofi_fabric.hh"
#include "vrdma/router/sock_address.hh"

namespace rb::vrdma {
namespace {

constexpr int64_t kRetryNs = 100'000'000;       // after a connection failed, the next is tried no sooner
constexpr int64_t kMakeBoundNs = 5'000'000'000;  // a connection not up within this is given up
constexpr size_t kLinksPerPeer = 4;             // connections one router may hold to this one
constexpr size_t kMaxLinks = 4096;
constexpr int kEventsPerTurn = 16;

// A connection this router makes leaves from its --listen address (so that its peer and the link
// guard see it come from there), on a port of the kernel's choosing.
void any_port(fi_info* info) {
  if (!info->src_addr) return;
  auto* sa = static_cast<sockaddr*>(info->src_addr);
  if (sa->sa_family == AF_INET) reinterpret_cast<sockaddr_in*>(sa)->sin_port = 0;
  if (sa->sa_family == AF_INET6) reinterpret_cast<sockaddr_in6*>(sa)->sin6_port = 0;
}

}  // namespace

fid_ep* OfiFabric::out_ep(uint64_t peer) {
  auto it = peers_.find(peer);
  if (it == peers_.end()) return nullptr;
  Peer& p = it->second;
  if (p.out) return p.out->ep;
  if (!p.making && mono_ns() >= p.retry_ns) {
    if (Status s = connect(peer); !s) {
      last_failure_ = s.message();
      p.retry_ns = mono_ns() + kRetryNs;
    }
  }
  return nullptr;
}

Status OfiFabric::connect(uint64_t peer) {
  Peer& p = peers_.at(peer);
  if (links_.size() >= kMaxLinks)
    return Status(Errc::unavailable, fmt::format("{} link connections are open already", kMaxLinks));
  auto l = std::make_unique<Link>();
  l->peer = peer;
  l->made = true;
  l->since_ns = mono_ns();
  l->sent = handshake_.request(self_, p.at);
  fi_info* info = fi_dupinfo(info_);
  if (!info) return Status(Errc::unavailable, "fi_dupinfo failed");
  any_port(info);
  auto ep = open_ep(info, l.get());
  fi_freeinfo(info);
  if (!ep) return ep.status();
  l->ep = *ep;
  sockaddr_storage to = sockaddr_of(p.at, info_->addr_format == FI_SOCKADDR_IN ? AF_INET : AF_INET6);
  if (int rc = fi_connect(l->ep, &to, &l->sent, sizeof l->sent)) {
    fi_close(&l->ep->fid);
    return Status(Errc::io, fmt::format("fi_connect to router {}: {}", proto::to_string(p.at), fi_error(rc)));
  }
  ++p.links;
  ++connecting_;
  Link* raw = l.get();
  p.making = raw;
  links_.emplace(raw, std::move(l));
  return {};
}

// An endpoint on the shared CQ and receive context, its events on the EQ, with `link` its context.
Result<fid_ep*> OfiFabric::open_ep(fi_info* info, Link* link) {
  fid_ep* ep = nullptr;
  int rc = fi_endpoint(domain_, info, &ep, link);
  if (rc) return Status(Errc::io, "fi_endpoint: " + fi_error(rc));
  const char* what = nullptr;
  if ((rc = fi_ep_bind(ep, &eq_->fid, 0))) what = "fi_ep_bind(eq)";
  else if ((rc = fi_ep_bind(ep, &cq_->fid, FI_TRANSMIT | FI_RECV))) what = "fi_ep_bind(cq)";
  else if ((rc = fi_ep_bind(ep, &srx_->fid, 0))) what = "fi_ep_bind(srx)";
  else if ((rc = fi_enable(ep))) what = "fi_enable";
  if (what) {
    fi_close(&ep->fid);
    return Status(Errc::io, fmt::format("{}: {}", what, fi_error(rc)));
  }
  return ep;
}

void OfiFabric::handle_connections() {
  events_due_ = false;
  alignas(fi_eq_cm_entry) uint8_t buf[sizeof(fi_eq_cm_entry) + 256];
  auto* e = reinterpret_cast<fi_eq_cm_entry*>(buf);
  for (int n = 0; n < kEventsPerTurn; ++n) {
    uint32_t event = 0;
    errno = 0;  // see try_wait
    ssize_t rd = fi_eq_read(eq_, &event, buf, sizeof buf, 0);
    if (rd == -FI_EAVAIL) {
      fi_eq_err_entry err{};
      if (fi_eq_readerr(eq_, &err, 0) < 0) break;
      if (Link* l = link_of(err.fid))
        close_link(l, fmt::format("the connection to router {} failed: {}", proto::to_string(peers_[l->peer].at),
                                  fi_error(err.err)));
      continue;
    }
    if (rd < ssize_t(sizeof *e)) break;
    std::span<const uint8_t> data(buf + sizeof *e, size_t(rd) - sizeof *e);
    if (event == FI_CONNREQ) {
      on_request(e->info, data);
    } else if (Link* l = link_of(e->fid); l && event == FI_CONNECTED) {
      on_connected(l, data);
    } else if (l && event == FI_SHUTDOWN) {
      close_link(l, fmt::format("router {} closed its connection", proto::to_string(peers_[l->peer].at)));
    }
  }
  if (connecting_) expire_links(mono_ns());
}

// A router connecting: taken when it proves the key (and has room), refused otherwise.
void OfiFabric::on_request(fi_info* info, std::span<const uint8_t> data) {
  proto::RouterAddress from;
  std::string why;
  auto answer = handshake_.take(data, self_, &from, &why);
  Result<uint64_t> peer = Status(Errc::validation, why);
  if (answer) peer = peer_of(from);
  // A router that proved the key connects again: the oldest connection it made is likely dead (a
  // host that went down says nothing), so that one makes room.
  if (peer && peers_[*peer].links >= kLinksPerPeer) close_oldest(*peer);
  if (peer && links_.size() >= kMaxLinks)
    peer = Status(Errc::unavailable, fmt::format("{} link connections are open already", kMaxLinks));
  auto l = std::make_unique<Link>();
  Result<fid_ep*> ep = peer ? open_ep(info, l.get()) : Result<fid_ep*>(peer.status());
  if (!ep) {
    if (!peer) {
      ++refused_;
      last_refusal_ = fmt::format("a connection to the link was refused: {}", peer.status().message());
    } else {
      last_failure_ = ep.status().message();
    }
    fi_reject(pep_, info->handle, nullptr, 0);
    fi_freeinfo(info);
    return;
  }
  l->ep = *ep;
  int rc = fi_accept(l->ep, &*answer, sizeof *answer);
  fi_freeinfo(info);
  if (rc) {
    fi_close(&l->ep->fid);  // the request's connection goes with it
    last_failure_ = "fi_accept: " + fi_error(rc);
    return;
  }
  l->peer = *peer;
  l->state = Link::accepting;
  l->since_ns = mono_ns();
  ++peers_[*peer].links;
  ++connecting_;
  Link* raw = l.get();
  links_.emplace(raw, std::move(l));
}

// Up: a connection this router made once its answer proves the key; one it took at once.
void OfiFabric::on_connected(Link* l, std::span<const uint8_t> data) {
  if (l->state == Link::up) return;
  std::string why;
  if (l->state == Link::connecting && !handshake_.answers(data, l->sent, &why)) {
    ++refused_;
    last_refusal_ = fmt::format("the router at {} did not prove the key: {}", proto::to_string(peers_[l->peer].at), why);
    close_link(l, last_refusal_);
    return;
  }
  if (l->state == Link::accepting) {  // for the link guard: this connection's far end proved the key
    ++accepted_;
    sockaddr_storage far{};
    size_t len = sizeof far;
    if (fi_getpeer(l->ep, &far, &len) == 0 && accepted_ends_.size() < kMaxLinks)
      accepted_ends_.push_back(router_address_of(far));
  }
  --connecting_;
  l->state = Link::up;
  if (l->made) peers_[l->peer].out = l;
}

OfiFabric::Link* OfiFabric::link_of(fid_t f) {
  if (!f) return nullptr;
  auto it = links_.find(static_cast<Link*>(f->context));
  return it == links_.end() ? nullptr : it->second.get();
}

// Its posts fail (the provider flushes them to the CQ as cancelled); the peer's next posts wait
// for a new connection of this router's.
void OfiFabric::close_link(Link* l, const std::string& why) {
  auto it = peers_.find(l->peer);
  if (l->state != Link::up) --connecting_;
  if (!why.empty()) last_failure_ = why;
  fi_close(&l->ep->fid);
  if (it != peers_.end()) {
    Peer& p = it->second;
    --p.links;
    if (l->state != Link::up) p.retry_ns = mono_ns() + kRetryNs;
    if (p.out == l) p.out = nullptr;
    if (p.making == l) p.making = nullptr;
  }
  links_.erase(l);
}

void OfiFabric::close_oldest(uint64_t peer) {
  Link* oldest = nullptr;
  for (auto& [raw, l] : links_)
    if (l->peer == peer && !l->made && (!oldest || l->since_ns < oldest->since_ns)) oldest = raw;
  if (oldest)
    close_link(oldest, fmt::format("router {} connected again: its oldest connection made room",
                                   proto::to_string(peers_[peer].at)));
}

void OfiFabric::expire_links(int64_t now_ns) {
  std::vector<Link*> late;
  for (auto& [raw, l] : links_)
    if (l->state != Link::up && now_ns - l->since_ns > kMakeBoundNs) late.push_back(raw);
  for (Link* l : late)
    close_link(l, fmt::format("no connection to router {} was made within {} s", proto::to_string(peers_[l->peer].at),
                              kMakeBoundNs / 1'000'000'000));
}

}  // namespace rb::vrdma
