// vrdmad: the vrdma router daemon of this host. It serves clients (libvrdma) on a Unix socket,
// knows them by SO_PEERCRED and puts them in tenants from --config.
#include <pwd.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "vrdma/ipc/socket_path.hh"
#include "vrdma/proto/link.hh"
#include "vrdma/router/router.hh"

namespace {

constexpr const char* kUsage = R"(vrdmad: the vrdma router of this host (the software NIC)
  vrdmad [--socket PATH] [--config FILE] [--listen HOST:PORT [--fabric ofi:PROVIDER] [--peer HOST:PORT]... [--insecure-link]]
         [--threads N] [--metrics [HOST:]PORT] [--subuid FILE] [--quiet]

  --socket PATH   the Unix socket clients connect to (default: $VRDMA_SOCKET, else
                  $XDG_RUNTIME_DIR/vrdma.sock, else /run/vrdma/vrdma.sock)
  --config FILE   tenants (TOML, [[tenant]] entries: name, uids, rate_bytes, rate_ops,
                  qp_rate_bytes, qp_rate_ops, max_qps, max_mrs, max_reg_bytes, path) and the
                  router's own limits ([router]: admin_uids, max_clients_per_uid,
                  max_link_conns_per_host, link_key, link_networks);
                  without it every uid is a tenant of its own, with the default limits
  --listen HOST:PORT  where the routers of other hosts reach this one (a numeric address);
                  QPs whose peers are on other hosts take the router path over it
  --fabric ofi:PROVIDER  the libfabric provider routers talk over (default ofi:tcp): one with
                  connected endpoints, RMA and a shared receive context
  --peer HOST:PORT  another host's router to link with at start (repeatable); routers named in
                  QP addresses are linked when a QP connects, peers or not
  --insecure-link  with --listen and no link_key in the config: take link messages from anyone
                  who reaches the port (a test bed); without it --listen needs the cluster's key
  --threads N     threads moving router-path bytes (default 1: the control thread does it
                  too; N > 1: N threads of their own share the same-host QPs)
  --metrics [HOST:]PORT  serve Prometheus' text format at http://HOST:PORT/metrics (HOST
                  defaults to 127.0.0.1; port 0 picks one and logs it). A scraper of this host
                  sees what its uid may, as vrdmactl stats; one of another host (bind HOST off
                  loopback to allow it) sees every tenant
  --subuid FILE   users' subordinate uids (default /etc/subuid; absent: none): a uid in no
                  tenant that is in a user's range counts as that user's tenant, so one user's
                  container uids are one tenant
  --quiet         no log lines
  --version       print the version
Stops on SIGINT or SIGTERM, removing its socket; SIGHUP reloads the link key file.
)";

// "ofi:tcp" -> "tcp": the router makes its own connections over the provider's connected
// endpoints (each proves the cluster's key as it is made).
std::string fabric_provider(const std::string& v) {
  if (v.rfind("ofi:", 0) != 0 || v.size() == 4) return "";
  return v.substr(4);
}

// "9478" (on 127.0.0.1), "127.0.0.1:9478", "[::1]:9478", "0.0.0.0:9478".
bool parse_metrics(const std::string& v, rb::vrdma::RouterOptions& opts) {
  size_t colon = v.rfind(':');
  std::string host = colon == std::string::npos ? "127.0.0.1" : v.substr(0, colon);
  std::string port = colon == std::string::npos ? v : v.substr(colon + 1);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  char* end = nullptr;
  long p = std::strtol(port.c_str(), &end, 10);
  if (port.empty() || *end || p < 0 || p > 65535 || host.empty()) return false;
  opts.metrics_host = host;
  opts.metrics_port = uint16_t(p);
  return true;
}

int usage_error(const std::string& message) {
  fmt::print(stderr, "vrdmad: error: {}\n", message);
  return 2;
}

// What the command line asked for; `done` holds the exit code when it was answered already
// (--help, --version, a usage error).
struct Command {
  rb::vrdma::RouterOptions opts;
  std::string config;
  std::string subuid = "/etc/subuid";
  bool fabric_given = false, insecure_link = false;
  std::optional<int> done;
};

