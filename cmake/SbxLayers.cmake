# The layers of libsbx (DESIGN §1; the list is at the top of the top-level CMakeLists.txt).
#
#   sbx_layer(NAME sbx_engine [SOURCES a.c...] BELOW sbx_config [LIBS external...])
#
# makes one static library per layer. A layer links only the layers named in BELOW (and what
# they link), so a call from a layer to one above it -- or beside it -- has nothing to resolve
# against. Two things keep it so:
#   - sbx_layer_checks() builds sbx_layer_check_<layer>: an empty program that links the layer
#     WHOLE (every object) with only its BELOW layers, so an upward call breaks the build;
#   - tests/layers (ctest test_layers) reads every archive with nm and names each symbol a
#     layer takes from a layer that is not below it.
# Other folders add their sources to a layer with target_sources(<layer> PRIVATE ...).
# Layers are compiled with -fvisibility=hidden: a symbol is exported only when include/sbx/
# declares it. sbx_dist_library() then makes libsbx.a for embedding programs, where every
# other symbol is local, so an embedder can neither call nor collide with libsbx's internals.
function(sbx_layer)
  cmake_parse_arguments(L "" "NAME" "SOURCES;BELOW;LIBS" ${ARGN})
  add_library(${L_NAME} STATIC ${L_SOURCES})
  target_include_directories(${L_NAME} PUBLIC ${CMAKE_SOURCE_DIR}/include ${SBX_GEN_DIR}
                             PRIVATE ${CMAKE_SOURCE_DIR})
  target_link_libraries(${L_NAME} PUBLIC ${L_BELOW} ${L_LIBS})
  # Only what include/sbx/ declares is exported (its headers push default visibility).
  set_target_properties(${L_NAME} PROPERTIES C_VISIBILITY_PRESET hidden)
  set_property(GLOBAL APPEND PROPERTY SBX_LAYERS ${L_NAME})
  set_property(GLOBAL PROPERTY SBX_LAYER_BELOW_${L_NAME} "${L_BELOW}")
endfunction()

# The layers, in definition order (bottom first), as "name=archive=below1,below2" words for
# tests/layers/check_layers.py.
function(sbx_layer_specs out_var)
  get_property(layers GLOBAL PROPERTY SBX_LAYERS)
  set(specs)
  foreach(l ${layers})
    get_property(below GLOBAL PROPERTY SBX_LAYER_BELOW_${l})
    string(REPLACE ";" "," below "${below}")
    list(APPEND specs "${l}=$<TARGET_FILE:${l}>=${below}")
  endforeach()
  set(${out_var} ${specs} PARENT_SCOPE)
endfunction()

function(sbx_layer_checks)
  get_property(layers GLOBAL PROPERTY SBX_LAYERS)
  foreach(l ${layers})
    add_executable(sbx_layer_check_${l} ${CMAKE_SOURCE_DIR}/cmake/layer_check_main.c)
    target_link_libraries(sbx_layer_check_${l} PRIVATE "$<LINK_LIBRARY:WHOLE_ARCHIVE,${l}>")
  endforeach()
endfunction()

# libsbx.a, the library for programs outside this tree: every layer and the generated contract
# linked into one relocatable object (ld -r) whose hidden symbols are then made local (objcopy
# --localize-hidden). Within the tree, targets link the layers (or `sbx`, all of them); this
# archive is what tests/layers checks for exported symbols and what its embedder test links.
function(sbx_dist_library)
  get_property(layers GLOBAL PROPERTY SBX_LAYERS)
  set(out ${CMAKE_BINARY_DIR}/libsbx.a)
  set(obj ${CMAKE_BINARY_DIR}/CMakeFiles/libsbx.o)
  set(archives)
  foreach(l ${layers} sbx_proto sbx_proto_health)
    list(APPEND archives $<TARGET_FILE:${l}>)
  endforeach()
  add_custom_command(
    OUTPUT ${out}
    COMMAND ${CMAKE_LINKER} -r -o ${obj} --whole-archive ${archives} --no-whole-archive
    COMMAND ${CMAKE_OBJCOPY} --localize-hidden ${obj}
    COMMAND ${CMAKE_COMMAND} -E rm -f ${out}
    COMMAND ${CMAKE_AR} qc ${out} ${obj}
    COMMAND ${CMAKE_RANLIB} ${out}
    DEPENDS ${layers} sbx_proto sbx_proto_health
    COMMENT "libsbx.a: the layers in one object, only the public API global")
  add_custom_target(sbx_dist_archive ALL DEPENDS ${out})
  add_library(sbx_dist STATIC IMPORTED GLOBAL)
  set_target_properties(sbx_dist PROPERTIES
    IMPORTED_LOCATION ${out}
    INTERFACE_INCLUDE_DIRECTORIES "${CMAKE_SOURCE_DIR}/include;${SBX_GEN_DIR}"
    INTERFACE_COMPILE_DEFINITIONS SBX_VERSION="${PROJECT_VERSION}"
    INTERFACE_LINK_LIBRARIES "PkgConfig::PROTOBUF_C;PkgConfig::YAML;PkgConfig::OPENSSL;PkgConfig::CURL;PkgConfig::JANSSON;PkgConfig::NGHTTP2;PkgConfig::NATS;Threads::Threads;m")
  add_dependencies(sbx_dist sbx_dist_archive)
endfunction()
