// -t dma's registry entry: its variants, -o options and what --list says about each engine.
#include <fmt/format.h>

#include "transport/dma/cuda_runtime.hh"
#include "transport/dma/dma_transport.hh"
#include "transport/dma/sm_kernel.hh"

namespace rb::transport::dma {
namespace {

// The copy engines' line: usable wherever the CUDA runtime finds a GPU.
Availability cuda_copy_line(const Result<std::shared_ptr<CudaRuntime>>& rt, const Caps& caps) {
  if (!rt) return {"dma:cuda", false, rt.status().message()};
  auto& r = *rt.value();
  return {"dma:cuda", true,
          fmt::format("{} GPU(s), runtime {}.{} ({}), cudaMemcpyBatchAsync {}", r.devices, r.version / 1000,
                      r.version % 1000 / 10, r.path, r.has_batch() ? "yes" : "no (one cudaMemcpyAsync per op)"),
          caps};
}

// engine=sm's line, under `name`: it also needs the driver API, NVRTC and a Volta or later GPU.
Availability cuda_sm_line(const std::string& name, const Result<std::shared_ptr<CudaRuntime>>& rt, const Caps& caps) {
  if (!rt) return {name, false, rt.status().message()};
  std::string why = sm_engine_unavailable_reason(0);
  if (!why.empty()) return {name, false, why};
  return {name, true, "a persistent kernel's warps copy what CPU threads post into a ring in mapped pinned memory", caps};
}

std::vector<Availability> probe_engines(bool sm_run, const Caps& cpu, const Caps& cuda) {
  std::vector<Availability> out;
  out.push_back({"dma:cpu", true, "memcpy by one engine thread per queue; server region in shared memory (memfd)", cpu});
  auto rt = CudaRuntime::load();
  // A run with -o engine=sm is judged by the sm engine's line, under the name -t takes.
  if (sm_run) {
    out.push_back(cuda_sm_line("dma:cuda", rt, cuda));
    return out;
  }
  out.push_back(cuda_copy_line(rt, cuda));
  out.push_back(cuda_sm_line("dma:cuda engine=sm", rt, cuda));
  return out;
}

}  // namespace

TransportEntry registry_entry() {
  TransportEntry e;
  e.name = "dma";
  e.description = "copy engines moving memory as a NIC's DMA would (the DMA experiment); write and read only";
  e.variant_help = "the copy engine";
  e.variants = {{"cpu", "a copy thread per queue, into the peer's region in shared memory; the default"},
                {"cuda", "the GPU: its copy engines (-o engine=copy), or its threads (-o engine=sm); pinned host buffers "
                         "to and from device memory"}};
  e.domain_help = "dma:cuda: the GPU index (default 0); dma:cpu takes none";
  e.options = {
      {"engine", OptionType::choice, "copy",
       "dma:cuda: copy = the GPU's copy engines; sm = a persistent kernel whose threads copy descriptors CPU threads post "
       "into a ring (small ops); dma:cpu takes only copy", {"copy", "sm"}},
      {"sm_warps", OptionType::uint, "8", "engine=sm: warps (32 GPU threads each) of the kernel per queue", {}, 1, 256},
  };
  e.test_variants = {"cpu", "cuda"};
  e.open = open_domain;
  e.probe = [] { return probe_engines(false, dma_caps(false), dma_caps(true)); };
  e.probe_with = [](const OptionValues& o) {
    return probe_engines(o.text("engine") == "sm", dma_caps(false), dma_caps(true));
  };
  return e;
}

}  // namespace rb::transport::dma
