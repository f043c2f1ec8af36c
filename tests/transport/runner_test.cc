// The runner end to end, client and server in this one process, over every registry instance: a
// thread serves one connection with serve_connection (what a server's child process does) while
// this thread runs run_client against it and records what reaches the ResultSink. Every wait is
// bounded: the accept loop by a deadline, the run by --timeout.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <thread>
#include <vector>

#include "engine/client.hh"
#include "engine/serve_run.hh"
#include "engine/server.hh"
#include "bootstrap/channel.hh"
#include "registry_instances.hh"

namespace rb::engine {
namespace {

using transport::Instance;
using SteadyClock = std::chrono::steady_clock;

constexpr uint64_t kIters = 200;
constexpr double kTimeoutS = 5;

// Everything the client hands its sink, kept for the assertions.
class RecordingSink final : public ResultSink {
 public:
  struct Started {
    size_t index, count;
    Phase phase;
  };
  std::vector<RunInfo> runs;
  std::vector<Started> started;
  std::vector<PhaseResult> results;
  int ended = 0;
  std::atomic<bool> measuring{false};  // a phase's measured window is open: read by a thread that acts mid-phase

  void run_started(const RunInfo& run) override { runs.push_back(run); }
  void phase_started(size_t index, size_t count, const Phase& phase) override {
    started.push_back({index, count, phase});
  }
  void interval(double, const std::vector<IntervalSample>&) override { measuring = true; }
  Status phase_done(const PhaseResult& result, int) override {
    results.push_back(result);
    return {};
  }
  void run_ended() override { ++ended; }
};

// The server's side of one run, on a thread of its own: listens on a free port of 127.0.0.1,
// accepts one client within the deadline and serves it.
class OneRunServer {
 public:
  explicit OneRunServer(transport::Use use = transport::Use::test) {
    opt_.quiet = true;
    opt_.transports = use;
    auto l = bootstrap::Listener::listen({"127.0.0.1", 0});
    if (!l) {
      error_ = l.status().message();
      return;
    }
    listener_.emplace(std::move(l.value()));
    thread_ = std::thread([this] { accept_and_serve(); });
  }
  ~OneRunServer() { join(); }

  const std::string& error() const { return error_; }  // empty when listening
  uint16_t port() const { return listener_->port(); }
  // Stops the run being served, as a server's Ctrl-C does.
  void stop() { stop_ = true; }
  // Waits for the run to end, or gives up waiting for a client that never came; returns
  // serve_connection's code. A run ends by itself: the client's bye, or its closed connection.
  int join() {
    stop_waiting_ = true;
    if (thread_.joinable()) thread_.join();
    return code_;
  }
  bool accepted() const { return accepted_; }

  static constexpr int kNoClient = -1;

 private:
  void accept_and_serve() {
    const auto deadline = SteadyClock::now() + std::chrono::duration<double>(2 * kTimeoutS);
    while (!stop_waiting_ && SteadyClock::now() < deadline) {
      auto ch = listener_->accept(0.05);
      if (!ch) return;
      if (ch->fd() < 0) continue;
      accepted_ = true;
      code_ = serve_connection(std::move(ch.value()), opt_, stop_);
      return;
    }
  }

