#pragma once
// The sm engine's CUDA kernel as NVRTC takes it: sm_ring.h followed by sm_kernel.cu, embedded at
// build time (see CMakeLists.txt), so the GPU runs the same protocol text the tests run on CPUs.
#include <string_view>

namespace rb::transport::dma {

std::string_view sm_kernel_source();
// The kernel's entry point (extern "C", so the name is not mangled).
inline constexpr const char* kSmKernelName = "smr_consume_kernel";

}  // namespace rb::transport::dma
