# Embeds a page template and the files it includes into the binary at build time
# (used for the HTML report's page, reports/html/; docs/html-report.md).
#
#   include(${CMAKE_SOURCE_DIR}/cmake/EmbedAssets.cmake)
#   overlapprof_embed_page(<target> TEMPLATE <page.html> OUTPUT <name> SYMBOL <identifier>)
#
# generates, under ${CMAKE_CURRENT_BINARY_DIR}/generated/overlapprof/, <name>.h and <name>.cc and
# adds them to <target> (with that include directory, so sources include "overlapprof/<name>.h").
# The generated files are rebuilt whenever the template, any file beside it or this script changes.
#
# Template syntax (everything else is copied byte for byte):
#   {{# a comment }}      a whole line, dropped
#   {{include FILE}}      a whole line, replaced by the contents of FILE (relative to the template's
#                         folder; it should end with a newline)
#   {{data NAME}}         where the program inserts data: the page is cut there
# The header declares (in namespace overlapprof)
#   inline constexpr std::string_view <SYMBOL>Slots[] = {"NAME", ...};   // the data names, in order
#   extern const std::string_view <SYMBOL>[];    // one part more than slots: part i precedes slot i
# Parts are char arrays of '\xNN' bytes: no raw-string delimiter can collide, no string-literal
# length limit applies, and any byte (UTF-8) is kept.
#
# Checks (the build fails): an included .js containing "</script", "<script" or "<!--", or an included .css
# containing "</style" (either would break the inline page); an unknown {{...}} left in the page;
# an included file that does not exist.

set(_OVERLAPPROF_EMBED_SCRIPT "${CMAKE_CURRENT_LIST_FILE}")

