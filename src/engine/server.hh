#pragma once
// The server side: waits for clients and serves each one's run in a process of its own, several
// at once, until stopped (or after one run with `once`).
#include <atomic>

#include "engine/server_options.hh"
#include "core/status.hh"

namespace rb::engine {

Status run_server(const ServerOptions& opt, const std::atomic<bool>& stop);

}  // namespace rb::engine
