# SPDX-License-Identifier: MIT
# Debian packages, built by `cpack -G DEB` in a build configured with
# -DCMAKE_INSTALL_PREFIX=/usr (tests/debian_packages.sh does it):
#   libsluiceN     the shared library (N: the major version, the soname's: libsluice1)
#   libsluice-dev  headers, static library, the .so link, pkg-config and CMake files
#   sluice-tools   the sluice command and its man page
# Their dependencies on other libraries are what dpkg-shlibdeps finds in the ELF
# files; each package has cmake/debian/changelog as its changelog.gz (a native
# package: the version has no Debian revision) and cmake/debian/copyright (the MIT
# licence, machine-readable) as its copyright file. tests/debian_packages.sh runs
# lintian on them.
set(SLUICE_DEB_MAINTAINER "sluice maintainers <maintainers@users.noreply.a-seed-b88493c2.example>"
    CACHE STRING "The Maintainer field of the Debian packages")

# the changelog's newest entry must be this version
set(SLUICE_CHANGELOG ${PROJECT_SOURCE_DIR}/cmake/debian/changelog)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${SLUICE_CHANGELOG})
file(STRINGS ${SLUICE_CHANGELOG} SLUICE_CHANGELOG_TOP LIMIT_COUNT 1)
if(NOT SLUICE_CHANGELOG_TOP MATCHES "^sluice \\(${PROJECT_VERSION}\\) ")
  message(FATAL_ERROR "cmake/debian/changelog: the newest entry is '${SLUICE_CHANGELOG_TOP}'; "
                      "expected one for version ${PROJECT_VERSION} first")
endif()
# gzip -9n, as Debian compresses documents: the best compression, no name or time inside
set(SLUICE_CHANGELOG_GZ ${PROJECT_BINARY_DIR}/debian/changelog.gz)
file(MAKE_DIRECTORY ${PROJECT_BINARY_DIR}/debian)
execute_process(COMMAND gzip -9nc ${SLUICE_CHANGELOG} OUTPUT_FILE ${SLUICE_CHANGELOG_GZ}
                RESULT_VARIABLE SLUICE_GZIP_RESULT)
if(NOT SLUICE_GZIP_RESULT EQUAL 0)
  message(FATAL_ERROR "gzip -9n ${SLUICE_CHANGELOG}: ${SLUICE_GZIP_RESULT}")
endif()

set(SLUICE_DEB_lib libsluice${PROJECT_VERSION_MAJOR})
set(SLUICE_DEB_dev libsluice-dev)
set(SLUICE_DEB_tools sluice-tools)
foreach(component lib dev tools)
  string(TOUPPER ${component} C)
  set(CPACK_DEBIAN_${C}_PACKAGE_NAME ${SLUICE_DEB_${component}})
  set(CPACK_DEBIAN_${C}_FILE_NAME DEB-DEFAULT)
  # only in the packages: a plain `cmake --install` leaves it out
  install(FILES ${SLUICE_CHANGELOG_GZ} ${PROJECT_SOURCE_DIR}/cmake/debian/copyright
          DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/${SLUICE_DEB_${component}}
          COMPONENT ${component} EXCLUDE_FROM_ALL)
endforeach()

set(CPACK_PACKAGE_NAME sluice)
set(CPACK_PACKAGE_VENDOR sluice)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT ${SLUICE_DEB_MAINTAINER})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "rate-limit C functions in-process or across processes through Redis")
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL lib dev tools)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# sluice-tools links libsluice.so.N of this build: dpkg-shlibdeps finds it here, and
# the Depends on libsluiceN comes from the component's DEPENDS below
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${PROJECT_BINARY_DIR})
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)
set(CPACK_DEBIAN_LIB_PACKAGE_SECTION libs)
# a shlibs file for packages built on libsluiceN (only it has a shared library), asking
# for this version or a later one: within a major version the ABI only grows
# (docs/abi.md), so a program built against 1.y runs with any 1.z, z >= y
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
# dpkg runs ldconfig for a library in the loader's directories through this trigger.
# CPack would also write a postinst and a postrm that call ldconfig (lintian:
# maintscript-calls-ldconfig) unless the control files name their own: they are named
# here but do not exist, so the package has neither (as debhelper makes a library's).
set(CPACK_DEBIAN_LIB_PACKAGE_CONTROL_EXTRA ${PROJECT_SOURCE_DIR}/cmake/debian/triggers
    ${PROJECT_BINARY_DIR}/debian/no-maintainer-scripts/postinst
    ${PROJECT_BINARY_DIR}/debian/no-maintainer-scripts/postrm)
# the man page compressed with gzip -9n in the packages (cmake/debian/compress_man.cmake)
set(CPACK_PRE_BUILD_SCRIPTS ${PROJECT_SOURCE_DIR}/cmake/debian/compress_man.cmake)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
# what the headers, sluice.pc and sluiceConfig.cmake ask a consumer's build for
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
    "libglib2.0-dev (>= 2.74), libhiredis-dev (>= 0.14), libssl-dev (>= 3.0), pkg-config")
set(CPACK_DEBIAN_TOOLS_PACKAGE_SECTION utils)

# the packages' descriptions: a summary line, then lines of at most 79 characters
set(SLUICE_DEB_ABOUT "sluice limits how often C functions may run, in one process or across
every process that shares a Redis (one server, a Cluster or a Sentinel-managed
master, in plain TCP or TLS). A function is decorated with a macro, its limit
lives in a keyfile that operators edit, and a fallback runs when the limit
says no.
")
set(CPACK_DEBIAN_LIB_DESCRIPTION "rate-limit C functions in-process or through Redis (shared library)
${SLUICE_DEB_ABOUT}
This package has the shared library.")
set(CPACK_DEBIAN_DEV_DESCRIPTION "rate-limit C functions in-process or through Redis (development files)
${SLUICE_DEB_ABOUT}
This package has the headers, the static library, and the pkg-config and
CMake files to build programs with it.")
set(CPACK_DEBIAN_TOOLS_DESCRIPTION "command line tools of sluice, a rate limiter for C functions
${SLUICE_DEB_ABOUT}
This package has the sluice command: it checks keyfiles, tries, shows and
resets limits, and replays traffic traces against a keyfile (as text or as an
SVG picture).")

include(CPack)
cpack_add_component(lib DISPLAY_NAME "${SLUICE_DEB_lib}")
cpack_add_component(dev DISPLAY_NAME "libsluice-dev" DEPENDS lib)
cpack_add_component(tools DISPLAY_NAME "sluice-tools" DEPENDS lib)