if(NOT CMAKE_SCRIPT_MODE_FILE)
  function(overlapprof_embed_page target)
    cmake_parse_arguments(ARG "" "TEMPLATE;OUTPUT;SYMBOL" "" ${ARGN})
    if(NOT ARG_TEMPLATE OR NOT ARG_OUTPUT OR NOT ARG_SYMBOL)
      message(FATAL_ERROR "overlapprof_embed_page: TEMPLATE, OUTPUT and SYMBOL are required")
    endif()
    get_filename_component(template "${ARG_TEMPLATE}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    get_filename_component(dir "${template}" DIRECTORY)
    file(GLOB assets CONFIGURE_DEPENDS "${dir}/*.html" "${dir}/*.css" "${dir}/*.js")
    set(out_dir "${CMAKE_CURRENT_BINARY_DIR}/generated")
    set(out_h "${out_dir}/overlapprof/${ARG_OUTPUT}.h")
    set(out_cc "${out_dir}/overlapprof/${ARG_OUTPUT}.cc")
    add_custom_command(
      OUTPUT "${out_h}" "${out_cc}"
      COMMAND "${CMAKE_COMMAND}" "-DTEMPLATE=${template}" "-DOUT_H=${out_h}" "-DOUT_CC=${out_cc}"
              "-DHEADER=overlapprof/${ARG_OUTPUT}.h" "-DSYMBOL=${ARG_SYMBOL}" -P "${_OVERLAPPROF_EMBED_SCRIPT}"
      DEPENDS "${template}" ${assets} "${_OVERLAPPROF_EMBED_SCRIPT}"
      COMMENT "Embedding ${ARG_TEMPLATE} into ${ARG_OUTPUT}.cc"
      VERBATIM)
    target_sources(${target} PRIVATE "${out_h}" "${out_cc}")
    target_include_directories(${target} PRIVATE "${out_dir}")
  endfunction()
  return()
endif()

# ---- script mode: cmake -DTEMPLATE=... -DOUT_H=... -DOUT_CC=... -DHEADER=... -DSYMBOL=... -P EmbedAssets.cmake
cmake_minimum_required(VERSION 3.22)
get_filename_component(dir "${TEMPLATE}" DIRECTORY)
get_filename_component(template_name "${TEMPLATE}" NAME)
file(READ "${TEMPLATE}" page)
string(REGEX REPLACE "{{#[^\n]*}}\n" "" page "${page}")

# Includes, in order of appearance (each name once is enough: REPLACE replaces every occurrence).
string(REGEX MATCHALL "{{include [^}\n]+}}\n" includes "${page}")
set(inputs "")
foreach(directive IN LISTS includes)
  string(REGEX REPLACE "^{{include ([^}\n]+)}}\n$" "\\1" name "${directive}")
  if(NOT EXISTS "${dir}/${name}")
    message(FATAL_ERROR "${template_name}: included file ${dir}/${name} does not exist")
  endif()
  file(READ "${dir}/${name}" content)
  string(TOLOWER "${content}" lower)
  set(bad "")
  if(name MATCHES "\\.js$")
    set(bad "</script" "<!--" "<script")
  elseif(name MATCHES "\\.css$")
    set(bad "</style")
  endif()
  foreach(b IN LISTS bad)
    string(FIND "${lower}" "${b}" at)
    if(NOT at EQUAL -1)
      message(FATAL_ERROR "${dir}/${name} contains \"${b}\", which would break the inline page "
                          "(write it as e.g. '<' + '/script')")
    endif()
  endforeach()
  string(REPLACE "${directive}" "${content}" page "${page}")
  list(APPEND inputs "${name}")
endforeach()

# Cut at the data slots.
set(slots "")
set(parts "")
set(n 0)
while(TRUE)
  string(FIND "${page}" "{{data " at)
  if(at EQUAL -1)
    break()
  endif()
  string(SUBSTRING "${page}" 0 ${at} part_${n})
  string(SUBSTRING "${page}" ${at} -1 rest)
  string(FIND "${rest}" "}}" close)
  if(close EQUAL -1)
    message(FATAL_ERROR "${template_name}: unterminated {{data")
  endif()
  math(EXPR name_len "${close} - 7")
  string(SUBSTRING "${rest}" 7 ${name_len} slot)
  if(NOT slot MATCHES "^[A-Za-z_][A-Za-z0-9_]*$")
    message(FATAL_ERROR "${template_name}: bad data slot name \"${slot}\"")
  endif()
  list(APPEND slots "${slot}")
  math(EXPR after "${close} + 2")
  string(SUBSTRING "${rest}" ${after} -1 page)
  math(EXPR n "${n} + 1")
endwhile()
set(part_${n} "${page}")
math(EXPR part_count "${n} + 1")
foreach(i RANGE ${n})
  string(FIND "${part_${i}}" "{{" at)
  if(NOT at EQUAL -1)
    string(SUBSTRING "${part_${i}}" ${at} 40 what)
    message(FATAL_ERROR "${template_name}: unknown directive in the page: ${what}")
  endif()
endforeach()

# The header: changes only when the slots do (written only if different), so editing the page
# recompiles the generated .cc alone.
string(REPLACE ";" "\", \"" slot_list "${slots}")
list(JOIN inputs ", " input_list)
set(h "// Generated by cmake/EmbedAssets.cmake from ${template_name}: do not edit.\n")
string(APPEND h "#pragma once\n#include <string_view>\n\nnamespace overlapprof {\n\n")
string(APPEND h "// The data slots of the page ({{data NAME}}), in order.\n")
string(APPEND h "inline constexpr std::string_view ${SYMBOL}Slots[] = {\"${slot_list}\"};\n")
string(APPEND h "// ${template_name} with its includes inlined, cut at the slots: part i precedes slot i.\n")
string(APPEND h "extern const std::string_view ${SYMBOL}[${part_count}];\n\n}  // namespace overlapprof\n")
file(WRITE "${OUT_H}.tmp" "${h}")
file(COPY_FILE "${OUT_H}.tmp" "${OUT_H}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT_H}.tmp")

set(cc "// Generated by cmake/EmbedAssets.cmake from ${template_name} (${input_list}): do not edit.\n")
string(APPEND cc "#include \"${HEADER}\"\n\nnamespace overlapprof {\nnamespace {\n")
foreach(i RANGE ${n})
  string(LENGTH "${part_${i}}" len)
  if(len EQUAL 0)
    set(bytes "'\\0'")  # an empty array is not allowed; the part's size excludes it
    set(size 0)
  else()
    string(HEX "${part_${i}}" hex)
    # 16 bytes a line, each '\xNN'.
    string(REGEX REPLACE "(................................)" "\\1\n" hex "${hex}")
    string(REGEX REPLACE "([0-9a-f][0-9a-f])" "'\\\\x\\1'," bytes "${hex}")
    set(size "sizeof(k${i})")
  endif()
  string(APPEND cc "constexpr char k${i}[] = {\n${bytes}};\n")
  set(view_${i} "std::string_view(k${i}, ${size})")
endforeach()
string(APPEND cc "}  // namespace\n\nconst std::string_view ${SYMBOL}[${part_count}] = {\n")
foreach(i RANGE ${n})
  string(APPEND cc "    ${view_${i}},\n")
endforeach()
string(APPEND cc "};\n\n}  // namespace overlapprof\n")
file(WRITE "${OUT_CC}" "${cc}")
