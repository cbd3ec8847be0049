# Protobuf code generation into the build tree: protoc-c for host code, nanopb for the agent.
# Nothing generated is ever committed.

# sbx_protoc_c(OUT_SRCS proto...) generates <name>.pb-c.{c,h} under ${SBX_GEN_DIR}.
function(sbx_protoc_c out_var)
  set(srcs)
  foreach(proto ${ARGN})
    get_filename_component(dir ${proto} DIRECTORY)
    get_filename_component(name ${proto} NAME_WE)
    set(c ${SBX_GEN_DIR}/${dir}/${name}.pb-c.c)
    set(h ${SBX_GEN_DIR}/${dir}/${name}.pb-c.h)
    add_custom_command(
      OUTPUT ${c} ${h}
      COMMAND ${PROTOC} --plugin=protoc-gen-c=${PROTOC_GEN_C} -I${CMAKE_SOURCE_DIR}/proto
              --c_out=${SBX_GEN_DIR} ${CMAKE_SOURCE_DIR}/proto/${proto}
      DEPENDS ${CMAKE_SOURCE_DIR}/proto/${proto}
      COMMENT "protoc-c ${proto}")
    list(APPEND srcs ${c})
  endforeach()
  set(${out_var} ${srcs} PARENT_SCOPE)
endfunction()

# sbx_protoc_nanopb(OUT_SRCS proto...) generates <name>.pb.{c,h} under ${SBX_GEN_DIR}/nanopb,
# reading <name>.options beside each .proto.
function(sbx_protoc_nanopb out_var)
  set(srcs)
  foreach(proto ${ARGN})
    get_filename_component(dir ${proto} DIRECTORY)
    get_filename_component(name ${proto} NAME_WE)
    set(c ${SBX_GEN_DIR}/nanopb/${dir}/${name}.pb.c)
    set(h ${SBX_GEN_DIR}/nanopb/${dir}/${name}.pb.h)
    set(opts ${CMAKE_SOURCE_DIR}/proto/${dir}/${name}.options)
    add_custom_command(
      OUTPUT ${c} ${h}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${SBX_GEN_DIR}/nanopb
      COMMAND ${PROTOC} --plugin=protoc-gen-nanopb=${PROTOC_GEN_NANOPB}
              -I${CMAKE_SOURCE_DIR}/proto
              "--nanopb_out=-I${CMAKE_SOURCE_DIR}/proto:${SBX_GEN_DIR}/nanopb"
              ${CMAKE_SOURCE_DIR}/proto/${proto}
      DEPENDS ${CMAKE_SOURCE_DIR}/proto/${proto} ${opts}
      COMMENT "nanopb ${proto}")
    list(APPEND srcs ${c})
  endforeach()
  set(${out_var} ${srcs} PARENT_SCOPE)
endfunction()
