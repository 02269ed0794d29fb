# Writes OUT (a header) with the source tree's git revision, at every build, rewriting it only
# when it changed (so only what includes it recompiles): the short commit, "-dirty" when tracked
# files differ from it, "unknown" outside a git checkout (a source archive) or without git.
# cmake -DSOURCE_DIR=... -DOUT=... -DGIT=... -P GitRevision.cmake
set(revision "unknown")
if(GIT AND EXISTS "${SOURCE_DIR}/.git")
  execute_process(COMMAND "${GIT}" -C "${SOURCE_DIR}" rev-parse --short=12 HEAD
    OUTPUT_VARIABLE head RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(rc EQUAL 0 AND head)
    set(revision "${head}")
    execute_process(COMMAND "${GIT}" -C "${SOURCE_DIR}" status --porcelain --untracked-files=no
      OUTPUT_VARIABLE changes RESULT_VARIABLE rc ERROR_QUIET)
    if(rc EQUAL 0 AND NOT changes STREQUAL "")
      string(APPEND revision "-dirty")
    endif()
  endif()
endif()
set(text "#pragma once\n// Generated at build time by cmake/GitRevision.cmake.\nnamespace overlapprof {\ninline constexpr const char* kGitRevision = \"${revision}\";\n}  // namespace overlapprof\n")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()
