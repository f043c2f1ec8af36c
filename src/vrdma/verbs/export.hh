#pragma once
// Everything in this library is hidden (-fvisibility=hidden) but the verbs entry points it
// interposes: a preloaded definition wins over libibverbs' own for the program and the libraries
// it loads.
#include <cerrno>
#include <cstdio>

#define VERBS_EXPORT extern "C" __attribute__((visibility("default")))

namespace rb::verbs {

// Verbs calls report errors through errno and their return value; a setup failure also says why
// on stderr, once, since a program's "Couldn't modify QP" alone leaves its user guessing.
template <typename... Args>
void say(const char* fmt, Args... args) {
  std::fprintf(stderr, "vrdma-verbs: ");
  std::fprintf(stderr, fmt, args...);
  std::fputc('\n', stderr);
}

// For calls that return a pointer: errno set, NULL back.
template <typename T = void>
T* fail_null(int err) {
  errno = err;
  return nullptr;
}

}  // namespace rb::verbs
