#pragma once
// vrdmad --metrics: the router's figures in Prometheus' text format over HTTP, for a scraper.
// It is served on a thread of its own, every connection as far as it can go without waiting,
// each within a 1 s deadline, at most 4 at once from one uid (or one address of another host) and
// 64 in all (the oldest of whoever holds the most makes room), so a slow or hostile scraper costs
// the router nothing and other scrapers no more than a share; the thread asks the control loop
// for the text through an eventfd and never reads the router's tables itself.
//
// Who sees what is as for `vrdmactl stats`: a connection from this host is known by the uid that
// the kernel gives its socket (local_peer_uid); a tenant sees its own series, root and admin_uids every tenant's,
// the links' and the router's, and a uid in no tenant nothing. A connection from another host
// (possible only when the operator binds the endpoint off loopback) sees everything.
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/status.hh"
#include "core/unique_fd.hh"

namespace rb::vrdma {

struct MetricsAsk {
  bool local = false;  // from this host, by `uid`; else from another host
  uint32_t uid = 0;
  bool unknown = false;  // from this host, by a socket whose owner could not be found
};

class MetricsServer {
 public:
  // Listens at host:port (a numeric address; port 0 picks one).
  static Result<std::unique_ptr<MetricsServer>> open(const std::string& host, uint16_t port);
  ~MetricsServer();
  uint16_t port() const { return port_; }
  // Readable while the thread waits for an answer: the control loop then calls answer().
  int wake_fd() const { return wake_.get(); }
  // Control loop: the waiting ask, if any, answered with render(ask).
  void answer(const std::function<std::string(const MetricsAsk&)>& render);

 private:
  MetricsServer() = default;
  struct Scrape;
  void serve();
  void take_newcomers(std::vector<std::unique_ptr<Scrape>>& open);
  static void identify(Scrape& c);
  void go_on(Scrape& c);
  std::string answer_to(const Scrape& c);
  std::optional<std::string> body_for(const MetricsAsk& ask);

  UniqueFd listen_, wake_, stop_;
  uint16_t port_ = 0;
  std::mutex mu_;
  std::condition_variable answered_;
  std::optional<MetricsAsk> pending_;
  std::optional<std::string> answer_;
  uint64_t arrivals_ = 0;  // the serving thread's
  std::thread thread_;
};

}  // namespace rb::vrdma
