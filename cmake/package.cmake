# vrdmad's unit, user and config, and the Debian packages made from the same install rules.
#
# The unit names vrdmad and its config by the prefix the install is made with, not the one the
# build was configured with, so `cmake --install --prefix P` and the packages (prefix /usr, config
# in /etc) get a unit that points at what they installed.
install(FILES ${PROJECT_SOURCE_DIR}/packaging/systemd/vrdma.sysusers DESTINATION lib/sysusers.d RENAME vrdma.conf
  COMPONENT vrdma)
install(CODE "
  set(rb_etc \"\${CMAKE_INSTALL_PREFIX}/etc\")
  if(CMAKE_INSTALL_PREFIX STREQUAL \"/usr\")
    set(rb_etc /etc)
  endif()
  set(CMAKE_INSTALL_FULL_BINDIR \"\${CMAKE_INSTALL_PREFIX}/bin\")
  set(CMAKE_INSTALL_FULL_SYSCONFDIR \"\${rb_etc}\")
  configure_file(\"${PROJECT_SOURCE_DIR}/packaging/systemd/vrdmad.service.in\" \"${CMAKE_BINARY_DIR}/packaging/vrdmad.service\" @ONLY)
  file(INSTALL \"${CMAKE_BINARY_DIR}/packaging/vrdmad.service\" DESTINATION \"\${CMAKE_INSTALL_PREFIX}/lib/systemd/system\")
  file(INSTALL \"${PROJECT_SOURCE_DIR}/packaging/systemd/vrdmad.toml\" DESTINATION \"\${rb_etc}/vrdma\")
" COMPONENT vrdma)

# Each package's documentation, as Debian's policy has it: its copyright and its changelog
# (gzipped, reproducible), and rdmabench's lintian override (a run path libpmix needs).
string(TIMESTAMP RB_DEB_DATE "%a, %d %b %Y %H:%M:%S +0000" UTC)
foreach(pkg rdmabench vrdma vrdma-dev)
  file(WRITE ${CMAKE_BINARY_DIR}/packaging/debian/${pkg}/changelog
    "${pkg} (${PROJECT_VERSION}) unstable; urgency=medium\n\n  * Built from the source tree by make deb.\n\n -- ${RB_DEB_MAINTAINER}  ${RB_DEB_DATE}\n")
  execute_process(COMMAND gzip -9nf ${CMAKE_BINARY_DIR}/packaging/debian/${pkg}/changelog)
  install(FILES ${CMAKE_BINARY_DIR}/packaging/debian/${pkg}/changelog.gz ${PROJECT_SOURCE_DIR}/packaging/debian/copyright
    DESTINATION share/doc/${pkg} COMPONENT ${pkg})
endforeach()
install(FILES ${PROJECT_SOURCE_DIR}/packaging/debian/rdmabench.lintian-overrides DESTINATION share/lintian/overrides
  RENAME rdmabench COMPONENT rdmabench)

# `make deb`: rdmabench, vrdma (the router, the library, the verbs layer, the unit) and vrdma-dev
# (header, .pc, CMake package), with their library dependencies found by dpkg-shlibdeps.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME rdmabench)
set(CPACK_PACKAGE_VENDOR "rdmabench")
# Who answers for the packages: set it where they are published (make deb DEB_MAINTAINER="...").
set(RB_DEB_MAINTAINER "rdmabench developers <rdmabench@invalid>" CACHE STRING "the Maintainer of the Debian packages")
set(CPACK_PACKAGE_CONTACT "${RB_DEB_MAINTAINER}")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL rdmabench vrdma vrdma-dev)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)  # libvrdma.so.1: programs built against it depend on vrdma
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_RDMABENCH_PACKAGE_NAME rdmabench)
set(CPACK_DEBIAN_VRDMA_PACKAGE_NAME vrdma)
set(CPACK_DEBIAN_VRDMA-DEV_PACKAGE_NAME vrdma-dev)
set(CPACK_DEBIAN_VRDMA-DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_VRDMA-DEV_PACKAGE_DEPENDS "vrdma (= ${PROJECT_VERSION})")
set(CPACK_COMPONENT_RDMABENCH_DESCRIPTION "RDMA performance tool\nrdmabench measures RDMA WRITE, READ, SEND and atomics over libfabric,\nUCX, kernel TCP, copy engines and vrdma, on one host or a cluster.")
set(CPACK_COMPONENT_VRDMA_DESCRIPTION "virtual RDMA network: router, library and verbs layer\nvrdmad is a host's software RDMA NIC, shared by tenants kept apart;\nlibvrdma is its client library, and vrdma-run runs unmodified verbs\nprograms on it.")
set(CPACK_COMPONENT_VRDMA-DEV_DESCRIPTION "virtual RDMA network: development files\nThe header, pkg-config file and CMake package of libvrdma.")
# The config is the operator's: kept across upgrades. The user the unit runs as is made at install.
configure_file(${PROJECT_SOURCE_DIR}/packaging/debian/vrdma.conffiles ${CMAKE_BINARY_DIR}/packaging/debian/conffiles COPYONLY)
configure_file(${PROJECT_SOURCE_DIR}/packaging/debian/vrdma.postinst ${CMAKE_BINARY_DIR}/packaging/debian/postinst COPYONLY)
configure_file(${PROJECT_SOURCE_DIR}/packaging/debian/vrdma.triggers ${CMAKE_BINARY_DIR}/packaging/debian/triggers COPYONLY)
set(CPACK_DEBIAN_VRDMA_PACKAGE_CONTROL_EXTRA "${CMAKE_BINARY_DIR}/packaging/debian/conffiles;\
${CMAKE_BINARY_DIR}/packaging/debian/postinst;${CMAKE_BINARY_DIR}/packaging/debian/triggers")
set(CPACK_DEBIAN_VRDMA_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
