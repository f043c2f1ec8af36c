#include "transport/tcp/tcp_transport.hh"

#include <fmt/format.h>

#include "core/netif.hh"
#include "transport/tcp/tcp_endpoint.hh"

namespace rb::transport::tcp {
namespace {

class TcpMr final : public MemoryRegion {
 public:
  TcpMr(std::shared_ptr<RegionTable> t, void* a, size_t l) : t_(std::move(t)), a_(a), l_(l) {
    key_ = t_->add(static_cast<uint8_t*>(a), l);
  }
  ~TcpMr() override { t_->remove(key_); }
  void* addr() const override { return a_; }
  size_t len() const override { return l_; }
  void* desc() const override { return nullptr; }
  RemoteRegion remote() const override { return {0, key_, l_, {}}; }

 private:
  std::shared_ptr<RegionTable> t_;
  void* a_;
  size_t l_;
  uint64_t key_;
};

class TcpDomain final : public Domain {
 public:
  TcpDomain(std::string ip, SocketOptions so) : ip_(std::move(ip)), so_(so), regions_(std::make_shared<RegionTable>()) {
    caps_.write = caps_.read = caps_.send = true;
    caps_.max_msg = 1ull << 31;
    caps_.tx_depth = 4096;
    caps_.rx_depth = 4096;
    caps_.target_progress = true;  // the target's endpoint applies writes and serves reads
    caps_.checks_bounds = true;
    std::string iface = interface_name_of(ip_);
    info_ = {"tcp", "kernel", "tcp", iface.empty() ? ip_ : iface, ""};
  }
  const Caps& caps() const override { return caps_; }
  const DomainInfo& info() const override { return info_; }
  Result<std::unique_ptr<MemoryRegion>> register_memory(void* addr, size_t len) override {
    return std::unique_ptr<MemoryRegion>(new TcpMr(regions_, addr, len));
  }
  Result<std::unique_ptr<Endpoint>> open_endpoint(const EndpointOptions& o) override {
    return open_tcp_endpoint(regions_, ip_, so_, std::max<uint32_t>(o.depth, 64));
  }

 private:
  std::string ip_;
  SocketOptions so_;
  std::shared_ptr<RegionTable> regions_;
  Caps caps_;
  DomainInfo info_;
};

// Socket buffer sizes as people type them: 262144, 256K, 4M.
Result<int> parse_buffer(const std::string& key, const std::string& v) {
  char* end = nullptr;
  long x = strtol(v.c_str(), &end, 10);
  std::string suffix = end ? end : "";
  int shift = suffix.empty() ? 0 : suffix == "K" || suffix == "k" ? 10 : suffix == "M" || suffix == "m" ? 20 : -1;
  if (v.empty() || end == v.c_str() || shift < 0 || x <= 0 || x > (1l << 30) >> shift || (x << shift) < 4096)
    return Status(Errc::invalid_argument, fmt::format("-o {}={}: give bytes from 4K to 1G, e.g. {}=4M", key, v, key));
  return int(x << shift);
}

}  // namespace

Result<std::unique_ptr<Domain>> open_domain(const TransportOptions& opt) {
  if (!opt.provider.empty())
    return Status(Errc::invalid_argument, fmt::format("-t tcp:{}: the tcp transport has no providers; use -t tcp", opt.provider));
  SocketOptions so;
  for (auto& [k, v] : opt.params) {
    if (k == "nodelay") {
      if (v != "0" && v != "1") return Status(Errc::invalid_argument, fmt::format("-o nodelay={}: must be 0 or 1", v));
      so.nodelay = v == "1";
    } else if (k == "sndbuf" || k == "rcvbuf") {
      auto x = parse_buffer(k, v);
      if (!x) return x.status();
      (k == "sndbuf" ? so.sndbuf : so.rcvbuf) = *x;
    } else {
      return Status(Errc::invalid_argument, fmt::format("-o {}: unknown tcp option; valid: nodelay=0|1, sndbuf=BYTES, rcvbuf=BYTES", k));
    }
  }
  std::string ip = opt.local_ip;
  if (!opt.domain.empty()) {  // a NIC named by --domain/--domains: use its address
    ip = interface_named(opt.domain).ip;
    if (ip.empty())
      return Status(Errc::invalid_argument, fmt::format("--domain {}: no network interface of that name here", opt.domain));
  }
  return std::unique_ptr<Domain>(new TcpDomain(ip, so));
}

TransportEntry registry_entry() {
  TransportEntry e;
  e.name = "tcp";
  e.description = "kernel TCP sockets, the baseline: SEND as framed messages, WRITE/READ as requests the peer applies";
  e.options_help = "-o nodelay=0|1 (default 1), -o sndbuf=BYTES, -o rcvbuf=BYTES (default: the kernel's)";
  e.open = [](const TransportOptions& o) { return open_domain(o); };
  e.probe = [] {
    return std::vector<Availability>{{"tcp", true, "one connection per endpoint pair, both directions on it; TCP_NODELAY on by default"}};
  };
  return e;
}

}  // namespace rb::transport::tcp
