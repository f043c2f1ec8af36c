// vrdmad: the vrdma router daemon of this host. It serves clients (libvrdma) on a Unix socket,
// knows them by SO_PEERCRED and puts them in tenants from --config.
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "vrdma/lib/context.hh"
#include "vrdma/router/router.hh"

namespace {

constexpr const char* kUsage = R"(vrdmad: the vrdma router of this host (the software NIC)
  vrdmad [--socket PATH] [--config FILE] [--quiet]

  --socket PATH   the Unix socket clients connect to (default: $VRDMA_SOCKET, else
                  $XDG_RUNTIME_DIR/vrdma.sock, else /run/vrdma/vrdma.sock)
  --config FILE   tenants (TOML, [[tenant]] entries: name, uids, rate_bytes, rate_ops, max_qps,
                  max_reg_bytes, path); without it every uid is a tenant of its own, unlimited
  --quiet         no log lines
  --version       print the version
Stops on SIGINT or SIGTERM, removing its socket.
)";

int usage_error(const std::string& message) {
  fmt::print(stderr, "vrdmad: error: {}\n", message);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  rb::vrdma::RouterOptions opts;
  opts.socket_path = rb::vrdma::default_socket_path();
  std::string config;
  std::vector<std::string> args(argv + 1, argv + argc);
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> const std::string* { return i + 1 < args.size() ? &args[++i] : nullptr; };
    if (a == "-h" || a == "--help") {
      fmt::print("{}", kUsage);
      return 0;
    } else if (a == "--version") {
      fmt::print("vrdmad {}\n", RDMABENCH_VERSION);
      return 0;
    } else if (a == "--quiet" || a == "-q") {
      opts.quiet = true;
    } else if (a == "--socket" || a == "--config") {
      const std::string* v = value();
      if (!v) return usage_error(fmt::format("{} needs a value; vrdmad --help", a));
      (a == "--socket" ? opts.socket_path : config) = *v;
    } else {
      return usage_error(fmt::format("unknown argument {}; vrdmad --help lists the flags", a));
    }
  }
  if (!config.empty()) {
    auto t = rb::vrdma::Tenants::load(config);
    if (!t) return usage_error(t.status().message());
    opts.tenants = std::move(*t);
  }
  std::filesystem::path dir = std::filesystem::path(opts.socket_path).parent_path();
  std::error_code ec;
  if (!dir.empty() && !std::filesystem::exists(dir, ec) && !std::filesystem::create_directories(dir, ec))
    return usage_error(fmt::format("--socket {}: cannot create {}: {}", opts.socket_path, dir.string(), ec.message()));

  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  sigprocmask(SIG_BLOCK, &stop, nullptr);
  rb::UniqueFd sfd(signalfd(-1, &stop, SFD_CLOEXEC));
  auto router = rb::vrdma::Router::create(std::move(opts));
  if (!router) return usage_error(router.status().message());
  rb::Status st = (*router)->run(sfd.get());
  if (!st) {
    fmt::print(stderr, "vrdmad: {}\n", st.message());
    return 1;
  }
  return 0;
}
