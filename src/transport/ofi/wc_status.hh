#pragma once
#include "transport/transport.hh"

namespace rb::transport::ofi {
// The shared completion status for a libfabric CQ error entry's `err` (a positive FI_E* code).
WcStatus wc_status_of(int fi_err);
}  // namespace rb::transport::ofi
