#pragma once
// Every control message of a run, in the order a run uses them, each with its own JSON form.
// This file is the one place that lists them: a message type is a struct here, never a string
// literal at a call site.
//
//   client                         server
//   Hello (version, spec)   ->
//                           <-     Ready (version, endpoints, regions) | Error
//   Connect (endpoints)     ->
//                           <-     Connected | Error
//   per phase:
//   PhaseStart              ->
//                           <-     Go | Error
//   Mark, Alive...          ->     (Mark: the measured window opened; Alive: still here)
//   End (+ coverage bytes)  ->
//                           <-     Alive..., PhaseOutcome | Error
//   Bye                     ->
//
// Cluster mode adds a coordinator, which asks a host to run a pair as its client:
//
//   coordinator                    host (an `rdmabench --server`, or an MPI rank)
//   Drive (spec, target)    ->     runs the client conversation above with the target
//                           <-     PairRecord per phase, Alive..., then Bye | Error
//   Serve (from, session)   ->     MPI only: the target rank serves that pair; <- Bye | Error
//   Ping                    ->     MPI only, after a failure: is this rank still there?
//                           <-     Pong
//   Bye (ranks_lost)        ->     MPI only, the run is over: leave the job, alone where a rank is lost
//
// Either side may send Alive at any time; a receiver skips it but counts it as a sign of life,
// which is what lets every wait be bounded by the run's --timeout even while the other side is
// busy for longer than that.
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/spec.hh"
#include "bootstrap/channel.hh"
#include "core/status.hh"
#include "transport/transport.hh"

namespace rb::protocol {

// Bumped whenever a message gains, loses or changes a field: peers must agree on it exactly.
constexpr int kVersion = 4;
// The largest JSON frame either side accepts: the channel's cap.
constexpr uint32_t kMaxMessageBytes = bootstrap::kMaxFrameBytes;

struct Hello {
  static constexpr const char* kType = "hello";
  int version = kVersion;
  std::string software;  // rdmabench release, for the error message only
  model::RunSpec spec;
  std::vector<std::string> rail_ips;  // --domains: the client's address on each rail
};

struct Ready {
  static constexpr const char* kType = "ready";
  int version = kVersion;
  std::string software;
  std::vector<std::vector<uint8_t>> endpoints;  // one opaque address per endpoint
  std::vector<transport::RemoteRegion> regions;  // one per domain
  transport::DomainInfo info;
};

struct Connect {
  static constexpr const char* kType = "connect";
  std::vector<std::vector<uint8_t>> endpoints;
  std::vector<transport::RemoteRegion> regions;
};

struct Connected {
  static constexpr const char* kType = "connected";
};

struct PhaseStart {
  static constexpr const char* kType = "phase";
  uint64_t index = 0;
  model::Phase phase{};
  uint64_t seed = 0;
};

struct Go {
  static constexpr const char* kType = "go";
};

struct Mark {
  static constexpr const char* kType = "mark";
};

struct Alive {
  static constexpr const char* kType = "alive";
};

struct End {
  static constexpr const char* kType = "end";
  std::vector<uint64_t> sent;  // per endpoint, warm-up included: what the server must have seen
  bool coverage = false;       // a coverage map follows as a binary frame
};

struct CpuUse {
  double user_s = 0, sys_s = 0, total_s = 0, util = 0;
};

struct StreamFigures {  // --bidir: the server's own stream
  uint64_t iterations = 0;
  double duration_s = 0, gbps = 0, mops = 0;
};

struct PhaseOutcome {
  static constexpr const char* kType = "result";
  std::vector<uint64_t> received;  // per thread
  CpuUse cpu;
  std::optional<StreamFigures> reverse;
};

struct Bye {
  static constexpr const char* kType = "bye";
  // Cluster mode, rank 0 to its ranks: a rank of the job is gone, so leave it without waiting for
  // every rank (the launcher's collective exit would wait for the dead one for good).
  bool ranks_lost = false;
};

struct Error {
  static constexpr const char* kType = "error";
  Errc code = Errc::internal;
  std::string message;
};

struct Drive {
  static constexpr const char* kType = "drive";
  int version = kVersion;
  std::string software;
  model::RunSpec spec;
  std::string target;    // --hosts: the target's HOST:PORT
  int target_rank = -1;  // MPI: the target's rank
  uint64_t session = 0;  // MPI: names the pair's message tags
};

struct Serve {
  static constexpr const char* kType = "serve";
  int from_rank = -1;
  uint64_t session = 0;
};

struct PairRecord {
  static constexpr const char* kType = "record";
  std::string line;  // the phase's JSON Lines object, as a client run writes it
  double line_gbps = 0;  // the link speed the driver's provider reports; 0 when unknown
};

struct Ping {
  static constexpr const char* kType = "ping";
};

struct Pong {
  static constexpr const char* kType = "pong";
};

using Message = std::variant<Hello, Ready, Connect, Connected, PhaseStart, Go, Mark, Alive, End, PhaseOutcome, Bye, Error,
                             Drive, Serve, PairRecord, Ping, Pong>;

nlohmann::json to_json(const Message& m);
// A frame's JSON -> the message it holds. A missing or mistyped field is an Errc::io Status that
// names the message and the field.
Result<Message> from_json(const nlohmann::json& j);
const char* type_name(const Message& m);

// The peer's Error as a Status of ours: its code (unknown codes become internal) and its text.
Status status_of(const Error& e);
Error error_of(const Status& s);

}  // namespace rb::protocol
