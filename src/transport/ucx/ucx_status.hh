#pragma once
// UCX status codes in rdmabench's terms: the shared completion status, and one line for a user.
#include <ucs/type/status.h>

#include <string>

#include "transport/transport.hh"

namespace rb::transport::ucx {

// The shared completion status for a request that ended with `st` (docs/transports.md lists the mapping).
WcStatus wc_status_of(ucs_status_t st);
// "Message truncated (UCS_ERR_MESSAGE_TRUNCATED)": UCX's text and the code's name.
std::string ucx_error(ucs_status_t st);

}  // namespace rb::transport::ucx
