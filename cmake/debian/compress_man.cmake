# SPDX-License-Identifier: MIT
# CPack runs this (CPACK_PRE_BUILD_SCRIPTS) on the files it staged for the Debian
# packages: man pages are shipped compressed with gzip -9n, as Debian policy asks.
# A plain `cmake --install` keeps them as they are.
file(GLOB_RECURSE staged "${CPACK_TEMPORARY_DIRECTORY}/*")
list(FILTER staged INCLUDE REGEX "/share/man/man[1-9]/[^/]+\\.[1-9]$")
foreach(page ${staged})
  execute_process(COMMAND gzip -9nf ${page} RESULT_VARIABLE result)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "gzip -9n ${page}: ${result}")
  endif()
endforeach()
