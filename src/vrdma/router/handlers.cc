// The router's answers to each control request. Every check comes before any change, so a
// refused request leaves nothing behind.
#include <algorithm>
#include <cerrno>

#include <fmt/format.h>

#include "vrdma/router/data_path.hh"
#include "vrdma/router/router.hh"

namespace rb::vrdma {

using proto::Type;

Router::Reply Router::error(Session& s, const proto::Message& m, int err, const std::string& why) {
  if (s.welcomed && !s.observer) ++usage_[s.tenant.name].errors;
  proto::Error e;
  e.err = err;
  proto::put_text(e.message, sizeof e.message, why);
  return {proto::encode(Type::error, m.h.seq, e)};
}

Router::Reply Router::hello(Session& s, const proto::Message& m) {
  if (s.welcomed) return error(s, m, EPROTO, "hello twice on one connection");
  auto t = opts_.tenants.of_uid(s.uid);
  if (!t && opts_.tenants.router().is_admin(s.uid)) return welcome_observer(s, m);
  if (!t) {
    ++usage_["(no tenant)"].refused_clients;
    log_limited(fmt::format("refused {}", s.uid), fmt::format("client pid {} refused: {}", s.pid, t.status().message()));
    return error(s, m, EPERM, t.status().message());
  }
  // A connection is one of the router's descriptors: many uids (a user's subordinate range) each
  // within max_clients_per_uid once took them all. Root and admin_uids are always let in (the
  // router's own reserve), so the operator can see what holds them.
  TenantUsage& u = usage_[t->name];
  if (std::string why; s.uid != 0 && !opts_.tenants.router().is_admin(s.uid) && !host_allows(u, {0, 1}, &why)) {
    ++u.refused_clients;
    log_limited(fmt::format("share {}", s.uid), fmt::format("client pid {} (uid {}) refused: {}", s.pid, s.uid, why));
    s.hello_by_ns = now_ns();  // dropped at the loop's next look, as a client that said nothing
    return error(s, m, EUSERS, why);
  }
  s.tenant = *t;
  s.welcomed = true;
  ++u.clients;
  proto::Welcome w;
  proto::put_text(w.tenant, sizeof w.tenant, s.tenant.name);
  w.max_reg_bytes = s.tenant.max_reg_bytes;
  w.max_qps = s.tenant.max_qps;
  w.router_id = router_id_;
  w.direct = s.tenant.direct && !s.tenant.rate_limited();  // rate limits are enforced on the router path
  w.listen = opts_.listen;
  log_limited(fmt::format("hello {}", s.uid), fmt::format("client {} (pid {}, uid {}) is tenant {}", s.id, s.pid, s.uid, s.tenant.name));
  return {proto::encode(Type::welcome, m.h.seq, w)};
}

// An operator's vrdmactl under a config whose tenants do not name it: statistics only.
Router::Reply Router::welcome_observer(Session& s, const proto::Message& m) {
  s.welcomed = s.observer = true;
  s.tenant = Tenant{};
  s.tenant.name = "(admin)";
  proto::Welcome w;
  proto::put_text(w.tenant, sizeof w.tenant, s.tenant.name);
  w.router_id = router_id_;
  w.listen = opts_.listen;
  log_limited(fmt::format("hello {}", s.uid), fmt::format("client {} (pid {}, uid {}) is an admin in no tenant: statistics only",
                                                          s.id, s.pid, s.uid));
  return {proto::encode(Type::welcome, m.h.seq, w)};
}

Router::Reply Router::alloc_pd(Session& s, const proto::Message& m) {
  TenantUsage& u = usage_[s.tenant.name];
  if (s.tenant.max_pds && u.pds + 1 > s.tenant.max_pds)
    return error(s, m, ENOMEM, fmt::format("tenant {} has {} PDs, its max_pds", s.tenant.name, u.pds));
  uint32_t id = fresh_key();
  s.pds.insert(id);
  ++usage_[s.tenant.name].pds;
  return {proto::encode(Type::handle, m.h.seq, proto::Handle{id})};
}

Router::Reply Router::dealloc_pd(Session& s, const proto::Message& m) {
  uint32_t id = m.as<proto::Handle>().id;
  if (!s.pds.count(id)) return error(s, m, EINVAL, fmt::format("PD {:#x} is not one of this client's", id));
  for (const auto& [lkey, mr] : s.mrs)
    if (mr.pd == id) return error(s, m, EBUSY, fmt::format("PD {:#x} still has memory regions (lkey {:#x})", id, lkey));
  for (uint32_t n : s.qps)
    if (qps_.at(n).pd == id) return error(s, m, EBUSY, fmt::format("PD {:#x} still has QP {:#x}", id, n));
  for (uint32_t n : s.srqs)
    if (srqs_.at(n)->pd == id) return error(s, m, EBUSY, fmt::format("PD {:#x} still has SRQ {:#x}", id, n));
  s.pds.erase(id);
  keys_in_use_.erase(id);
  --usage_[s.tenant.name].pds;
  return {proto::encode(Type::done, m.h.seq)};
}

// A message (and so a region's part in one) is at most 2^31 B, as verbs caps it; a region may be
// larger, up to what the tenant may register.
constexpr uint64_t kMaxRegion = 1ull << 40;

// Whether the tenant may hold `len` more bytes: its regions, those released but still held for
// the fabric (so churn holds no more than the limit), and its QPs' and SRQs' memory.
bool Router::memory_allowed(const Session& s, const TenantUsage& u, uint64_t len, const char* what, std::string* why) {
  uint64_t held = u.reg_bytes + u.held_bytes + u.ring_bytes;
  if (!s.tenant.max_reg_bytes || held + len <= s.tenant.max_reg_bytes) return true;
  *why = fmt::format("tenant {} would hold {} B with this {} of {} B ({} B of regions, {} B released and held a few "
                     "seconds, {} B of QP and SRQ memory), over its max_reg_bytes of {} B",
                     s.tenant.name, held + len, what, len, u.reg_bytes, u.held_bytes, u.ring_bytes, s.tenant.max_reg_bytes);
  return false;
}

Router::Reply Router::reg_mr(Session& s, const proto::Message& m, UniqueFd& theirs) {
  auto req = m.as<proto::RegMr>();
  constexpr uint32_t kAllAccess =
      proto::local_write | proto::remote_write | proto::remote_read | proto::remote_atomic;
  if (!s.pds.count(req.pd)) return error(s, m, EINVAL, fmt::format("PD {:#x} is not one of this client's", req.pd));
  if (req.access & ~kAllAccess) return error(s, m, EINVAL, fmt::format("access bits {:#x} are not vrdma's", req.access));
  // Remote write or atomic access needs local write, as in verbs.
  if ((req.access & (proto::remote_write | proto::remote_atomic)) && !(req.access & proto::local_write))
    return error(s, m, EINVAL, "remote write or atomic access needs local write access too");
  if (req.len == 0 || req.len > kMaxRegion) return error(s, m, EINVAL, fmt::format("length {} B: give 1 B to 1 TiB", req.len));
  if (req.len - 1 > ~uint64_t(0) - req.va)  // its last byte's address would wrap past 2^64
    return error(s, m, EINVAL, fmt::format("a region at {:#x} of {} B wraps past 2^64", req.va, req.len));
  TenantUsage& u = usage_[s.tenant.name];
  if (std::string why; !memory_allowed(s, u, req.len, "region", &why)) return error(s, m, ENOMEM, why);
  if (s.tenant.max_mrs && u.mrs + u.held_mrs + 1 > s.tenant.max_mrs)
    return error(s, m, ENOMEM, fmt::format("tenant {} holds {} regions{}, its max_mrs", s.tenant.name, u.mrs + u.held_mrs,
                                           u.held_mrs ? fmt::format(" ({} released, held a few seconds)", u.held_mrs) : ""));
  if (std::string why; !host_allows(u, {1, 1}, &why)) return error(s, m, ENOMEM, why);
  // The client's own buffer comes as its memfd (mapped over the buffer, contents kept); other
  // regions are memory the router makes. Neither is populated here: that is work the size of
  // the request, on the thread every tenant's control requests share.
  bool adopted = bool(theirs);
  uint32_t first = adopted ? uint32_t(req.va % uint64_t(sysconf(_SC_PAGESIZE))) : 0;
  if (!adopted && req.offset) return error(s, m, EINVAL, "an offset is for a region over the client's own memfd");
  auto mem = adopted ? SharedMemory::adopt(std::move(theirs), first + req.len, false, req.offset)
                     : SharedMemory::create(fmt::format("vrdma-{}-{}", s.tenant.name, s.id), req.len, false);
  if (!mem) return error(s, m, adopted ? EINVAL : ENOMEM, mem.status().message());
  MemoryRegionEntry e{req.pd, req.access, fresh_key(), fresh_key(), req.len, req.va,
                      std::make_shared<RegionBacking>(RegionBacking{std::move(*mem), nullptr}), first};
  if (fabric_) {  // the routers of other hosts reach it with one RMA, with the access it grants
    auto fm = fabric_->register_region(e.data(), e.len, e.access);
    if (!fm) {
      keys_in_use_.erase(e.lkey);
      keys_in_use_.erase(e.rkey);
      return error(s, m, ENOMEM, fm.status().message());
    }
    e.backing->fabric = std::move(*fm);
  }
  proto::MrGranted g{e.lkey, e.rkey, e.len, e.mem().mapped_size()};
  int fd = e.mem().fd();
  u.reg_bytes += req.len;
  ++u.mrs;
  s.lkey_of_rkey[e.rkey] = e.lkey;
  s.mrs.emplace(e.lkey, std::move(e));
  return {proto::encode(Type::mr_granted, m.h.seq, g), fd};
}

Router::Reply Router::dereg_mr(Session& s, const proto::Message& m) {
  uint32_t lkey = m.as<proto::Handle>().id;
  auto it = s.mrs.find(lkey);
  if (it == s.mrs.end()) return error(s, m, EINVAL, fmt::format("lkey {:#x} is not one of this client's regions", lkey));
  TenantUsage& u = usage_[s.tenant.name];
  u.reg_bytes -= it->second.len;
  --u.mrs;
  revoke_grants_of(s);
  tell_peers_revoked(s, it->second.rkey);
  keys_in_use_.erase(it->second.lkey);
  keys_in_use_.erase(it->second.rkey);
  release_region(s.tenant.name, it->second);
  s.lkey_of_rkey.erase(it->second.rkey);
  s.mrs.erase(it);
  return {proto::encode(Type::done, m.h.seq)};
}

// A released region's registration stays for the grace, over zero pages: a peer router's RMA
// that passed its key check before the revocation reached it lands there (its router fails the
// op, link_revoke), while the tenant's pages are let go. Closing the registration instead made
// such an RMA fail at the fabric, which (libfabric's tcp) then drops the whole connection: every
// tenant's RMAs to that host failed with it (a tenant could cut others off by exiting mid-stream).
// The zero pages go in on the closer's thread (unmapping gigabytes a client touched takes a
// quarter of a second), in one step: moving the pages out first left a moment with nothing
// there, and another thread's mmap once took the range. Should it fail, late RMAs land in the
// tenant's own pages, as before.
void Router::blank_for_peers(const std::shared_ptr<RegionBacking>& b) {
  closer_->drop_later(std::shared_ptr<void>(b.get(), [b](void*) { (void)b->mem.zero_in_place(); }));
}

void Router::release_region(const std::string& tenant, MemoryRegionEntry& mr) {
  if (!mr.backing) return;
  if (!fabric_) {
    closer_->drop_later(std::move(mr.backing));  // the last mapping of a client's memory: freed off the loop
    return;
  }
  if (mr.backing.use_count() == 1) blank_for_peers(mr.backing);
  TenantUsage& u = usage_[tenant];
  ++u.held_mrs;
  u.held_bytes += mr.len;
  released_.push_back({now_ns() + kReleaseGraceNs, tenant, mr.len, std::move(mr.backing)});
}

// A region still pinned when its grace ends (a request in flight, or a pull kept for a peer
// router, holds its pages) stays counted against its tenant, looked at again a second later:
// dropped from the count at its grace, such pages outlived it by up to 5 s (probe 15).
void Router::sweep_released() {
  constexpr int64_t kPinnedAgainNs = 1'000'000'000;
  int64_t now = now_ns();
  while (!released_.empty() && released_.front().until_ns <= now) {
    Released r = std::move(released_.front());
    released_.pop_front();
    if (r.backing && r.backing.use_count() > 1) {
      int64_t last = released_.empty() ? 0 : released_.back().until_ns;
      r.until_ns = std::max(now + kPinnedAgainNs, last);  // the queue stays in order
      released_.push_back(std::move(r));
    } else if (r.backing) {
      TenantUsage& u = usage_[r.tenant];
      --u.held_mrs;
      u.held_bytes -= r.bytes;
      closer_->drop_later(std::move(r.backing));
    }
  }
}

namespace {
HostCost cost_of(const TenantUsage& u) {
  uint64_t regions = u.mrs + u.held_mrs;
  return {regions + u.qps + u.srqs, regions + 3 * u.qps + u.srqs + u.clients};
}
}  // namespace

bool Router::host_allows(const TenantUsage& u, const HostCost& more, std::string* why) const {
  HostCost all, mine = cost_of(u);
  size_t tenants = mine.mappings || mine.descriptors ? 0 : 1;  // this one counts, holding any or not
  for (const auto& [name, t] : usage_) {
    HostCost c = cost_of(t);
    all.mappings += c.mappings;
    all.descriptors += c.descriptors;
    tenants += c.mappings || c.descriptors;
  }
  return host_share_.allows(mine, all, tenants, more, why);
}

}  // namespace rb::vrdma
