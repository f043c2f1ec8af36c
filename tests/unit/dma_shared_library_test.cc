// The CUDA libraries are found by name at run time; a name left empty (RDMABENCH_CUDART= and the
// like) must count as no name, not as the program itself.
#include <gtest/gtest.h>

#include <cstdlib>

#include "transport/dma/cuda_runtime.hh"
#include "transport/dma/shared_library.hh"

namespace rb::transport::dma {
namespace {

TEST(SharedLibrary, AnEmptyNameOpensNothing) {
  OpenedLibrary lib = open_first({"", "librdmabench-no-such-library.so"});
  EXPECT_EQ(lib.handle, nullptr) << "opened '" << lib.path << "'";
  EXPECT_EQ(lib.tried, "librdmabench-no-such-library.so");
}

// Seen on a GPU machine: RDMABENCH_CUDART set empty made --list say the program "lacks a CUDA
// runtime entry point" instead of naming the libraries it looked for.
TEST(SharedLibrary, AnEmptyVariableIsPassedOver) {
  const char* before = std::getenv("RDMABENCH_CUDART");
  std::string saved = before ? before : "";
  setenv("RDMABENCH_CUDART", "", 1);
  auto rt = CudaRuntime::load();
  if (before) setenv("RDMABENCH_CUDART", saved.c_str(), 1);
  else unsetenv("RDMABENCH_CUDART");
  if (rt.is_ok()) GTEST_SKIP() << "a CUDA runtime is installed here: " << rt.value()->path;
  EXPECT_NE(rt.status().message().find("CUDA runtime not found"), std::string::npos) << rt.status().message();
}

}  // namespace
}  // namespace rb::transport::dma
