# Fuzz targets (libFuzzer). A harness is one file defining LLVMFuzzerTestOneInput(); register it
# from any tests/ folder with
#   sbx_add_fuzz_target(NAME fuzz_foo SOURCES fuzz_foo.c [LIBS lib...] [CORPUS dir...]
#                       [MAX_LEN bytes])
# which ALWAYS builds <NAME>_replay: the harness linked with tests/fuzz/replay_main.c, run by
# ctest (test_<NAME>_corpus) over every file of the seed corpus (default
# ${CMAKE_CURRENT_SOURCE_DIR}/corpus/<NAME>, plus any CORPUS dirs), so the normal suite exercises
# every harness. With -DSBX_FUZZ=ON and clang it ALSO builds <NAME>, the real libFuzzer binary
# (-fsanitize=fuzzer,address,undefined; every sbx target is then built with coverage
# instrumentation). Fuzzers never run under ctest: see tests/fuzz/README.md.
# With SBX_FUZZ, ${CMAKE_BINARY_DIR}/fuzz-targets.txt lists every fuzzer, one a line:
# "name<TAB>binary<TAB>max_len<TAB>corpus dirs joined by ':'" (read by scripts/fuzz.sh).
# MAX_LEN is the -max_len a run uses (default 4096): the largest input the target's
# structure needs.
set(SBX_FUZZ_TARGETS_FILE ${CMAKE_BINARY_DIR}/fuzz-targets.txt)
if(SBX_FUZZ)
  file(WRITE ${SBX_FUZZ_TARGETS_FILE} "")
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "SBX_FUZZ=ON needs clang (libFuzzer): configure with CC=clang")
  endif()
  # Coverage instrumentation for C only: a C++ peer (bench/) may be built by g++, which does not
  # know it. sbx_no_sanitize_directory() (the static agent) strips it with the others.
  set(SBX_FUZZ_COVERAGE_FLAG "$<$<COMPILE_LANGUAGE:C>:-fsanitize=fuzzer-no-link>")
  list(APPEND SBX_SANITIZE_FLAGS ${SBX_FUZZ_COVERAGE_FLAG})
  if(SBX_SANITIZE)
    add_compile_options(${SBX_FUZZ_COVERAGE_FLAG})
  else()
    add_compile_options(${SBX_SANITIZE_FLAGS})
    add_link_options(-fsanitize=address,undefined)
  endif()
endif()

set(SBX_FUZZ_REPLAY_MAIN ${CMAKE_SOURCE_DIR}/tests/fuzz/replay_main.c)

function(sbx_add_fuzz_target)
  cmake_parse_arguments(F "" "NAME;MAX_LEN" "SOURCES;LIBS;CORPUS" ${ARGN})
  if(NOT F_MAX_LEN)
    set(F_MAX_LEN 4096)
  endif()
  set(corpus ${CMAKE_CURRENT_SOURCE_DIR}/corpus/${F_NAME} ${F_CORPUS})

  add_executable(${F_NAME}_replay ${F_SOURCES} ${SBX_FUZZ_REPLAY_MAIN})
  target_link_libraries(${F_NAME}_replay PRIVATE sbx ${F_LIBS})
  target_include_directories(${F_NAME}_replay PRIVATE ${CMAKE_SOURCE_DIR} ${CMAKE_SOURCE_DIR}/tests)
  add_test(NAME test_${F_NAME}_corpus COMMAND ${F_NAME}_replay ${corpus})
  set_tests_properties(test_${F_NAME}_corpus PROPERTIES LABELS fuzz TIMEOUT 300)

  if(SBX_FUZZ)
    add_executable(${F_NAME} ${F_SOURCES})
    target_link_libraries(${F_NAME} PRIVATE sbx ${F_LIBS})
    target_include_directories(${F_NAME} PRIVATE ${CMAKE_SOURCE_DIR} ${CMAKE_SOURCE_DIR}/tests)
    target_link_options(${F_NAME} PRIVATE -fsanitize=fuzzer)
    string(JOIN ":" dirs ${corpus})
    file(APPEND ${SBX_FUZZ_TARGETS_FILE}
         "${F_NAME}\t${CMAKE_CURRENT_BINARY_DIR}/${F_NAME}\t${F_MAX_LEN}\t${dirs}\n")
  endif()
endfunction()
