// The MACs that let a process's connection manager tell its own tenant from another's. rdma_cm
// programs meet over TCP of their own (rdmacm/wire.hh), where any local user, or any host, can
// ask a listener for a connection; on hardware a partition key keeps tenants apart. Here each
// side signs what it sends with its router's MAC for its tenant and checks what it receives by
// asking for the same MAC: a request from another tenant never reaches the program, and a reply
// from another tenant's listener is refused.
//
// The key: derived from the cluster's first link key, so every router of a cluster signs alike
// (while a key rotation is half done, hosts whose first keys differ cannot meet over rdma_cm);
// with --insecure-link, from a key everybody knows (an unauthenticated link proves nothing
// either); with no --listen, random per run (one host, one router).
#include <sys/random.h>

#include <cstring>
#include <string_view>

#include <fmt/format.h>

#include "vrdma/router/data_path.hh"

namespace rb::vrdma {
namespace {

constexpr std::string_view kLabel = "vrdma rdma_cm tenant MACs";

std::span<const uint8_t> bytes_of(std::string_view s) { return {reinterpret_cast<const uint8_t*>(s.data()), s.size()}; }

}  // namespace

void Router::set_cm_key() {
  if (!auth_.keys().empty()) {
    cm_key_ = hmac_sha256(auth_.keys().front(), bytes_of(kLabel));
  } else if (opts_.listen.port) {
    cm_key_ = hmac_sha256(LinkKey32{}, bytes_of(kLabel));
  } else if (getrandom(cm_key_.data(), cm_key_.size(), 0) != ssize_t(cm_key_.size())) {
    cm_key_ = hmac_sha256(LinkKey32{}, bytes_of(kLabel));  // never reached on Linux 3.17+
  }
}

// The tenant's name (NUL-ended) then the bytes: one tenant's MAC is never another's.
Router::Reply Router::cm_sign(Session& s, const proto::Message& m) {
  auto req = m.as<proto::CmSign>();
  if (req.len > proto::CmSign::kMaxBytes)
    return error(s, m, EINVAL, fmt::format("cm_sign of {} B: at most {}", req.len, proto::CmSign::kMaxBytes));
  std::vector<uint8_t> covered(s.tenant.name.begin(), s.tenant.name.end());
  covered.push_back(0);
  covered.insert(covered.end(), req.bytes, req.bytes + req.len);
  proto::CmSigned out;
  LinkKey32 mac = hmac_sha256(cm_key_, covered);
  std::memcpy(out.mac, mac.data(), sizeof out.mac);
  return {proto::encode(proto::Type::cm_signed, m.h.seq, out)};
}

}  // namespace rb::vrdma