  ServerOptions opt_;
  std::optional<bootstrap::Listener> listener_;  // Listener moves in, but is not assignable
  std::string error_;
  std::atomic<bool> stop_{false}, stop_waiting_{false};
  std::atomic<bool> accepted_{false};
  int code_ = kNoClient;
  std::thread thread_;
};

struct RunOutcome {
  Status status;
  int server_code = OneRunServer::kNoClient;
  bool server_accepted = false;
  double seconds = 0;
};

// One whole run: a server thread, and run_client here. `mid_phase` (optional) runs on a thread
// of its own once a phase is being measured (the first --report-interval sample), for tests that
// disturb a run.
RunOutcome run_in_process(const RunSpec& spec, RecordingSink& sink, transport::Use client_use = transport::Use::test,
                          transport::Use server_use = transport::Use::test,
                          const std::function<void(OneRunServer&)>& mid_phase = {}) {
  RunOutcome out;
  OneRunServer server(server_use);
  if (!server.error().empty()) {
    out.status = {Errc::io, "listen: " + server.error()};
    return out;
  }
  std::atomic<bool> client_done{false};
  std::thread disturber;
  if (mid_phase)
    disturber = std::thread([&] {
      while (!sink.measuring && !client_done) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      if (!client_done) mid_phase(server);
    });
  const std::atomic<bool> interrupt{false};
  auto t0 = SteadyClock::now();
  out.status = run_client(spec, {{"127.0.0.1", server.port()}, client_use}, sink, interrupt);
  out.seconds = std::chrono::duration<double>(SteadyClock::now() - t0).count();
  client_done = true;
  if (disturber.joinable()) disturber.join();
  out.server_code = server.join();
  out.server_accepted = server.accepted();
  return out;
}

RunSpec small_spec(const Instance& inst) {
  RunSpec s;
  s.transport = inst.selection();
  s.sizes = {64, 4096};
  s.iters = kIters;
  s.timeout_s = kTimeoutS;
  return s;
}

bool supports(const transport::Caps& c, Op op) {
  switch (op) {
    case Op::write: return c.write;
    case Op::read: return c.read;
    case Op::send: return c.send;
    case Op::write_imm: return c.write && c.imm_data;
    case Op::send_imm: return c.send && c.imm_data;
    case Op::fadd:
    case Op::cswap: return c.atomics;
    default: return false;
  }
}

// The modes the caps allow for `op`: write latency needs a peer that sees writes land.
std::vector<Mode> modes_for(const transport::Caps& c, Op op) {
  if (op == Op::write && !c.peer_sees_writes) return {Mode::bw};
  return {Mode::bw, Mode::lat};
}

// What every finished run must show: the transport it named, one result per phase of
// phases(spec) in order, each complete and counted right.
void expect_complete_run(const RunSpec& spec, const RecordingSink& sink) {
  const auto want = phases(spec);
  ASSERT_EQ(sink.runs.size(), 1u);
  ASSERT_NE(sink.runs[0].spec, nullptr);
  EXPECT_EQ(sink.runs[0].spec->transport.name, spec.transport.name);
  EXPECT_EQ(sink.runs[0].spec->transport.variant, spec.transport.variant);
  EXPECT_EQ(sink.runs[0].info.transport, spec.transport.name);
  EXPECT_EQ(sink.ended, 1);
  ASSERT_EQ(sink.started.size(), want.size());
  ASSERT_EQ(sink.results.size(), want.size());
  const uint64_t iterations = spec.iters * uint64_t(spec.threads);
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "phase " << i << ": " << transport::op_name(want[i].op) << " "
                                      << mode_name(want[i].mode) << " " << want[i].size << " B");
    EXPECT_EQ(sink.started[i].index, i);
    EXPECT_EQ(sink.started[i].count, want.size());
    EXPECT_EQ(sink.started[i].phase.op, want[i].op);
    EXPECT_EQ(sink.started[i].phase.mode, want[i].mode);
    EXPECT_EQ(sink.started[i].phase.size, want[i].size);
    const PhaseResult& r = sink.results[i];
    EXPECT_EQ(r.phase.op, want[i].op);
    EXPECT_EQ(r.phase.mode, want[i].mode);
    EXPECT_EQ(r.phase.size, want[i].size);
    EXPECT_FALSE(r.partial);
    EXPECT_EQ(r.iterations, iterations);
    EXPECT_EQ(r.hist.count, iterations);
    if (want[i].mode == Mode::bw) {
      EXPECT_EQ(r.bytes, iterations * want[i].size);
    }
  }
}

// Runs `spec`, which must succeed on both sides and deliver every phase; returns the results.
std::vector<PhaseResult> results_of_successful_run(const RunSpec& spec) {
  RecordingSink sink;
  RunOutcome out = run_in_process(spec, sink);
  EXPECT_TRUE(out.status.is_ok()) << out.status.message();
  EXPECT_EQ(out.server_code, kRunOk);
  expect_complete_run(spec, sink);
  return sink.results;
}

class Runner : public ::testing::TestWithParam<Instance> {
 protected:
  void SetUp() override {
    auto d = GetParam().open();  // for its caps; the run opens its own domains
    if (!d) {
      if (auto why = why_unusable_here(GetParam())) GTEST_SKIP() << GetParam().label() << " is not usable here: " << *why;
      FAIL() << GetParam().label() << " did not open although the registry reports it usable here: " << d.status().message();
    }
    caps_ = d.value()->caps();
  }

