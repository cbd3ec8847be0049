# Test helpers. sbx_add_test(NAME n SOURCES s... [LIBS l...] [LABELS l...] [TIMEOUT sec]
#                            [ENV K=V...] [ARGS a...]) builds a cmocka test and registers it
# with ctest (ARGS: command-line arguments of the test binary).
function(sbx_add_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "SOURCES;LIBS;LABELS;ENV;ARGS" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  # Every test binary prints its backtrace when it dies of a fatal signal (tests/support).
  if(NOT TARGET sbx_test_crash_trace)
    add_library(sbx_test_crash_trace OBJECT ${CMAKE_SOURCE_DIR}/tests/support/crash_trace.c)
  endif()
  target_link_libraries(${T_NAME} PRIVATE sbx_test_crash_trace sbx PkgConfig::CMOCKA ${T_LIBS})
  target_include_directories(${T_NAME} PRIVATE ${CMAKE_SOURCE_DIR} ${CMAKE_SOURCE_DIR}/tests)
  add_test(NAME ${T_NAME} COMMAND ${T_NAME} ${T_ARGS})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  set_tests_properties(${T_NAME} PROPERTIES TIMEOUT ${T_TIMEOUT}
    ENVIRONMENT "SBX_SOURCE_DIR=${CMAKE_SOURCE_DIR};SBX_BUILD_DIR=${CMAKE_BINARY_DIR};${T_ENV}")
  if(T_LABELS)
    set_tests_properties(${T_NAME} PROPERTIES LABELS "${T_LABELS}")
  endif()
endfunction()

# Provider registration: a provider folder calls
#   sbx_provider(NAME local SOURCES a.c b.c [LIBS ...])
# which adds its sources to sbx_providers and its ops table (`sbx_provider_<name>`) to the registry.
function(sbx_provider)
  cmake_parse_arguments(P "" "NAME" "SOURCES;LIBS" ${ARGN})
  list(TRANSFORM P_SOURCES PREPEND ${CMAKE_CURRENT_SOURCE_DIR}/)
  target_sources(sbx_providers PRIVATE ${P_SOURCES})
  if(P_LIBS)
    target_link_libraries(sbx_providers PUBLIC ${P_LIBS})
  endif()
  set_property(GLOBAL APPEND PROPERTY SBX_PROVIDERS ${P_NAME})
endfunction()

function(sbx_generate_provider_registry target)
  get_property(names GLOBAL PROPERTY SBX_PROVIDERS)
  list(SORT names)
  set(decls "")
  set(entries "")
  foreach(n ${names})
    string(APPEND decls "extern const sbx_provider_ops sbx_provider_${n};\n")
    string(APPEND entries "    &sbx_provider_${n},\n")
  endforeach()
  if(NOT names)
    set(entries "    NULL,\n")
  endif()
  list(LENGTH names count)
  configure_file(${CMAKE_SOURCE_DIR}/core/provider_registry.c.in
                 ${SBX_GEN_DIR}/provider_registry.c @ONLY)
  target_sources(${target} PRIVATE ${SBX_GEN_DIR}/provider_registry.c)
endfunction()