Command parse_args(const std::vector<std::string>& args) {
  Command c;
  c.opts.socket_path = rb::vrdma::ipc::default_socket_path();
  auto answered = [&c](int code) {
    c.done = code;
    return c;
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> const std::string* { return i + 1 < args.size() ? &args[++i] : nullptr; };
    if (a == "-h" || a == "--help") {
      fmt::print("{}", kUsage);
      return answered(0);
    } else if (a == "--version") {
      fmt::print("vrdmad {}\n", RDMABENCH_VERSION);
      return answered(0);
    } else if (a == "--insecure-link") {
      c.insecure_link = true;
    } else if (a == "--quiet" || a == "-q") {
      c.opts.quiet = true;
    } else if (a == "--threads") {
      const std::string* v = value();
      char* end = nullptr;
      long n = v ? std::strtol(v->c_str(), &end, 10) : 0;
      if (!v || *end || n < 1 || n > 64)
        return answered(usage_error(fmt::format("--threads {}: give 1 to 64 threads", v ? *v : std::string("(nothing)"))));
      c.opts.threads = int(n);
    } else if (a == "--metrics") {
      const std::string* v = value();
      if (!v) return answered(usage_error("--metrics needs a value: [HOST:]PORT, e.g. 9478 or 127.0.0.1:9478"));
      if (!parse_metrics(*v, c.opts)) return answered(usage_error(fmt::format(
          "--metrics {}: give [HOST:]PORT with a numeric HOST and a port 0-65535, e.g. 9478 or 127.0.0.1:9478", *v)));
    } else if (a == "--socket" || a == "--config" || a == "--listen" || a == "--fabric" ||
               a == "--peer" || a == "--subuid") {
      const std::string* v = value();
      if (!v) return answered(usage_error(fmt::format("{} needs a value; vrdmad --help", a)));
      if (a == "--listen" || a == "--peer") {
        std::string why;
        auto at = rb::vrdma::proto::parse_router_address(*v, &why);
        if (!at) return answered(usage_error(a + " " + why));
        if (a == "--listen") c.opts.listen = *at;
        else c.opts.peers.push_back(*at);
      } else if (a == "--fabric") {
        auto prov = fabric_provider(*v);
        if (prov.empty())
          return answered(usage_error(fmt::format("--fabric {}: give ofi:PROVIDER, e.g. ofi:tcp", *v)));
        c.opts.fabric = prov;
        c.fabric_given = true;
      } else {
        (a == "--socket" ? c.opts.socket_path : a == "--subuid" ? c.subuid : c.config) = *v;
      }
    } else {
      return answered(usage_error(fmt::format("unknown argument {}; vrdmad --help lists the flags", a)));
    }
  }
  return c;
}

// Users' subordinate uids, from `path` (absent: none; unreadable: an error naming it).
int load_subordinate_uids(const std::string& path, rb::vrdma::Tenants& tenants) {
  std::ifstream f(path);
  if (!f) {
    if (errno == ENOENT) return 0;
    return usage_error(fmt::format("--subuid {}: {}", path, std::strerror(errno)));
  }
  std::stringstream text;
  text << f.rdbuf();
  auto uid_of = [](const std::string& name) -> std::optional<uint32_t> {
    char* end = nullptr;
    unsigned long n = std::strtoul(name.c_str(), &end, 10);
    if (!name.empty() && !*end) return uint32_t(n);
    passwd pw{}, *found = nullptr;
    char buf[4096];
    if (getpwnam_r(name.c_str(), &pw, buf, sizeof buf, &found) != 0 || !found) return std::nullopt;
    return uint32_t(found->pw_uid);
  };
  tenants.set_subordinate_uids(rb::vrdma::parse_subuid(text.str(), uid_of));
  return 0;
}

// The flags that only make sense together, the tenants' config and the link key it names.
int load_config(Command& c) {
  rb::vrdma::RouterOptions& opts = c.opts;
  const bool fabric_given = c.fabric_given, insecure_link = c.insecure_link;
  if (!opts.peers.empty() && !opts.listen.port) return usage_error("--peer needs --listen HOST:PORT: peers reach this router there");
  if (fabric_given && !opts.listen.port) return usage_error("--fabric needs --listen HOST:PORT: it is how other hosts' routers reach this one");
  if (!c.config.empty()) {
    auto t = rb::vrdma::Tenants::load(c.config);
    if (!t) return usage_error(t.status().message());
    opts.tenants = std::move(*t);
  }
  if (int e = load_subordinate_uids(c.subuid, opts.tenants)) return e;
  const std::string& key_file = opts.tenants.router().link_key;
  if (insecure_link && !opts.listen.port) return usage_error("--insecure-link needs --listen HOST:PORT: it is about the link there");
  if (insecure_link && !key_file.empty())
    return usage_error(fmt::format("--insecure-link with link_key {} in the config: give one or the other", key_file));
  if (opts.listen.port && key_file.empty() && !insecure_link)
    return usage_error("--listen needs the cluster's link key: name it in the config ([router] link_key = FILE; "
                       "`vrdmactl link-key > FILE` makes one), or pass --insecure-link to take link messages from anyone");
  if (!key_file.empty()) {
    auto keys = rb::vrdma::load_link_keys(key_file);
    if (!keys) return usage_error(keys.status().message());
    opts.link_keys = std::move(*keys);
    opts.link_key_file = key_file;
  }
  return 0;
}

// Every tenant's regions and QPs hold descriptors of the router's, and the soft limit is often
// 1,024 under a hard one far above (systemd's default): the router takes all it is allowed.
void raise_descriptor_limit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur >= lim.rlim_max) return;
  lim.rlim_cur = lim.rlim_max;
  setrlimit(RLIMIT_NOFILE, &lim);
}

// Runs the router until SIGINT or SIGTERM (SIGHUP reloads the link keys).
int serve(rb::vrdma::RouterOptions opts) {
  raise_descriptor_limit();
  std::filesystem::path dir = std::filesystem::path(opts.socket_path).parent_path();
  std::error_code ec;
  if (!dir.empty() && !std::filesystem::exists(dir, ec) && !std::filesystem::create_directories(dir, ec))
    return usage_error(fmt::format("--socket {}: cannot create {}: {}", opts.socket_path, dir.string(), ec.message()));

  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGHUP);
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

}  // namespace

int main(int argc, char** argv) {
  Command c = parse_args(std::vector<std::string>(argv + 1, argv + argc));
  if (c.done) return *c.done;
  if (int e = load_config(c)) return e;
  return serve(std::move(c.opts));
}
