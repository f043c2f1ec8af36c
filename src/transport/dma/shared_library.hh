#pragma once
// The CUDA libraries are found at run time (dlopen), so rdmabench builds and runs without them:
// the first name of a list that loads, and typed symbols out of it.
#include <dlfcn.h>

#include <string>
#include <type_traits>
#include <vector>

namespace rb::transport::dma {

struct OpenedLibrary {
  void* handle = nullptr;  // null: none loaded
  std::string path;        // the name that loaded
  std::string tried;       // the names that did not, for the error
};

inline OpenedLibrary open_first(const std::vector<std::string>& names) {
  OpenedLibrary out;
  for (const auto& n : names) {
    if (n.empty()) continue;  // an empty variable: dlopen("") would hand back the program itself
    out.handle = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (out.handle) {
      out.path = n;
      return out;
    }
    out.tried += (out.tried.empty() ? "" : ", ") + n;
  }
  return out;
}

// `fn` set to the symbol `name` of `lib`; false when it has none.
template <class Fn>
bool bind_symbol(void* lib, Fn& fn, const char* name) {
  fn = reinterpret_cast<std::remove_reference_t<Fn>>(dlsym(lib, name));
  return fn != nullptr;
}

}  // namespace rb::transport::dma
