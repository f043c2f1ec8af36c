// rdmabench: parse the command line, then run as client, server, or both (--loopback).
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include <fmt/format.h>

#include "engine/client.hh"
#include "engine/server.hh"
#include "cluster/run.hh"
#include "cli.hh"
#include "job.hh"
#include "job_runner.hh"
#include "completion.hh"
#include "list.hh"
#include "loopback_server.hh"
#include "preflight.hh"

namespace {

// Ctrl-C and SIGTERM are taken by one thread (sigwait) and turned into a flag the run polls.
class SignalWatcher {
 public:
  SignalWatcher() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    sigaddset(&set_, SIGUSR1);  // our own wake-up at exit
    pthread_sigmask(SIG_BLOCK, &set_, nullptr);
    thread_ = std::thread([this] {
      int sig = 0;
      while (sigwait(&set_, &sig) == 0) {
        if (sig == SIGUSR1 && done_.load()) return;
        if (sig == SIGINT || sig == SIGTERM) {
          if (stop_.exchange(true)) {
            fmt::print(stderr, "\nrdmabench: second interrupt, exiting now\n");
            std::quick_exit(130);  // at_quick_exit hooks still remove our shm names
          }
        }
      }
    });
  }
  ~SignalWatcher() {
    done_.store(true);
    pthread_kill(thread_.native_handle(), SIGUSR1);
    thread_.join();
  }
  const std::atomic<bool>& stop() const { return stop_; }

 private:
  sigset_t set_;
  std::atomic<bool> stop_{false}, done_{false};
  std::thread thread_;
};

int exit_code(const rb::Status& s) {
  if (s.is_ok()) return 0;
  fmt::print(stderr, "rdmabench: error: {}\n", s.message());
  switch (s.code()) {
    case rb::Errc::invalid_argument: return 2;
    case rb::Errc::interrupted: return 130;
    default: return 1;
  }
}

// A cluster run's rank serves its pairs on the NICs and CPUs the run names, quietly.
rb::cluster::ClusterJob cluster_job_of(const rb::app::Command& cmd) {
  rb::engine::ServerOptions serve = cmd.server;
  serve.domain = cmd.spec.transport.domain;
  serve.domains = cmd.spec.domains;
  serve.cpus = cmd.spec.cpus;
  serve.quiet = true;
  return {cmd.spec, cmd.cluster, serve, cmd.output.json};
}

}  // namespace

int main(int argc, char** argv) {
  using Kind = rb::app::Command::Kind;
  auto cmd = rb::app::parse_command_line(argc, argv);
  if (!cmd) return exit_code(cmd.status());
  switch (cmd->kind) {
    case Kind::help: fmt::print("{}", cmd->help); return 0;
    case Kind::version: fmt::print("rdmabench {}\n", RDMABENCH_VERSION); return 0;
    case Kind::list: return rb::app::print_list(cmd->list_json);
    case Kind::completion: fmt::print("{}", rb::app::bash_completion()); return 0;
    default: break;
  }
  if (cmd->kind == Kind::job) {
    // Every run is expanded and checked before the first starts; a bad key is one line naming
    // the file and line, like a compiler's, so editors can jump to it.
    auto job = rb::app::load_job(cmd->job, cmd->given);
    if (!job) {
      fmt::print(stderr, "{}\n", job.status().message());
      return 2;
    }
    rb::app::UsableHere usable;
    for (size_t i = 0; i < job->runs.size(); ++i)
      if (rb::Status st = usable.check(job->runs[i].cmd.spec); !st) {
        fmt::print(stderr, "{}: run {} of {} ({}): {}\n", job->path, i + 1, job->runs.size(),
                   rb::app::join_args(job->runs[i].args), st.message());
        return 2;
      }
    SignalWatcher signals;
    // A [cluster] job is one cluster run (the job file refuses [matrix] and [[run]] beside it).
    if (job->runs.size() == 1 && job->runs[0].cmd.kind == Kind::cluster)
      return rb::cluster::run_cluster(&argc, &argv, cluster_job_of(job->runs[0].cmd), signals.stop());
    rb::Status st = rb::app::run_job(*job, signals.stop());
    if (st.is_ok()) return 0;
    fmt::print(stderr, "rdmabench: error: {}\n", st.message());
    return st.code() == rb::Errc::interrupted ? 130 : 1;  // 2 stays "the job file is wrong"
  }
  SignalWatcher signals;
  if (cmd->kind == Kind::server) {
    // The server logs its own errors (and sends run errors to the client); only the code is left.
    rb::Status st = rb::engine::run_server(cmd->server, signals.stop());
    return st.is_ok() ? 0 : st.code() == rb::Errc::interrupted ? 130 : 1;
  }
  // What this machine must offer, then the output files: both are checked before anything starts
  // (a connection, the loopback child), so a mistake is exit 2 with nothing left behind.
  if (rb::Status usable = rb::app::check_usable_here(cmd->spec); !usable) return exit_code(usable);
  if (cmd->kind == Kind::cluster) return rb::cluster::run_cluster(&argc, &argv, cluster_job_of(*cmd), signals.stop());
  auto sink = rb::report::ReportSink::open(cmd->output);
  if (!sink) return exit_code(sink.status());
  if (cmd->kind == Kind::client) return exit_code(rb::engine::run_client(cmd->spec, cmd->client, **sink, signals.stop()));

  auto child = rb::app::LoopbackServer::start(cmd->server_cpus);
  if (!child) return exit_code(child.status());
  cmd->client.server = {"127.0.0.1", child->port()};
  rb::Status st = rb::engine::run_client(cmd->spec, cmd->client, **sink, signals.stop());
  child->finish(st.is_ok() ? 5 : 1);
  return exit_code(st);
}
