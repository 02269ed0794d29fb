# The layers the build enforces (docs/architecture.md). Each layer is one static library,
# defined by the CMakeLists.txt in its folder with overlapprof_layer(); a layer links only the
# layer right below it (and, through it, the ones further down).
#
# Static libraries alone would not catch a lower layer calling into a higher one: the final
# executable links every layer. So every layer also gets a link check, <layer>_linkcheck, an
# executable of all of the layer's objects (whole archive) and an empty main(), linked
# against the layers below it only. It is part of `all`: a call from a layer into a higher
# one is an undefined reference there and fails the build. (Which headers a file may include
# is checked by the `layering` test against tests/layering/layers.txt, which also checks that
# these libraries are that file's layers, in its order, each with the sources of its folders.)
#
#   overlapprof_layer(<target> [BELOW <lower layer target>] SOURCES <file>...)
#
# More sources (generated ones, say) can join later with target_sources(<target> ...).

add_library(overlapprof_linkcheck_main OBJECT ${CMAKE_CURRENT_LIST_DIR}/linkcheck_main.cc)

function(overlapprof_layer name)
  cmake_parse_arguments(PARSE_ARGV 1 L "" "BELOW" "SOURCES")
  if(L_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "overlapprof_layer(${name}): unknown arguments ${L_UNPARSED_ARGUMENTS}")
  endif()
  # One chain: each layer stands on the one defined just before it (the first on nothing).
  get_property(_layers GLOBAL PROPERTY OVERLAPPROF_LAYERS)
  list(LENGTH _layers _n)
  if(_n GREATER 0)
    list(GET _layers -1 _previous)
  else()
    set(_previous "")
  endif()
  if(NOT "${L_BELOW}" STREQUAL "${_previous}")
    message(FATAL_ERROR "overlapprof_layer(${name}): BELOW must be the layer defined just before it "
                        "('${_previous}'), not '${L_BELOW}'")
  endif()
  add_library(${name} STATIC ${L_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR}/generated)
  if(L_BELOW)
    target_link_libraries(${name} PUBLIC ${L_BELOW})
  endif()

  add_executable(${name}_linkcheck $<TARGET_OBJECTS:overlapprof_linkcheck_main>)
  target_link_libraries(${name}_linkcheck PRIVATE "$<LINK_LIBRARY:WHOLE_ARCHIVE,${name}>")
  # Never run: no debug info in the output (the linker still names file:line of a bad call).
  target_link_options(${name}_linkcheck PRIVATE -Wl,--strip-debug)
  set_property(GLOBAL APPEND PROPERTY OVERLAPPROF_LAYERS ${name})
endfunction()