  // Every mode the caps allow of `op`, at both sizes, validated where the server can read its memory.
  void run_op(Op op, bool event = false) {
    if (!supports(caps_, op)) GTEST_SKIP() << GetParam().label() << " has no " << transport::op_name(op);
    if (event && !caps_.can_wait) GTEST_SKIP() << GetParam().label() << " cannot wait";
    RunSpec spec = small_spec(GetParam());
    spec.ops = {op};
    spec.modes = modes_for(caps_, op);
    if (event && op == Op::write) spec.modes = {Mode::bw};  // the target of a plain write cannot sleep
    if (is_atomic(op)) spec.sizes = {transport::kAtomicBytes};
    spec.validate = caps_.peer_memory_readable || caps_.peer_memory_at_quiesce;
    spec.event = event;
    results_of_successful_run(spec);
  }

  transport::Caps caps_;
};

TEST_P(Runner, WritePhases) { run_op(Op::write); }
TEST_P(Runner, ReadPhases) { run_op(Op::read); }
TEST_P(Runner, SendPhases) { run_op(Op::send); }
TEST_P(Runner, WriteImmPhases) { run_op(Op::write_imm); }
TEST_P(Runner, SendImmPhases) { run_op(Op::send_imm); }
TEST_P(Runner, FetchAddPhases) { run_op(Op::fadd); }
TEST_P(Runner, CompareSwapPhases) { run_op(Op::cswap); }
TEST_P(Runner, EventWritePhases) { run_op(Op::write, true); }
TEST_P(Runner, EventReadPhases) { run_op(Op::read, true); }
TEST_P(Runner, EventSendPhases) { run_op(Op::send, true); }
TEST_P(Runner, EventWriteImmPhases) { run_op(Op::write_imm, true); }
TEST_P(Runner, EventAtomicPhases) { run_op(Op::fadd, true); }

INSTANTIATE_TEST_SUITE_P(Registry, Runner, ::testing::ValuesIn(transport::registry_instances()),
                         [](const auto& info) { return transport::instance_test_name(info.param); });

const Instance kInproc{"inproc", ""};

// A spec on two rails of two endpoints each (rails x qps = 4 endpoints per thread), every op.
RunSpec two_rails_of_two_qps(Mode mode, int threads) {
  RunSpec spec = small_spec(kInproc);
  spec.ops = {Op::write, Op::read, Op::send};
  spec.modes = {mode};
  spec.sizes = {4096};
  spec.threads = threads;
  spec.rails = 2;
  spec.qps = 2;
  spec.validate = true;
  return spec;
}

// Every op of the run reached the sink counted on its rail.
void expect_rails_add_up(const PhaseResult& r) {
  ASSERT_EQ(r.per_rail.size(), 2u);
  EXPECT_EQ(r.per_rail[0].iterations + r.per_rail[1].iterations, r.iterations);
}

// Bandwidth: every thread splits its ops evenly over its endpoints, so each rail carries half.
TEST(RunnerPaths, TwoThreadsOnTwoRailsOfTwoQps) {
  for (const PhaseResult& r : results_of_successful_run(two_rails_of_two_qps(Mode::bw, 2))) {
    ASSERT_NO_FATAL_FAILURE(expect_rails_add_up(r));
    EXPECT_EQ(r.per_rail.front().iterations, r.iterations / 2);
    ASSERT_EQ(r.per_thread.size(), 2u);
    for (const auto& t : r.per_thread) EXPECT_EQ(t.iterations, kIters);
  }
}

// Latency turns over the endpoints one op at a time, so both rails see some. One thread:
// ping-pongs of several threads on two cores would wait on the scheduler, not on the runner.
TEST(RunnerPaths, LatencyTurnsOverTwoRailsOfTwoQps) {
  for (const PhaseResult& r : results_of_successful_run(two_rails_of_two_qps(Mode::lat, 1))) {
    ASSERT_NO_FATAL_FAILURE(expect_rails_add_up(r));
    for (const auto& rail : r.per_rail) EXPECT_GT(rail.iterations, 0u);
  }
}

// --bidir: the server streams the same op back while the client measures its own.
TEST(RunnerPaths, BidirReportsTheServersStream) {
  RunSpec spec = small_spec(kInproc);
  spec.ops = {Op::write, Op::read};
  spec.modes = {Mode::bw};
  spec.bidir = true;
  for (const PhaseResult& r : results_of_successful_run(spec)) {
    EXPECT_TRUE(r.has_reverse);
    EXPECT_EQ(r.reverse.iterations, kIters);
  }
}

// --bidir --validate: each direction checked on its own region, both clean.
TEST(RunnerPaths, BidirValidatesBothDirections) {
  RunSpec spec = small_spec(kInproc);
  spec.ops = {Op::write, Op::read};
  spec.modes = {Mode::bw};
  spec.sizes = {64, 4096};
  spec.threads = 2;
  spec.bidir = true;
  spec.validate = true;
  for (const PhaseResult& r : results_of_successful_run(spec)) EXPECT_EQ(r.reverse.iterations, 2 * kIters);
}

