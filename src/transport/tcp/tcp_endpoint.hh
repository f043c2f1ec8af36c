#pragma once
#include <memory>
#include <mutex>
#include <unordered_map>

#include "transport/tcp/frame_io.hh"
#include "transport/transport.hh"

namespace rb::transport::tcp {

struct SocketOptions {
  bool nodelay = true;
  int sndbuf = 0, rcvbuf = 0;  // 0 = the kernel's default
};

// The regions a domain registered, looked up when a peer's WRITE or READ arrives.
class RegionTable {
 public:
  uint64_t add(uint8_t* p, size_t len);
  void remove(uint64_t key);
  bool find(uint64_t key, uint8_t** p, size_t* len);

 private:
  std::mutex mu_;
  std::unordered_map<uint64_t, std::pair<uint8_t*, size_t>> map_;
  uint64_t next_ = 1;
};

Result<std::unique_ptr<Endpoint>> open_tcp_endpoint(std::shared_ptr<RegionTable> regions, const std::string& local_ip,
                                                    const SocketOptions& so, uint32_t depth);

}  // namespace rb::transport::tcp
