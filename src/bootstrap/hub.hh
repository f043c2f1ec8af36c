#pragma once
// What a launcher gives cluster mode: the ranks of the job, where each one is, and a control
// channel to any of them. Two kinds: MPI point-to-point (mpi_hub) and a TCP mesh whose addresses
// the job's PMIx server hands out (pmix_hub).
#include <memory>
#include <string>

#include "bootstrap/channel.hh"

namespace rb::bootstrap {

class Hub {
 public:
  virtual ~Hub() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const std::string& host_of(int rank) const = 0;
  virtual const std::string& data_ip_of(int rank) const = 0;
  // A channel to `peer`: frames go out tagged `send_tag` and come in from `peer` tagged
  // `recv_tag`. The two sides of a channel use each other's tags.
  virtual Channel link(int peer, int send_tag, int recv_tag) = 0;
  // "MPI" or "PMIx", for messages.
  virtual const char* kind() const = 0;
  // A rank of the job is gone: leave it without the collective exit that would wait for it.
  virtual void leave_alone() {}
};

enum class HubKind { automatic, pmix, mpi };

// Which launcher started this process, by the marks it leaves in the environment.
bool launched_by_pmix();  // PMIX_RANK and PMIX_NAMESPACE: mpirun, srun --mpi=pmix, prterun
bool launched_by_mpi();   // any launcher MPI knows, PMI-1/2 and OpenMPI's own included

// Brings up the hub `kind` asks for; automatic takes PMIx where the job has it and this build has
// a PMIx client, else MPI. `data_ip` is this rank's data-path address, handed to every rank;
// `timeout_s` bounds the PMIx exchange and each control connection it opens.
Result<std::unique_ptr<Hub>> start_hub(HubKind kind, int* argc, char*** argv, const std::string& data_ip, double timeout_s);

}  // namespace rb::bootstrap
