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
function(sbx_layer)
  cmake_parse_arguments(L "" "NAME" "SOURCES;BELOW;LIBS" ${ARGN})
  add_library(${L_NAME} STATIC ${L_SOURCES})
  target_include_directories(${L_NAME} PUBLIC ${CMAKE_SOURCE_DIR}/include ${SBX_GEN_DIR}
                             PRIVATE ${CMAKE_SOURCE_DIR})
  target_link_libraries(${L_NAME} PUBLIC ${L_BELOW} ${L_LIBS})
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
