// A shm region name left by a killed process with our pid must not stop us from opening an
// endpoint (libfabric 1.17 names regions "<pid>:<uid>:<n>" and fails fi_enable with EBUSY).
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "registry/registry.hh"
#include "transport/ofi/shm_names.hh"

namespace rb::transport {
namespace {

Result<std::unique_ptr<Domain>> shm_domain() {
  return open_selected({"ofi", "shm", "", {}}, {"", "127.0.0.1"});
}

int open_after_a_leftover() {
  // What a killed process with our pid left: its first endpoint's name, and a later one.
  for (const char* n : {":0:0", ":0:1"}) {
    std::string name = "/" + std::to_string(getpid()) + n;
    int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) return 3;
    close(fd);
  }
  auto d = shm_domain();
  if (!d) return 4;
  auto a = d.value()->open_endpoint({});
  auto b = d.value()->open_endpoint({});
  return a && b ? 0 : 5;
}

TEST(ShmNamesDeathTest, AnEndpointOpensOverALeftoverOfADeadProcessWithOurPid) {
  if (!shm_domain()) GTEST_SKIP() << "no shm provider";
  // "fast": the child is forked here, after this process opened shm, as the server forks its runs;
  // it has a new pid, so its first domain must clear names with that pid.
  GTEST_FLAG_SET(death_test_style, "fast");
  EXPECT_EXIT(std::_Exit(open_after_a_leftover()), ::testing::ExitedWithCode(0), "");
}

TEST(ShmNames, RemoveNamesOfRemovesOnlyThatPid) {
  namespace fs = std::filesystem;
  const pid_t ghost = 999999;  // above any pid_max, so no process owns it
  fs::path mine = "/dev/shm/" + std::to_string(ghost) + ":0:0";
  fs::path other = "/dev/shm/" + std::to_string(ghost) + "1:0:0";  // a different pid that shares the digits
  for (auto& p : {mine, other}) {
    int fd = open(p.c_str(), O_CREAT | O_RDWR, 0600);
    ASSERT_GE(fd, 0);
    close(fd);
  }
  ofi::remove_shm_names_of(ghost);
  EXPECT_FALSE(fs::exists(mine));
  EXPECT_TRUE(fs::exists(other));
  fs::remove(other);
}

}  // namespace
}  // namespace rb::transport
