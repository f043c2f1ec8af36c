// Compiles the sm engine's kernel (the embedded sm_ring.h + sm_kernel.cu, exactly what rdmabench
// hands NVRTC at run time) for the H100: PTX for compute_90 and a CUBIN for sm_90, and checks the
// kernel's entry point is in both. No GPU is needed, only NVRTC's library.
//
// usage: sm_kernel_compile [--require] [--venv DIR] [LIBNVRTC]
//   NVRTC is LIBNVRTC, else $RDMABENCH_NVRTC, else the wheel's library under DIR (the
//   nvidia-cuda-nvrtc-cu12 package `make test` installs), else the system's. When none is found
//   it exits 77 (ctest: skipped, with the reason), or 1 with --require (`make test`), so a
//   machine without NVRTC cannot pass the check silently.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "transport/dma/nvrtc.hh"
#include "transport/dma/sm_kernel_source.hh"

namespace {

using rb::transport::dma::Nvrtc;

bool has(const std::vector<char>& bytes, const std::string& needle) {
  return std::search(bytes.begin(), bytes.end(), needle.begin(), needle.end()) != bytes.end();
}

int compile_for(const Nvrtc& nvrtc, const std::string& arch, const std::vector<std::string>& must_contain) {
  auto out = nvrtc.compile(rb::transport::dma::sm_kernel_source(), "sm_kernel.cu", arch);
  if (!out) {
    std::fprintf(stderr, "sm_kernel_compile: %s\n", out.status().message().c_str());
    return 1;
  }
  for (const auto& s : must_contain)
    if (!has(out.value(), s)) {
      std::fprintf(stderr, "sm_kernel_compile: the %s output lacks '%s'\n", arch.c_str(), s.c_str());
      return 1;
    }
  std::printf("sm_kernel_compile: %s: %zu bytes\n", arch.c_str(), out.value().size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  bool require = false;
  std::string venv, lib;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--require") require = true;
    else if (a == "--venv" && i + 1 < argc) venv = argv[++i];
    else lib = a;
  }
  if (lib.empty() && !std::getenv("RDMABENCH_NVRTC") && !venv.empty()) lib = rb::transport::dma::nvrtc_in_venv(venv);
  auto nvrtc = Nvrtc::load(lib);
  if (!nvrtc) {
    std::fprintf(stderr, "sm_kernel_compile: %s%s; `make kernel` installs it into .venv and runs this check\n",
                 require ? "" : "skipped: ", nvrtc.status().message().c_str());
    return require ? 1 : 77;
  }
  std::printf("sm_kernel_compile: NVRTC %d.%d from %s\n", nvrtc.value()->major, nvrtc.value()->minor,
              nvrtc.value()->path.c_str());
  const std::string entry = rb::transport::dma::kSmKernelName;
  int rc = compile_for(*nvrtc.value(), "compute_90", {".entry " + entry, ".target sm_90"});
  return rc ? rc : compile_for(*nvrtc.value(), "sm_90", {entry});
}
