// Whether an MPI launcher started this process: mpirun and srun leave their marks in the environment.
#include <cstdlib>

#include "bootstrap/mpi_hub.hh"

namespace rb::bootstrap {

bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE", "MPI_LOCALNRANKS"})
    if (std::getenv(v)) return true;
  return false;
}

}  // namespace rb::bootstrap
