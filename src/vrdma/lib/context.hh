#pragma once
// libvrdma's side of the control protocol: one connection to the router per context, a request
// and its reply at a time (the context's lock), every wait bounded so a dead router is an error
// within kReplyTimeoutMs, never a hang.
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "core/shm.hh"
#include "core/status.hh"
#include "core/unique_fd.hh"
#include "vrdma/ipc/seqpacket.hh"
#include "vrdma/proto/control.hh"

namespace rb::vrdma {

constexpr int kReplyTimeoutMs = 1000;

// The path vrdma_open(NULL) uses.
std::string default_socket_path();

// An error that carries the errno value the C API returns.
struct CallError {
  int err = 0;
  std::string message;
};

template <class T>
struct Call {  // a value, or why not
  std::optional<T> value;
  CallError error;
  bool ok() const { return value.has_value(); }
};

struct Region {
  uint32_t lkey = 0, rkey = 0, pd = 0;
  uint64_t len = 0;
  Mapping map;
};

class Context {
 public:
  static Call<std::unique_ptr<Context>> open(const std::string& socket_path);
  const std::string& tenant() const { return tenant_; }

  Call<uint32_t> alloc_pd();
  Call<bool> dealloc_pd(uint32_t pd);
  Call<std::unique_ptr<Region>> alloc_mr(uint32_t pd, uint64_t len, uint32_t access);
  Call<bool> dereg_mr(const Region& r);
  Call<std::string> stats();

 private:
  struct Answer {
    std::vector<uint8_t> packet;
    proto::Message msg;
    UniqueFd fd;
  };
  // Sends a request and waits for its answer; an Error answer becomes the CallError.
  Call<Answer> ask(proto::Type t, std::span<const uint8_t> body, proto::Type want);
  template <class T>
  Call<Answer> ask(proto::Type t, const T& body, proto::Type want) {
    return ask(t, {reinterpret_cast<const uint8_t*>(&body), sizeof body}, want);
  }

  std::mutex mu_;
  UniqueFd sock_;
  std::string path_, tenant_;
  uint32_t seq_ = 0;
  bool broken_ = false;  // a reply went missing: later calls fail at once with why
  std::string broken_why_;
};

}  // namespace rb::vrdma
