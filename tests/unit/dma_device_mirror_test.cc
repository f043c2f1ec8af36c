// dma:cuda's --validate path without a GPU: the endpoint's device buffer is stood in for by host
// memory behind a CUDA runtime whose entry points are memcpy and memset, and the copies are made
// by dma:cpu's engine. What is checked is the endpoint's own logic, which runs unchanged on a GPU:
// the device buffer is loaded from the server's region before a phase's first op, and at
// quiesce exactly the ranges this endpoint wrote go back (not its stale copy of the rest).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "transport/dma/dma_endpoint.hh"
#include "transport/dma/dma_transport.hh"

namespace rb::transport::dma {
namespace {

constexpr size_t kRegion = 64 * 1024;

// A CUDA runtime over host memory: "device" memory is malloc'd, copies are memcpy.
std::shared_ptr<CudaRuntime> host_runtime() {
  auto rt = std::make_shared<CudaRuntime>();
  rt->Malloc = [](void** p, size_t n) { return (*p = std::malloc(n)) ? 0 : 2; };
  rt->Free = [](void* p) { std::free(p); return 0; };
  rt->Memset = [](void* p, int v, size_t n) { std::memset(p, v, n); return 0; };
  rt->Memcpy = [](void* d, const void* s, size_t n, int) { std::memcpy(d, s, n); return 0; };
  rt->StreamSynchronize = [](cudaStream_t) { return 0; };
  return rt;
}

// cudaMemcpy from pageable host memory to the device returns once the bytes are staged; they land
// later, though before the legacy stream's next work. This runtime holds such a copy back until
// the next legacy-stream call (a cudaMemcpy or a wait on the legacy stream).
struct StagedUpload {
  void* device = nullptr;
  size_t device_len = 0;
  void* pending_to = nullptr;
  std::vector<uint8_t> pending;
  void land() {
    if (pending_to) std::memcpy(pending_to, pending.data(), pending.size());
    pending_to = nullptr;
  }
  bool on_device(const void* p) const {
    auto* b = static_cast<const uint8_t*>(device);
    return p >= device && static_cast<const uint8_t*>(p) < b + device_len;
  }
};

// The runtime's entry points are plain function pointers, as CUDA's are, so they reach the
// staging state through this pointer (set by the one test that uses it).
StagedUpload* staged_now = nullptr;

std::shared_ptr<CudaRuntime> staging_runtime() {
  auto rt = host_runtime();
  rt->Malloc = [](void** p, size_t n) {
    staged_now->device = *p = std::malloc(n);
    staged_now->device_len = n;
    return *p ? 0 : 2;
  };
  rt->Memcpy = [](void* d, const void* s, size_t n, int) {
    StagedUpload& st = *staged_now;
    st.land();
    if (st.on_device(d) && !st.on_device(s)) {
      st.pending.assign(static_cast<const uint8_t*>(s), static_cast<const uint8_t*>(s) + n);
      st.pending_to = d;
    } else {
      std::memcpy(d, s, n);
    }
    return 0;
  };
  rt->StreamSynchronize = [](cudaStream_t stream) {
    if (!stream) staged_now->land();
    return 0;
  };
  return rt;
}

class DeviceMirror : public ::testing::Test {
 protected:
  void SetUp() override {
    OpenArgs args;
    args.variant = "cpu";
    auto d = open_domain(args);
    ASSERT_TRUE(d.is_ok()) << d.status().message();
    domain_ = std::move(d.value());
    for (auto* m : {&server_, &client_}) {
      auto mem = domain_->allocate(kRegion);
      ASSERT_TRUE(mem.is_ok()) << mem.status().message();
      m->mem = std::move(mem.value());
      auto mr = domain_->register_memory(m->mem->data(), kRegion);
      ASSERT_TRUE(mr.is_ok()) << mr.status().message();
      m->mr = std::move(mr.value());
    }
  }

  std::unique_ptr<Endpoint> endpoint(bool validate, std::shared_ptr<CudaRuntime> rt = host_runtime()) {
    auto ep = make_dma_endpoint(EngineKind::cuda_copy, make_cpu_engine(64), std::move(rt), validate);
    Status s = ep->set_remote(server_.mr->remote());
    EXPECT_TRUE(s.is_ok()) << s.message();
    return ep;
  }

