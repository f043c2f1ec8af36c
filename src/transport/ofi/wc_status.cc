#include "transport/ofi/wc_status.hh"

#include <rdma/fi_errno.h>

namespace rb::transport::ofi {

// Providers differ in which code they pick for the same event (verbs reports a rejected rkey as
// EACCES, others as EINVAL or EKEYREJECTED), so several codes map to one status.
WcStatus wc_status_of(int fi_err) {
  switch (fi_err) {
    case 0: return WcStatus::success;
    case FI_ETRUNC:
    case FI_EMSGSIZE:
    case FI_ETOOSMALL: return WcStatus::local_length;
    case FI_EACCES:
    case FI_EPERM:
    case FI_EINVAL:
    case FI_EFAULT:
    case FI_ENOKEY:
    case FI_EKEYREJECTED: return WcStatus::remote_access;
    case FI_EREMOTEIO:
    case FI_EIO: return WcStatus::remote_operation;
    case FI_ECANCELED: return WcStatus::flushed;
    case FI_ETIMEDOUT: return WcStatus::retry_exceeded;
    case FI_ENORX: return WcStatus::rnr;
    default: return WcStatus::fatal;
  }
}

}  // namespace rb::transport::ofi
