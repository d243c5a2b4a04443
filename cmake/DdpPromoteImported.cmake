# ddp_promote_imported(<link items>...): makes global the imported targets that the items
# name (also inside $<TARGET_FILE:...> and $<TARGET_PROPERTY:...>) and that their
# INTERFACE_LINK_LIBRARIES reach, where this directory imported them,
# so that other directories (a project that adds ddp as a subdirectory) can link them.
# Targets imported elsewhere, and link items that are not targets, are left as they are.
# Nothing here needs more than ddp's cmake_minimum_required (IMPORTED_GLOBAL can be set since
# CMake 3.11); no directory's list of imported targets (IMPORTED_TARGETS, CMake 3.21).
function(ddp_promote_imported)
  set(queue ${ARGN})
  set(seen "")
  while(queue)
    list(POP_FRONT queue item)
    string(REGEX REPLACE "^\\$<LINK_ONLY:(.+)>$" "\\1" item "${item}")
    if(NOT TARGET "${item}")
      # Targets named inside an item (LibTorch's: -Wl,--no-as-needed,"$<TARGET_FILE:torch_cpu>"
      # and $<TARGET_PROPERTY:torch_cpu,INTERFACE_LINK_LIBRARIES>).
      string(REGEX MATCHALL "\\$<TARGET_(FILE|LINKER_FILE|PROPERTY):[^,>]+" named "${item}")
      foreach(n IN LISTS named)
        string(REGEX REPLACE "^\\$<TARGET_[A-Z_]+:" "" n "${n}")
        list(APPEND queue "${n}")
      endforeach()
      continue()
    endif()
    get_target_property(aliased "${item}" ALIASED_TARGET)
    if(aliased)
      set(item "${aliased}")
    endif()
    if(item IN_LIST seen)
      continue()
    endif()
    list(APPEND seen "${item}")
    get_target_property(imported "${item}" IMPORTED)
    get_target_property(global "${item}" IMPORTED_GLOBAL)
    get_target_property(dir "${item}" SOURCE_DIR)
    if(imported AND NOT global AND dir STREQUAL CMAKE_CURRENT_SOURCE_DIR)
      set_target_properties("${item}" PROPERTIES IMPORTED_GLOBAL TRUE)
    endif()
    get_target_property(deps "${item}" INTERFACE_LINK_LIBRARIES)
    if(deps)
      list(APPEND queue ${deps})
    endif()
  endwhile()
endfunction()
