// rdmabench built without MPI: cluster mode under a launcher says how to get it.
#include <fmt/format.h>

#include "cluster/mpi_ranks.hh"

namespace rb::cluster {

int run_mpi_ranks(int*, char***, const ClusterJob&, const Coordinate&, const std::atomic<bool>&) {
  fmt::print(stderr, "rdmabench: error: --cluster under a launcher needs rdmabench built with MPI: install it "
                     "(Debian: apt-get install libopenmpi-dev openmpi-bin) and rebuild (make), or give --hosts FILE\n");
  return 2;
}

}  // namespace rb::cluster
