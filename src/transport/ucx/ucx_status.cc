#include "transport/ucx/ucx_status.hh"

#include <fmt/format.h>

namespace rb::transport::ucx {
namespace {

const char* code_name(ucs_status_t st) {
  switch (st) {
    case UCS_OK: return "UCS_OK";
    case UCS_ERR_MESSAGE_TRUNCATED: return "UCS_ERR_MESSAGE_TRUNCATED";
    case UCS_ERR_CANCELED: return "UCS_ERR_CANCELED";
    case UCS_ERR_ENDPOINT_TIMEOUT: return "UCS_ERR_ENDPOINT_TIMEOUT";
    case UCS_ERR_TIMED_OUT: return "UCS_ERR_TIMED_OUT";
    case UCS_ERR_CONNECTION_RESET: return "UCS_ERR_CONNECTION_RESET";
    case UCS_ERR_UNREACHABLE: return "UCS_ERR_UNREACHABLE";
    case UCS_ERR_REJECTED: return "UCS_ERR_REJECTED";
    case UCS_ERR_INVALID_ADDR: return "UCS_ERR_INVALID_ADDR";
    case UCS_ERR_OUT_OF_RANGE: return "UCS_ERR_OUT_OF_RANGE";
    case UCS_ERR_IO_ERROR: return "UCS_ERR_IO_ERROR";
    case UCS_ERR_NO_DEVICE: return "UCS_ERR_NO_DEVICE";
    case UCS_ERR_UNSUPPORTED: return "UCS_ERR_UNSUPPORTED";
    case UCS_ERR_NO_ELEM: return "UCS_ERR_NO_ELEM";
    case UCS_ERR_INVALID_PARAM: return "UCS_ERR_INVALID_PARAM";
    default: return nullptr;
  }
}

}  // namespace

// A tag receive shorter than the message is the receiver's length error; a cancelled request
// (quiesce, a closing endpoint) is flushed; a peer that stops answering is retry_exceeded; an
// address or range the target refuses is remote_access. Whatever else breaks a request leaves
// the endpoint unusable: fatal.
WcStatus wc_status_of(ucs_status_t st) {
  switch (st) {
    case UCS_OK: return WcStatus::success;
    case UCS_ERR_MESSAGE_TRUNCATED: return WcStatus::local_length;
    case UCS_ERR_CANCELED: return WcStatus::flushed;
    case UCS_ERR_ENDPOINT_TIMEOUT:
    case UCS_ERR_TIMED_OUT: return WcStatus::retry_exceeded;
    case UCS_ERR_INVALID_ADDR:
    case UCS_ERR_OUT_OF_RANGE:
    case UCS_ERR_REJECTED: return WcStatus::remote_access;
    default: return WcStatus::fatal;
  }
}

std::string ucx_error(ucs_status_t st) {
  const char* name = code_name(st);
  if (name) return fmt::format("{} ({})", ucs_status_string(st), name);
  return fmt::format("{} (status {})", ucs_status_string(st), int(st));
}

}  // namespace rb::transport::ucx
