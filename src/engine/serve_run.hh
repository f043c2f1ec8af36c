#pragma once
// One client's run on the server, in the process that serves it: the hello, the session, the
// endpoint exchange, then every phase the client asks for until it says bye.
#include <atomic>

#include "engine/server_options.hh"
#include "bootstrap/channel.hh"

namespace rb::engine {

// Exit codes of a run's process, as the accept loop reads them.
constexpr int kRunOk = 0, kRunFailed = 1, kNoRun = 3, kRunStopped = 130;

// Serves the client on `ch` and returns the exit code for its process: kNoRun when the
// connection never became a run (no hello, a malformed one, another protocol version).
int serve_connection(bootstrap::Channel ch, const ServerOptions& opt, const std::atomic<bool>& stop);
// The same in the calling thread, for a run whose control channel is an MPI link (a forked child
// cannot use MPI): the run's own status.
Status serve_channel(bootstrap::Channel ch, const ServerOptions& opt, const std::atomic<bool>& stop);

}  // namespace rb::engine
