#include "transport/ucx/log_capture.hh"

#include <ucs/debug/log_def.h>

#include <cstdarg>
#include <cstdio>

namespace rb::transport::ucx {
namespace {

thread_local std::string* sink = nullptr;

ucs_log_func_rc_t keep(const char*, unsigned, const char*, ucs_log_level_t level, const ucs_log_component_config_t*,
                       const char* message, va_list ap) {
  if (!sink) return UCS_LOG_FUNC_RC_CONTINUE;
  if (level <= UCS_LOG_LEVEL_WARN && sink->empty()) {
    char buf[512];
    va_list copy;
    va_copy(copy, ap);
    vsnprintf(buf, sizeof buf, message, copy);
    va_end(copy);
    *sink = buf;
  }
  return UCS_LOG_FUNC_RC_STOP;
}

}  // namespace

LogCapture::LogCapture() : outer_(sink) {
  sink = &first_;
  ucs_log_push_handler(keep);
}

LogCapture::~LogCapture() {
  ucs_log_pop_handler();
  sink = outer_;
}

}  // namespace rb::transport::ucx
