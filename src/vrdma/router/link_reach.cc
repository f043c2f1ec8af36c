// Which routers a tenant's requests may go to. A tenant names another host's router by its
// address (a QP's peer, an address handle), so, unguarded, a tenant could have its router open
// connections to any address and port it liked, from wherever the router sits (a container's
// tenant, to the host's network). Now an address must be inside [router] link_networks (when the
// config sets it), and it is sent nothing of a tenant's until it has proven the cluster's key:
// the router greets it with a hello and waits for an authenticated answer. Unproven addresses
// are tried a few at a time (kMaxProbes, kMaxProbesPerTenant: a tenant's many uids, a rootless
// container's subordinate ones, count as one); one that did not answer is not tried
// again for 10 s, and the fabric forgets it. A tenant whose request waits on a probe is answered
// as if its request had been sent: the same error at the same bound, so it learns nothing of
// what listens where.
#include <cerrno>

#include <fmt/format.h>

#include "vrdma/router/data_path.hh"

namespace rb::vrdma {
namespace {

constexpr auto kProbeBound = std::chrono::milliseconds(800);  // a connect's bound: see link_control.cc

}  // namespace

// Proven, and heard from lately: a router that went quiet is greeted again before a new request
// goes there, so one whose port another process took since it died is not trusted on its word.
bool Router::proven(const proto::RouterAddress& at) const {
  auto p = peers_.find(proto::to_string(at));
  return p != peers_.end() && p->second.router_id && !p->second.unreachable &&
         std::chrono::steady_clock::now() - p->second.heard < kProofLapse;
}

Router::Reach Router::reach(const Session& s, const proto::RouterAddress& at, int* err, std::string* why) {
  std::string name = proto::to_string(at);
  if (!opts_.tenants.router().may_link(at)) {
    *err = EACCES;
    *why = fmt::format("router {} is outside the config's [router] link_networks", name);
    return Reach::refused;
  }
  if (proven(at)) return Reach::ready;
  if (auto p = probes_.find(name); p != probes_.end()) {
    p->second.tenants.insert(s.tenant.name);
    return Reach::probing;
  }
  // A tenant's own failed tries only: another's would tell it what that tenant tried.
  if (auto f = probe_failed_ns_.find(s.tenant.name + " " + name);
      f != probe_failed_ns_.end() && now_ns() - f->second < kFailedLatelyNs) {
    *err = EHOSTUNREACH;
    *why = fmt::format("router {} did not prove the cluster's key when last tried (within 10 s)", name);
    return Reach::refused;
  }
  size_t mine = 0;
  for (const auto& [n, p] : probes_) mine += p.tenant == s.tenant.name;
  if (probes_.size() >= kMaxProbes || mine >= kMaxProbesPerTenant) {
    *err = EAGAIN;
    *why = "too many routers not yet heard from are being tried; try again shortly";
    return Reach::refused;
  }
  probes_[name] = {at, s.tenant.name, {s.tenant.name}, std::chrono::steady_clock::now() + kProbeBound};
  link_send(at, proto::LinkType::hello, 0, proto::LinkHello{});
  return Reach::probing;
}

void Router::on_proven(const proto::RouterAddress& at) {
  probes_.erase(proto::to_string(at));
  for (auto it = connects_.begin(); it != connects_.end();) {
    PendingConnect& pc = it->second;
    auto s = sessions_.find(pc.session);
    if (pc.sent || !(pc.peer_at == at) || s == sessions_.end()) {
      ++it;
      continue;
    }
    proto::Message req;
    req.h.seq = pc.seq;
    if (pc.kind == PendingConnect::connect) {
      if (send_connect(it->first, pc, s->second.tenant.name)) {
        ++it;
        continue;
      }
      answer(s->second, error(s->second, req, EHOSTUNREACH, fmt::format("router {} cannot be reached", proto::to_string(at))));
    } else if (std::string why = no_room_for_ah(s->second); !why.empty()) {
      answer(s->second, error(s->second, req, ENOMEM, why));
    } else {
      answer(s->second, {proto::encode(proto::Type::handle, pc.seq, proto::Handle{add_ah(s->second, at)})});
    }
    it = connects_.erase(it);
  }
}

void Router::expire_probes() {
  auto now = std::chrono::steady_clock::now();
  for (auto it = probes_.begin(); it != probes_.end();) {
    if (it->second.deadline > now) {
      ++it;
      continue;
    }
    if (probe_failed_ns_.size() >= kMaxPeers) probe_failed_ns_.clear();
    for (const std::string& t : it->second.tenants) probe_failed_ns_[t + " " + it->first] = now_ns();
    if (unproven_.size() >= kMaxPeers) unproven_.erase(unproven_.begin());
    unproven_.push_back(it->second.at);
    it = probes_.erase(it);
  }
  // A hello still in flight keeps its address until it fails (the fabric's post bound).
  for (auto it = unproven_.begin(); it != unproven_.end();)
    it = proven(*it) || !fabric_ || fabric_->forget_address(*it) ? unproven_.erase(it) : std::next(it);
}

}  // namespace rb::vrdma
