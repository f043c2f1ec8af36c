#pragma once
// NVRTC, the CUDA runtime compiler, loaded at run time (dlopen) so rdmabench builds and runs
// without it: the sm engine compiles its kernel with it for the GPU it runs on, and a test
// compiles the same kernel for sm_90 on machines with no GPU (NVRTC needs none).
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.hh"

namespace rb::transport::dma {

// The library of the nvidia-cuda-nvrtc wheel installed in the virtual environment `venv` (what
// `make nvrtc` installs), or "" when there is none.
std::string nvrtc_in_venv(const std::string& venv);

class Nvrtc {
 public:
  // Tries `path` when given, then $RDMABENCH_NVRTC, libnvrtc.so, .so.13, .so.12 and CUDA's
  // usual folder; the message says what was tried and how to point at one.
  static Result<std::shared_ptr<Nvrtc>> load(const std::string& path = "");
  ~Nvrtc();
  Nvrtc(const Nvrtc&) = delete;
  Nvrtc& operator=(const Nvrtc&) = delete;

  std::string path;
  int major = 0, minor = 0;  // NVRTC's own version (the CUDA release it comes from)

  // Compiles `source` for `arch` ("compute_90": PTX text; "sm_90": a CUBIN). A compile error is an
  // error naming the arch, with NVRTC's log.
  Result<std::vector<char>> compile(std::string_view source, const std::string& name, const std::string& arch) const;

 private:
  Nvrtc() = default;
  using Program = void*;
  int (*create_)(Program*, const char*, const char*, int, const char* const*, const char* const*) = nullptr;
  int (*compile_)(Program, int, const char* const*) = nullptr;
  int (*destroy_)(Program*) = nullptr;
  int (*log_size_)(Program, size_t*) = nullptr;
  int (*log_)(Program, char*) = nullptr;
  int (*ptx_size_)(Program, size_t*) = nullptr;
  int (*ptx_)(Program, char*) = nullptr;
  int (*cubin_size_)(Program, size_t*) = nullptr;
  int (*cubin_)(Program, char*) = nullptr;
  const char* (*error_string_)(int) = nullptr;
  void* lib_ = nullptr;

  std::string error(int code) const;
  Result<std::vector<char>> output(Program prog, bool cubin) const;
  std::string log_of(Program prog) const;
};

}  // namespace rb::transport::dma