  // Posts one op and waits for its completion.
  void run(Endpoint& ep, Op op, uint32_t len, uint64_t local_off, uint64_t remote_off) {
    WorkRequest w{op, wr_flag::signal, len, client_.mr.get(), local_off, remote_off, 7};
    ASSERT_EQ(ep.post({&w, 1}), 1) << ep.last_error();
    Completion c[4];
    auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    int n = 0;
    while ((n = ep.poll(c)) == 0) ASSERT_LT(std::chrono::steady_clock::now(), end) << "no completion";
    ASSERT_EQ(n, 1) << ep.last_error();
    EXPECT_EQ(c[0].status, WcStatus::success);
  }

  static void fill(uint8_t* p, size_t n, uint8_t seed) {
    for (size_t i = 0; i < n; ++i) p[i] = uint8_t(seed + i * 13);
  }
  static bool holds(const uint8_t* p, size_t n, uint8_t seed) {
    for (size_t i = 0; i < n; ++i)
      if (p[i] != uint8_t(seed + i * 13)) return false;
    return true;
  }

  struct Side {
    std::unique_ptr<HostMemory> mem;
    std::unique_ptr<MemoryRegion> mr;
  };
  std::unique_ptr<Domain> domain_;
  Side server_, client_;
};

TEST_F(DeviceMirror, AReadPhaseSeesTheServersBytes) {
  fill(server_.mem->data(), kRegion, 1);  // the server's read pattern, laid before the phase
  auto ep = endpoint(true);
  run(*ep, Op::read, 4096, 0, 8192);
  EXPECT_TRUE(holds(client_.mem->data(), 4096, uint8_t(1 + 8192 * 13)));
  ASSERT_TRUE(ep->quiesce(5).is_ok());
  fill(server_.mem->data(), kRegion, 99);  // the next phase's pattern: reloaded at its first op
  run(*ep, Op::read, 256, 0, 0);
  EXPECT_TRUE(holds(client_.mem->data(), 256, 99));
}

TEST_F(DeviceMirror, QuiesceCopiesBackExactlyWhatThisEndpointWrote) {
  auto ep = endpoint(true);
  fill(client_.mem->data(), 512, 5);
  run(*ep, Op::write, 256, 0, 1024);
  run(*ep, Op::write, 256, 256, 4096);
  // Meanwhile another endpoint's write lands in the server's region; ours must not undo it.
  fill(server_.mem->data() + 2048, 64, 77);
  EXPECT_TRUE(holds(server_.mem->data() + 2048, 64, 77));
  EXPECT_EQ(server_.mem->data()[1024], 0) << "nothing is copied back before quiesce";
  ASSERT_TRUE(ep->quiesce(5).is_ok());
  EXPECT_TRUE(holds(server_.mem->data() + 1024, 256, 5));
  EXPECT_TRUE(holds(server_.mem->data() + 4096, 256, uint8_t(5 + 256 * 13)));
  EXPECT_TRUE(holds(server_.mem->data() + 2048, 64, 77)) << "another endpoint's bytes were overwritten";
  EXPECT_EQ(server_.mem->data()[1023], 0);
  EXPECT_EQ(server_.mem->data()[1024 + 256], 0);
  EXPECT_EQ(server_.mem->data()[4096 + 256], 0);
}

// Seen on an H200: a write phase's bytes came back as the phase's zeros, because the load of the
// device buffer landed after the engine's copies.
TEST_F(DeviceMirror, ThePhasesLoadHasLandedBeforeItsFirstCopy) {
  StagedUpload staged;
  staged_now = &staged;
  {
    auto ep = endpoint(true, staging_runtime());
    fill(client_.mem->data(), 256, 5);
    run(*ep, Op::write, 256, 0, 1024);
    ASSERT_TRUE(ep->quiesce(5).is_ok());
    EXPECT_TRUE(holds(server_.mem->data() + 1024, 256, 5)) << "the load overwrote the write";
  }
  staged_now = nullptr;
}

TEST_F(DeviceMirror, WithoutValidateTheDeviceBufferStaysApart) {
  fill(server_.mem->data(), kRegion, 3);
  auto ep = endpoint(false);
  run(*ep, Op::read, 128, 0, 0);
  for (int i = 0; i < 128; ++i) ASSERT_EQ(client_.mem->data()[i], 0) << "the device buffer starts zeroed";
  fill(client_.mem->data(), 128, 9);
  run(*ep, Op::write, 128, 0, 0);
  ASSERT_TRUE(ep->quiesce(5).is_ok());
  EXPECT_TRUE(holds(server_.mem->data(), 128, 3)) << "no copy back without --validate";
}

}  // namespace
}  // namespace rb::transport::dma
