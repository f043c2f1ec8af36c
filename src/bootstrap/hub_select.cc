// Which launcher hub a cluster run gets. MPI and PMIx are optional build dependencies
// (RB_HAVE_MPI, RB_HAVE_PMIX); a run that needs one this build lacks says how to get it.
#include <cstdlib>

#include <fmt/format.h>

#include "bootstrap/hub.hh"
#ifdef RB_HAVE_MPI
#include "bootstrap/mpi_hub.hh"
#endif
#ifdef RB_HAVE_PMIX
#include "bootstrap/pmix_hub.hh"
#endif

namespace rb::bootstrap {

bool launched_by_pmix() { return std::getenv("PMIX_RANK") && std::getenv("PMIX_NAMESPACE"); }

bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE", "MPI_LOCALNRANKS"})
    if (std::getenv(v)) return true;
  return false;
}

namespace {

[[maybe_unused]] constexpr bool kHaveMpi =
#ifdef RB_HAVE_MPI
    true;
#else
    false;
#endif
[[maybe_unused]] constexpr bool kHavePmix =
#ifdef RB_HAVE_PMIX
    true;
#else
    false;
#endif

Result<std::unique_ptr<Hub>> start_mpi([[maybe_unused]] int* argc, [[maybe_unused]] char*** argv,
                                       [[maybe_unused]] const std::string& data_ip) {
#ifdef RB_HAVE_MPI
  return start_mpi_hub(argc, argv, data_ip);
#else
  return Status(Errc::unsupported, "--cluster under a launcher without PMIx needs rdmabench built with MPI: install it "
                                   "(Debian: apt-get install libopenmpi-dev openmpi-bin) and rebuild (make), or give --hosts FILE");
#endif
}

Result<std::unique_ptr<Hub>> start_pmix([[maybe_unused]] const std::string& data_ip, [[maybe_unused]] double timeout_s) {
  if (!launched_by_pmix())
    return Status(Errc::invalid_argument, "--bootstrap pmix: this job has no PMIx server (PMIX_RANK and PMIX_NAMESPACE "
                                          "are not set); launch with mpirun, prterun or srun --mpi=pmix, or use --bootstrap mpi");
#ifdef RB_HAVE_PMIX
  return start_pmix_hub(data_ip, timeout_s);
#else
  return Status(Errc::unsupported, "--bootstrap pmix needs rdmabench built with PMIx: install it (Debian: apt-get install "
                                   "libpmix-dev) and rebuild (make), or use --bootstrap mpi");
#endif
}

}  // namespace

Result<std::unique_ptr<Hub>> start_hub(HubKind kind, int* argc, char*** argv, const std::string& data_ip, double timeout_s) {
  switch (kind) {
    case HubKind::pmix: return start_pmix(data_ip, timeout_s);
    case HubKind::mpi: return start_mpi(argc, argv, data_ip);
    case HubKind::automatic:
      if (kHavePmix && launched_by_pmix()) return start_pmix(data_ip, timeout_s);
      return start_mpi(argc, argv, data_ip);
  }
  return Status(Errc::invalid_argument, "unknown launcher hub");
}

}  // namespace rb::bootstrap
