# Chains of first includes, for the check that every header compiles on its own
# (tests/CMakeLists.txt, ddp_header_alone): where a header's first code after its
# include guard is `#include <ddp/...>`, a translation unit of that header alone
# parses the included one before anything else, so it compiles that one alone too.

# ddp_first_ddp_include(FILE OUT): OUT is the ddp header (ddp/....hpp) that FILE
# includes before any other code (comments, blank lines, its guard and
# `#pragma once` aside), or empty where anything else comes first.
function(ddp_first_ddp_include file out)
  file(READ ${file} _text LIMIT 8192)
  # Semicolons would split a line in two: no line that decides has one.
  string(REPLACE ";" "" _text "${_text}")
  string(REPLACE "\n" ";" _lines "${_text}")
  set(_first "")
  foreach(_line IN LISTS _lines)
    if(_line MATCHES "^[ \t]*(//.*)?$" OR _line MATCHES "^#(ifndef|define) DDP_[A-Z0-9_]+_HPP[ \t]*$"
       OR _line MATCHES "^#pragma once")
      continue()
    endif()
    if(_line MATCHES "^#include <(ddp/[^>]+)>")
      set(_first ${CMAKE_MATCH_1})
    endif()
    break()
  endforeach()
  set(${out} "${_first}" PARENT_SCOPE)
endfunction()

# ddp_chain_roots(OUT PREFIX HEADER...): the HEADERs that need a translation unit of
# their own: each but those some other HEADER's chain of first includes reaches
# (${PREFIX}<header> holds a header's first include, from ddp_first_ddp_include).
function(ddp_chain_roots out prefix)
  set(_reached)
  foreach(h ${ARGN})
    set(_next "${${prefix}${h}}")
    while(_next AND NOT _next IN_LIST _reached)
      list(APPEND _reached ${_next})
      set(_next "${${prefix}${_next}}")
    endwhile()
  endforeach()
  set(_roots ${ARGN})
  if(_reached)
    list(REMOVE_ITEM _roots ${_reached})
  endif()
  # A cycle of first includes would leave its headers reached by none of the roots:
  # they keep their own translation units.
  set(_from_roots)
  foreach(h ${_roots})
    set(_next "${${prefix}${h}}")
    while(_next AND NOT _next IN_LIST _from_roots)
      list(APPEND _from_roots ${_next})
      set(_next "${${prefix}${_next}}")
    endwhile()
  endforeach()
  foreach(h ${ARGN})
    if(NOT h IN_LIST _roots AND NOT h IN_LIST _from_roots)
      list(APPEND _roots ${h})
    endif()
  endforeach()
  set(${out} ${_roots} PARENT_SCOPE)
endfunction()
