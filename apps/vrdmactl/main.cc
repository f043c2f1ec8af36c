// vrdmactl: asks this host's vrdma router about itself.
#include <sys/random.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <vrdma/vrdma.h>

namespace {

constexpr const char* kUsage = R"(vrdmactl: ask this host's vrdma router
  vrdmactl [--socket PATH] stats [--json]
                                   per-tenant clients, PDs, MRs, registered bytes, requests, errors
                                   (your tenant's; root and the config's admin_uids see every tenant,
                                   the links and the router's CPU); --json: one JSON object, for scripts
  vrdmactl link-key                a new link key for the routers of a cluster (64 hex digits, from
                                   the kernel's random source): vrdmactl link-key > /etc/vrdma/link.key;
                                   chmod 600 it, copy it to every router, name it in [router] link_key
  vrdmactl --version                this program's version
The socket defaults as libvrdma's does ($VRDMA_SOCKET, $XDG_RUNTIME_DIR/vrdma.sock, /run/vrdma/vrdma.sock).
)";

}  // namespace

int main(int argc, char** argv) {
  const char* socket = nullptr;
  std::string command;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (a == "--version") {
      std::printf("vrdmactl %s\n", RDMABENCH_VERSION);
      return 0;
    }
    if (a == "--socket" && i + 1 < argc) {
      socket = argv[++i];
    } else if (a == "--json") {
      json = true;
    } else if (command.empty() && (a == "stats" || a == "link-key")) {
      command = a;
    } else {
      std::fprintf(stderr, "vrdmactl: error: unexpected argument %s; vrdmactl --help\n", a.c_str());
      return 2;
    }
  }
  if (command.empty()) {
    std::fprintf(stderr, "vrdmactl: error: no command; give one: stats, link-key\n");
    return 2;
  }
  if (command == "link-key") {  // needs no router
    unsigned char key[32];
    if (getrandom(key, sizeof key, 0) != ssize_t(sizeof key)) return 1;
    for (unsigned char b : key) std::printf("%02x", b);
    std::printf("\n");
    return 0;
  }
  vrdma_context* ctx = vrdma_open(socket);
  if (!ctx) {
    std::fprintf(stderr, "vrdmactl: %s\n", vrdma_last_error());
    return 1;
  }
  char* text = json ? vrdma_router_stats_json(ctx) : vrdma_router_stats(ctx);
  if (!text) {
    std::fprintf(stderr, "vrdmactl: %s\n", vrdma_last_error());
    vrdma_close(ctx);
    return 1;
  }
  std::fputs(text, stdout);
  if (json) std::fputc('\n', stdout);
  std::free(text);
  vrdma_close(ctx);
  return 0;
}
