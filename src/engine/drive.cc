#include "engine/drive.hh"

#include <condition_variable>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "engine/client.hh"
#include "model/record_json.hh"

namespace rb::engine {
namespace {

// Sends each phase's JSON line to the coordinator; a thread of its own keeps the link alive
// while the run is between phases. Sends are serialized: a Peer is not shared between threads.
class ForwardSink final : public ResultSink {
 public:
  explicit ForwardSink(protocol::Peer& to) : to_(to), alive_([this] { keep_alive(); }) {}
  ~ForwardSink() override {
    {
      std::lock_guard<std::mutex> g(m_);
      done_ = true;
    }
    cv_.notify_all();
    alive_.join();
  }

  void run_started(const RunInfo& run) override { header_ = run; }
  void phase_started(size_t, size_t, const Phase&) override {}
  void interval(double, const std::vector<IntervalSample>&) override {}
  Status phase_done(const PhaseResult& r, int repeats) override {
    std::lock_guard<std::mutex> g(m_);
    return to_.send(protocol::PairRecord{model::json_line(header_, r, repeats), header_.line_gbps});
  }
  void run_ended() override {}

  Status send(const protocol::Message& m) {
    std::lock_guard<std::mutex> g(m_);
    return to_.send(m);
  }

 private:
  void keep_alive() {
    std::unique_lock<std::mutex> g(m_);
    auto every = std::chrono::duration<double>(protocol::alive_interval_s(to_.timeout()));
    while (!done_) {
      cv_.wait_for(g, every);
      if (!done_) (void)to_.keep_alive();
    }
  }

  protocol::Peer& to_;
  RunInfo header_;
  std::mutex m_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread alive_;  // last: starts once the rest is built
};

}  // namespace

Status drive_pair(protocol::Peer& coordinator, const protocol::Drive& d, const ConnectTarget& connect,
                  const std::atomic<bool>& stop) {
  coordinator.set_timeout(d.spec.timeout_s);
  Status st;
  {
    ForwardSink sink(coordinator);
    ClientOptions opt;
    opt.connect = connect;
    opt.server_name = d.target;
    st = run_client(d.spec, opt, sink, stop);
    Status told = sink.send(st.is_ok() ? protocol::Message(protocol::Bye{}) : protocol::error_of(st));
    if (st.is_ok()) st = told;
  }
  return st;
}

}  // namespace rb::engine