// --recv-mr: the server's receives share one buffer per endpoint, and every message still arrives.
TEST(RunnerPaths, SendsIntoOneReceiveBuffer) {
  RunSpec spec = small_spec(kInproc);
  spec.ops = {Op::send, Op::send_imm};
  spec.modes = {Mode::bw, Mode::lat};
  spec.sizes = {64, 4096};
  spec.qps = 2;
  spec.recv_mr = 4096;
  for (const PhaseResult& r : results_of_successful_run(spec)) EXPECT_EQ(r.iterations, kIters);
}

// A server stopped mid-phase says so, and the client fails with its reason instead of waiting.
TEST(RunnerFailure, ServerStoppedMidPhaseFailsTheClient) {
  RunSpec spec = small_spec(kInproc);
  spec.iters = 0;
  spec.duration_s = 4;          // far longer than the stop takes to arrive; warms up for a tenth of it
  spec.report_interval = 0.05;  // its first sample says the measured window is open
  spec.sizes = {4096};
  RecordingSink sink;
  RunOutcome out = run_in_process(spec, sink, transport::Use::test, transport::Use::test,
                                  [](OneRunServer& server) { server.stop(); });
  EXPECT_EQ(out.status.code(), Errc::io) << out.status.message();  // a stopped server fails the run
  EXPECT_EQ(out.status.message(), "server: server stopped");
  EXPECT_LT(out.seconds, kTimeoutS);
  EXPECT_EQ(out.server_code, kRunStopped);
  EXPECT_TRUE(sink.results.empty());
  EXPECT_EQ(sink.ended, 1);
}

// A payload larger than the region it must land in: check refuses it before any connection.
TEST(RunnerFailure, OutOfRegionSpecIsRefusedBeforeAnythingStarts) {
  RunSpec spec = small_spec(kInproc);
  spec.sizes = {8192};
  spec.random_space = 4096;
  RecordingSink sink;
  RunOutcome out = run_in_process(spec, sink);
  EXPECT_EQ(out.status.code(), Errc::invalid_argument) << out.status.message();
  EXPECT_NE(out.status.message().find("--random-space"), std::string::npos) << out.status.message();
  EXPECT_FALSE(out.server_accepted);
  EXPECT_TRUE(sink.runs.empty());
  EXPECT_EQ(sink.ended, 1);
}

// A size past what the transport itself can move (inproc: 1 GiB, below rdmabench's own 2 GiB) is
// refused by the transport's capabilities, once its domain is open and before any memory is.
TEST(RunnerFailure, ASizeTheTransportRefusesIsRefusedBeforeAnyMemory) {
  RunSpec spec = small_spec(kInproc);
  spec.sizes = {1536ull << 20};
  RecordingSink sink;
  RunOutcome out = run_in_process(spec, sink);
  EXPECT_EQ(out.status.code(), Errc::invalid_argument) << out.status.message();
  EXPECT_NE(out.status.message().find("--size"), std::string::npos) << out.status.message();
  EXPECT_NE(out.status.message().find("inproc supports at most"), std::string::npos) << out.status.message();
  EXPECT_TRUE(sink.runs.empty());
}

// Without Use::test either side refuses an in-process transport, as the command line does.
TEST(RunnerFailure, TestOnlyTransportsNeedTheTestOptionOnBothSides) {
  RunSpec spec = small_spec(kInproc);
  spec.sizes = {64};
  {
    RecordingSink sink;
    RunOutcome out = run_in_process(spec, sink, transport::Use::run, transport::Use::test);
    EXPECT_EQ(out.status.code(), Errc::invalid_argument) << out.status.message();
    EXPECT_NE(out.status.message().find("in-process"), std::string::npos) << out.status.message();
    EXPECT_TRUE(sink.runs.empty());
  }
  {
    RecordingSink sink;
    RunOutcome out = run_in_process(spec, sink, transport::Use::test, transport::Use::run);
    EXPECT_EQ(out.status.code(), Errc::invalid_argument) << out.status.message();
    EXPECT_NE(out.status.message().find("server: -t inproc"), std::string::npos) << out.status.message();
    EXPECT_EQ(out.server_code, kRunFailed);
    EXPECT_TRUE(sink.runs.empty());
  }
}

}  // namespace
}  // namespace rb::engine
