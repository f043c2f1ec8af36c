#include "transport/ofi/shm_names.hh"

#include <dirent.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>

namespace rb::transport::ofi {

void remove_shm_names_of(pid_t pid) {
  DIR* d = opendir("/dev/shm");
  if (!d) return;
  std::string prefix = std::to_string(pid) + ":";
  while (dirent* e = readdir(d)) {
    if (std::string_view(e->d_name).starts_with(prefix)) unlinkat(dirfd(d), e->d_name, 0);
  }
  closedir(d);
}

void prepare_shm_names() {
  // Process-wide by nature: the names are keyed by pid. A forked child has a new pid and runs this again.
  static std::mutex m;
  static pid_t prepared_for = 0;
  static bool hook = false;
  std::lock_guard lk(m);
  if (prepared_for == getpid()) return;
  remove_shm_names_of(getpid());
  prepared_for = getpid();
  if (!hook) {
    hook = true;
    std::at_quick_exit([] { remove_shm_names_of(getpid()); });
  }
}

}  // namespace rb::transport::ofi
