# SPDX-License-Identifier: MIT
# Part of the `docs` target: every installed header opens with a /** @file comment
# (below its SPDX line).
# Doxygen reports undocumented functions, types and macros only in documented files:
# a header without @file would leave all of its symbols out of the reference silently.
#   cmake -DHEADERS=DIR -P docs_headers.cmake
file(GLOB headers ${HEADERS}/*.h)
if(NOT headers)
  message(FATAL_ERROR "${HEADERS}: no headers")
endif()
set(missing)
foreach(h ${headers})
  file(READ ${h} head LIMIT 128)
  if(NOT head MATCHES "^(/\\* SPDX-License-Identifier: [^\n]*\n)?/\\*\\* @file")
    list(APPEND missing ${h})
  endif()
endforeach()
if(missing)
  list(JOIN missing "\n  " missing)
  message(FATAL_ERROR "headers that do not open with a /** @file comment (Doxygen would "
                      "not report their undocumented symbols):\n  ${missing}")
endif()
