#pragma once
// The launcher hub over MPI point-to-point: one thread owns MPI after init
// (MPI_THREAD_SERIALIZED); it posts what links queue and files what arrives by (source, tag).
#include <memory>
#include <string>

#include "bootstrap/hub.hh"

namespace rb::bootstrap {

// MPI_Init_thread, then every rank's host name and `data_ip` gathered to all.
Result<std::unique_ptr<Hub>> start_mpi_hub(int* argc, char*** argv, const std::string& data_ip);

}  // namespace rb::bootstrap
