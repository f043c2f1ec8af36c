# Optional libraries: a part of the build that needs one asks for it here, and is left out (with
# the reason kept for --list and --help) when it is missing. RDMABENCH_WITHOUT lists pkg-config
# modules to treat as missing, so a build without them can be tried on a machine that has them.
set(RDMABENCH_WITHOUT "" CACHE STRING "pkg-config modules to build without (e.g. \"libfabric;ucx;pmix\")")

# rb_optional_pkg(<PREFIX> <module> <install hint>): PkgConfig::<PREFIX> and <PREFIX>_FOUND when
# found; else <PREFIX>_MISSING says why, in words a user can act on.
macro(rb_optional_pkg prefix module hint)
  set(${prefix}_FOUND FALSE)
  if("${module}" IN_LIST RDMABENCH_WITHOUT)
    set(${prefix}_MISSING "built without ${module} (RDMABENCH_WITHOUT)")
  else()
    pkg_check_modules(${prefix} QUIET IMPORTED_TARGET ${module})
    if(NOT ${prefix}_FOUND)
      set(${prefix}_MISSING "${module} not found by pkg-config when this build was configured; ${hint} and rebuild")
    endif()
  endif()
endmacro()

# A transport's folder ends with one of these. The registry (src/registry) lists the built ones
# in the order src/transport/CMakeLists.txt adds the folders, and reports the left-out ones.
# rb_transport_built(<name> <header> <namespace>): target rb_transport_<name>, whose header
# declares <namespace>::registry_entry().
function(rb_transport_built name header ns)
  set_property(GLOBAL APPEND PROPERTY RB_TRANSPORTS "${name}")
  set_property(GLOBAL PROPERTY RB_TRANSPORT_HEADER_${name} "${header}")
  set_property(GLOBAL PROPERTY RB_TRANSPORT_NS_${name} "${ns}")
endfunction()
function(rb_transport_left_out name reason)
  set_property(GLOBAL APPEND PROPERTY RB_TRANSPORTS_LEFT_OUT "${name}")
  set_property(GLOBAL PROPERTY RB_TRANSPORT_REASON_${name} "${reason}")
  message(STATUS "transport ${name} left out: ${reason}")
endfunction()
