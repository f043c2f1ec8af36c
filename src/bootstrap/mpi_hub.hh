#pragma once
// The launcher's own message layer as control channels: under mpirun or srun every rank reaches
// every other through MPI, so cluster mode needs no TCP rendezvous. One thread owns MPI after
// init (MPI_THREAD_SERIALIZED): it posts what links queue and files what arrives by (source,
// tag), so a link's waits keep the Channel contract (bounded, stoppable, pollable).
#include <memory>
#include <string>
#include <vector>

#include "bootstrap/channel.hh"

namespace rb::bootstrap {

class MpiHub {
 public:
  // MPI_Init_thread, then every rank's host name and `data_ip` gathered to all.
  static Result<std::unique_ptr<MpiHub>> start(int* argc, char*** argv, const std::string& data_ip);
  ~MpiHub();  // sends what is queued (bounded), stops the thread, MPI_Finalize
  MpiHub(const MpiHub&) = delete;
  MpiHub& operator=(const MpiHub&) = delete;

  int rank() const;
  int size() const;
  const std::string& host_of(int rank) const;
  const std::string& data_ip_of(int rank) const;

  // A channel to `peer`: frames go out tagged `send_tag` and come in from `peer` tagged
  // `recv_tag`. The two sides of a channel use each other's tags.
  Channel link(int peer, int send_tag, int recv_tag);

  struct State;

 private:
  explicit MpiHub(std::shared_ptr<State> st) : st_(std::move(st)) {}
  std::shared_ptr<State> st_;
};

// True when this process was started by an MPI launcher (mpirun, srun with PMI/PMIx).
bool launched_by_mpi();

}  // namespace rb::bootstrap
