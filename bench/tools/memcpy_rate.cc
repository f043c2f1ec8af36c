// One thread's memcpy rate for each size given (4K, 64K, 1M): the ceiling a same-host copy path
// is measured against. Prints GB/s per size on one line, best of several passes.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

size_t parse_size(const std::string& s) {
  char* end = nullptr;
  size_t n = std::strtoull(s.c_str(), &end, 10);
  if (*end == 'K' || *end == 'k') n <<= 10;
  if (*end == 'M' || *end == 'm') n <<= 20;
  return n;
}

// Page-aligned buffers, as registered regions are. malloc's 16-byte alignment is not what any
// transport copies between, and on this AMD EPYC glibc's copy of misaligned 4 KiB-64 KiB blocks
// runs at 2-3 GB/s against 40-75 GB/s aligned: a ceiling that would flatter everything under it.
struct PageBuffer {
  explicit PageBuffer(size_t n, int fill) : p(static_cast<char*>(std::aligned_alloc(4096, (n + 4095) / 4096 * 4096))) {
    std::memset(p, fill, n);
  }
  ~PageBuffer() { std::free(p); }
  char* data() const { return p; }
  char* p;
};

double rate(size_t size) {
  PageBuffer src(size, 1), dst(size, 0);
  size_t reps = std::max<size_t>(1, (256u << 20) / size);  // about 256 MiB a pass
  double best = 0;
  for (int pass = 0; pass < 5; ++pass) {
    auto t0 = std::chrono::steady_clock::now();
    for (size_t i = 0; i < reps; ++i) {
      std::memcpy(dst.data(), src.data(), size);
      asm volatile("" : : "r"(dst.data()) : "memory");  // keep every copy
    }
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, double(size) * double(reps) / s / 1e9);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) std::printf("%s%.2f", i > 1 ? " " : "", rate(parse_size(argv[i])));
  std::printf("\n");
  return 0;
}
