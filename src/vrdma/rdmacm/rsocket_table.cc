// The process's rsockets by fd. librdmacm's r* API names a socket by an int, as the kernel names
// a socket by a descriptor, so the table is the process's, like the kernel's descriptor table:
// the one piece of shared state here, and guarded.
#include <time.h>

#include <cstdlib>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "vrdma/rdmacm/rsocket.hh"

namespace rb::rsock {
namespace {

struct Table {
  std::mutex mu;
  std::unordered_map<int, std::unique_ptr<Socket>> by_fd;
};

Table& table() {
  static Table t;
  return t;
}

}  // namespace

Socket* find(int fd) {
  Table& t = table();
  std::lock_guard lock(t.mu);
  auto it = t.by_fd.find(fd);
  return it == t.by_fd.end() ? nullptr : it->second.get();
}

Socket* add(Socket* s) {
  Table& t = table();
  std::lock_guard lock(t.mu);
  t.by_fd[s->fd].reset(s);
  return s;
}

void remove(int fd) {
  std::unique_ptr<Socket> gone;
  Table& t = table();
  std::lock_guard lock(t.mu);
  if (auto it = t.by_fd.find(fd); it != t.by_fd.end()) {
    gone = std::move(it->second);
    t.by_fd.erase(it);
  }
}

int64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

int64_t spin_ns() {
  static const int64_t ns = [] {
    const char* v = std::getenv("VRDMA_RSOCKET_SPIN_US");
    long us = v && *v ? std::strtol(v, nullptr, 10) : 20;
    return int64_t(us < 0 ? 0 : us) * 1000;
  }();
  return ns;
}

}  // namespace rb::rsock
