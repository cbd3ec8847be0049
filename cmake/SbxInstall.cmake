# SbxInstall.cmake - what `cmake --install` puts in place: the programs (sbx, sbx-worker in bin/,
# sbx-agent in libexec/sbx/ where the providers look for it), the library as ONE static archive
# libsbx.a (every static library the `sbx` target links, merged, so an embedding program links
# -lsbx however the build splits it into layers), the public headers with the generated contract
# headers they include, and sbx.pc, so `pkg-config --cflags --libs sbx` is a whole link line.
#
# Driven by target names only: the archive is the static-library closure of the target `sbx`,
# computed when the whole project has been configured (a deferred call), so adding or splitting
# libraries needs no change here.
include(GNUInstallDirs)

# pkg-config modules the library's public interface and its archive need (SbxDeps.cmake).
set(SBX_PC_REQUIRES "libprotobuf-c yaml-0.1 openssl libcurl libnghttp2 jansson libseccomp libnats")

# Every STATIC_LIBRARY target reachable from `target` through its link libraries, in link order
# (a library before the libraries it uses).
function(sbx_static_closure target out)
  set(seen "")
  set(order "")
  set(stack ${target})
  while(stack)
    list(POP_FRONT stack t)
    if(NOT TARGET ${t} OR t IN_LIST seen)
      continue()
    endif()
    list(APPEND seen ${t})
    get_target_property(imported ${t} IMPORTED)
    if(imported)
      continue()
    endif()
    get_target_property(type ${t} TYPE)
    if(type STREQUAL "STATIC_LIBRARY" OR type STREQUAL "OBJECT_LIBRARY")
      if(type STREQUAL "STATIC_LIBRARY")
        list(APPEND order ${t})
      endif()
      get_target_property(deps ${t} LINK_LIBRARIES)
    else()
      set(deps "")
    endif()
    get_target_property(ideps ${t} INTERFACE_LINK_LIBRARIES)
    foreach(d ${deps} ${ideps})
      if(d AND NOT d MATCHES "^\\$<" AND TARGET ${d})
        list(APPEND stack ${d})
      endif()
    endforeach()
  endwhile()
  set(${out} ${order} PARENT_SCOPE)
endfunction()

function(sbx_install_rules)
  install(TARGETS sbx-worker RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  install(TARGETS sbx_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}) # OUTPUT_NAME sbx
  install(TARGETS sbx-agent RUNTIME DESTINATION ${CMAKE_INSTALL_LIBEXECDIR}/sbx)

  # One archive from the closure, with ar's MRI script (addlib copies every member).
  sbx_static_closure(sbx libs)
  set(merged ${CMAKE_BINARY_DIR}/install/libsbx.a)
  set(mri "create ${merged}\n")
  foreach(l ${libs})
    string(APPEND mri "addlib $<TARGET_FILE:${l}>\n")
  endforeach()
  string(APPEND mri "save\nend\n")
  file(GENERATE OUTPUT ${CMAKE_BINARY_DIR}/install/libsbx.mri CONTENT "${mri}")
  set(files "")
  foreach(l ${libs})
    list(APPEND files $<TARGET_FILE:${l}>)
  endforeach()
  add_custom_command(
    OUTPUT ${merged}
    COMMAND ${CMAKE_COMMAND} -E rm -f ${merged}
    COMMAND ${CMAKE_COMMAND} -DAR=${CMAKE_AR} -DMRI=${CMAKE_BINARY_DIR}/install/libsbx.mri
            -P ${CMAKE_SOURCE_DIR}/cmake/SbxMergeArchives.cmake
    COMMAND ${CMAKE_RANLIB} ${merged}
    DEPENDS ${libs} ${files} ${CMAKE_BINARY_DIR}/install/libsbx.mri
    COMMENT "libsbx.a for installation: ${libs}")
  add_custom_target(sbx_install_archive ALL DEPENDS ${merged})
  install(FILES ${merged} DESTINATION ${CMAKE_INSTALL_LIBDIR})

  install(DIRECTORY ${CMAKE_SOURCE_DIR}/include/sbx DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
          FILES_MATCHING PATTERN "*.h")
  install(FILES ${SBX_GEN_DIR}/sbx/v1/execution.pb-c.h
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/sbx/v1)

  # sbx.pc: relocatable (prefix from the .pc file's own place). Requires (not .private): the
  # library is static, so its dependencies belong on every link line.
  file(RELATIVE_PATH up /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
  set(pc "prefix=\${pcfiledir}/${up}\n"
         "exec_prefix=\${prefix}\n"
         "libdir=\${prefix}/${CMAKE_INSTALL_LIBDIR}\n"
         "includedir=\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}\n\n"
         "Name: sbx\n"
         "Description: sbx execution plane for AI agents (engine, brokers, worker, providers)\n"
         "Version: ${PROJECT_VERSION}\n"
         "Requires: ${SBX_PC_REQUIRES}\n"
         "Cflags: -I\${includedir}\n"
         "Libs: -L\${libdir} -lsbx -pthread -lm\n")
  string(JOIN "" pc ${pc})
  file(WRITE ${CMAKE_BINARY_DIR}/install/sbx.pc "${pc}")
  install(FILES ${CMAKE_BINARY_DIR}/install/sbx.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

  # The systemd unit names the installed sbx-worker and docs: written at install time, so the
  # prefix given to `cmake --install --prefix` is the one in ExecStart.
  install(FILES ${CMAKE_SOURCE_DIR}/deploy/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR}/deploy)
  install(CODE "
    file(READ \"${CMAKE_SOURCE_DIR}/deploy/sbx-worker.service\" unit)
    string(REPLACE \"/usr/local/bin/\" \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}/\"
           unit \"\${unit}\")
    string(REPLACE \"/usr/share/doc/sbx/\" \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_DOCDIR}/\"
           unit \"\${unit}\")
    set(dest \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/systemd/system\")
    message(STATUS \"Installing: \${dest}/sbx-worker.service\")
    file(MAKE_DIRECTORY \"\${dest}\")
    file(WRITE \"\${dest}/sbx-worker.service\" \"\${unit}\")
  ")
  install(DIRECTORY ${CMAKE_SOURCE_DIR}/examples/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples
          FILES_MATCHING PATTERN "*.yaml")
endfunction()

# After every directory has defined its targets.
cmake_language(DEFER DIRECTORY ${CMAKE_SOURCE_DIR} CALL sbx_install_rules)
