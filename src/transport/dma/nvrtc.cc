#include "transport/dma/nvrtc.hh"

#include <glob.h>

#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "transport/dma/shared_library.hh"

namespace rb::transport::dma {

Result<std::shared_ptr<Nvrtc>> Nvrtc::load(const std::string& path) {
  std::vector<std::string> names;
  if (!path.empty()) names.push_back(path);
  if (const char* env = std::getenv("RDMABENCH_NVRTC")) names.push_back(env);
  for (const char* n : {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12", "/usr/local/cuda/lib64/libnvrtc.so"})
    names.push_back(n);
  std::shared_ptr<Nvrtc> rt(new Nvrtc);
  OpenedLibrary lib = open_first(names);
  rt->lib_ = lib.handle;
  rt->path = lib.path;
  const std::string& tried = lib.tried;
  if (!rt->lib_)
    return Status(Errc::unavailable, fmt::format("NVRTC not found (tried {}; pip install nvidia-cuda-nvrtc-cu12 and set "
                                                 "RDMABENCH_NVRTC=/path/libnvrtc.so.12)", tried));
  auto sym = [&](auto& fn, const char* name) { return bind_symbol(rt->lib_, fn, name); };
  int (*version)(int*, int*) = nullptr;
  bool ok = sym(rt->create_, "nvrtcCreateProgram") && sym(rt->compile_, "nvrtcCompileProgram") &&
            sym(rt->destroy_, "nvrtcDestroyProgram") && sym(rt->log_size_, "nvrtcGetProgramLogSize") &&
            sym(rt->log_, "nvrtcGetProgramLog") && sym(rt->ptx_size_, "nvrtcGetPTXSize") && sym(rt->ptx_, "nvrtcGetPTX") &&
            sym(rt->cubin_size_, "nvrtcGetCUBINSize") && sym(rt->cubin_, "nvrtcGetCUBIN") &&
            sym(rt->error_string_, "nvrtcGetErrorString") && sym(version, "nvrtcVersion");
  if (!ok) return Status(Errc::unavailable, fmt::format("{} lacks an NVRTC entry point rdmabench needs", rt->path));
  version(&rt->major, &rt->minor);
  return rt;
}

Nvrtc::~Nvrtc() {
  if (lib_) dlclose(lib_);
}

std::string Nvrtc::error(int code) const {
  const char* s = error_string_ ? error_string_(code) : nullptr;
  return fmt::format("{} ({})", s ? s : "NVRTC error", code);
}

std::string Nvrtc::log_of(Program prog) const {
  size_t n = 0;
  if (log_size_(prog, &n) != 0 || n <= 1) return "";
  std::string log(n, '\0');
  if (log_(prog, log.data()) != 0) return "";
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  return log;
}

Result<std::vector<char>> Nvrtc::output(Program prog, bool cubin) const {
  size_t n = 0;
  int rc = cubin ? cubin_size_(prog, &n) : ptx_size_(prog, &n);
  std::vector<char> out(n);
  if (rc == 0) rc = cubin ? cubin_(prog, out.data()) : ptx_(prog, out.data());
  if (rc != 0) return Status(Errc::internal, fmt::format("NVRTC: reading the {}: {}", cubin ? "CUBIN" : "PTX", error(rc)));
  return out;
}

std::string nvrtc_in_venv(const std::string& venv) {
  std::string pattern = venv + "/lib/python3*/site-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so.*";
  glob_t g{};
  std::string found;
  if (glob(pattern.c_str(), 0, nullptr, &g) == 0)
    for (size_t i = 0; i < g.gl_pathc && found.empty(); ++i)
      if (!std::strstr(g.gl_pathv[i], ".alt.")) found = g.gl_pathv[i];  // the wheel's alternative build
  globfree(&g);
  return found;
}

Result<std::vector<char>> Nvrtc::compile(std::string_view source, const std::string& name, const std::string& arch) const {
  Program prog = nullptr;
  std::string text(source);  // NVRTC takes a C string
  int rc = create_(&prog, text.c_str(), name.c_str(), 0, nullptr, nullptr);
  if (rc != 0) return Status(Errc::internal, fmt::format("NVRTC: nvrtcCreateProgram: {}", error(rc)));
  std::string arch_opt = "--gpu-architecture=" + arch;
  const char* opts[] = {arch_opt.c_str(), "--std=c++17"};
  rc = compile_(prog, 2, opts);
  Result<std::vector<char>> out = Status(Errc::internal, "");
  if (rc != 0) {
    out = Status(Errc::internal, fmt::format("NVRTC {}.{} could not compile {} for {}: {}: {}", major, minor, name, arch,
                                             error(rc), log_of(prog)));
  } else {
    out = output(prog, arch.rfind("sm_", 0) == 0);
  }
  destroy_(&prog);
  return out;
}

}  // namespace rb::transport::dma
