# SPDX-License-Identifier: MIT
# Reads the algorithm table of src/algorithm_table.h, the one list of sluice's
# algorithms, and sets:
#   SLUICE_ALGORITHM_NAMES  every algorithm's name, in sluice__algorithm order
#   SLUICE_LUA_NAMES        those a Lua script decides on Redis (lua/NAME.lua), same order
# A row it cannot read, or a script the table names that lua/ does not hold, fails
# configuring. Editing the table configures again.
set(SLUICE_ALGORITHM_TABLE ${PROJECT_SOURCE_DIR}/src/algorithm_table.h)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${SLUICE_ALGORITHM_TABLE})
file(STRINGS ${SLUICE_ALGORITHM_TABLE} rows REGEX "^ *X\\(")
string(REPLACE "\\;" ";" rows "${rows}") # a row's closing backslash escaped the separator
set(SLUICE_ALGORITHM_NAMES)
set(SLUICE_LUA_NAMES)
foreach(row IN LISTS rows)
  if(NOT row MATCHES
     "^ *X\\(SLUICE__[A-Z0-9_]+, \"([a-z0-9_]+)\", \"[a-z0-9]+\", (TRUE|FALSE)\\) *$")
    message(FATAL_ERROR "${SLUICE_ALGORITHM_TABLE}: a row not of the form "
                        "X(SLUICE__CODE, \"name\", \"tag\", TRUE or FALSE): ${row}")
  endif()
  list(APPEND SLUICE_ALGORITHM_NAMES ${CMAKE_MATCH_1})
  if(CMAKE_MATCH_2 STREQUAL "TRUE")
    if(NOT EXISTS ${PROJECT_SOURCE_DIR}/lua/${CMAKE_MATCH_1}.lua)
      message(FATAL_ERROR "${SLUICE_ALGORITHM_TABLE}: ${CMAKE_MATCH_1} has a script, "
                          "but lua/${CMAKE_MATCH_1}.lua does not exist")
    endif()
    list(APPEND SLUICE_LUA_NAMES ${CMAKE_MATCH_1})
  endif()
endforeach()
if(NOT SLUICE_ALGORITHM_NAMES)
  message(FATAL_ERROR "${SLUICE_ALGORITHM_TABLE}: no row of SLUICE__ALGORITHM_TABLE found")
endif()
