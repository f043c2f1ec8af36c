#pragma once
// Errors as values: a Status carries a code and a one-line message meant for the user.
#include <string>
#include <utility>
#include <variant>

namespace rb {

enum class Errc {
  ok = 0,
  invalid_argument,  // the user's input is wrong; message names the flag and the fix
  unsupported,       // the transport or provider cannot do what was asked
  unavailable,       // a provider, device or library is missing on this machine
  io,                // a socket or system call failed
  peer_gone,         // the other side closed or died
  timeout,           // no progress within the allowed time
  validation,        // data arrived wrong
  interrupted,       // the user stopped the run (Ctrl-C)
  internal,
};

const char* errc_name(Errc c);

class Status {
 public:
  Status() = default;
  Status(Errc code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status ok() { return {}; }
  bool is_ok() const { return code_ == Errc::ok; }
  explicit operator bool() const { return is_ok(); }
  Errc code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  Errc code_ = Errc::ok;
  std::string message_;
};

// A value or the Status that explains why there is none.
template <class T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}
  Result(Status s) : v_(std::move(s)) {}
  bool is_ok() const { return v_.index() == 0; }
  explicit operator bool() const { return is_ok(); }
  T& value() { return std::get<0>(v_); }
  const T& value() const { return std::get<0>(v_); }
  T& operator*() { return value(); }
  T* operator->() { return &value(); }
  const Status& status() const { return std::get<1>(v_); }

 private:
  std::variant<T, Status> v_;
};

inline const char* errc_name(Errc c) {
  switch (c) {
    case Errc::ok: return "ok";
    case Errc::invalid_argument: return "invalid argument";
    case Errc::unsupported: return "unsupported";
    case Errc::unavailable: return "unavailable";
    case Errc::io: return "i/o error";
    case Errc::peer_gone: return "peer gone";
    case Errc::timeout: return "timeout";
    case Errc::validation: return "validation failed";
    case Errc::interrupted: return "interrupted";
    case Errc::internal: return "internal error";
  }
  return "?";
}

// errc_name's inverse, for codes read off the wire; an unknown name is `internal`.
inline Errc errc_from_name(const std::string& name) {
  for (int c = int(Errc::ok); c <= int(Errc::internal); ++c)
    if (name == errc_name(Errc(c))) return Errc(c);
  return Errc::internal;
}

}  // namespace rb
