# SbxInstall.cmake - what `cmake --install` puts in place: the programs (sbx, sbx-worker in bin/,
# sbx-agent in libexec/sbx/ where the providers look for it), the library as ONE static archive
# libsbx.a (sbx_dist: every layer, only the public API global, so an embedding program links
# -lsbx however the build splits it into layers), the public headers with the generated contract
# headers they include, and sbx.pc, so `pkg-config --cflags --libs sbx` is a whole link line.
include(GNUInstallDirs)

# pkg-config modules the library's public interface and its archive need (SbxDeps.cmake).
set(SBX_PC_REQUIRES "libprotobuf-c yaml-0.1 openssl libcurl libnghttp2 jansson libnats")

function(sbx_install_rules)
  install(TARGETS sbx-worker RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  install(TARGETS sbx_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}) # OUTPUT_NAME sbx
  install(TARGETS sbx-agent RUNTIME DESTINATION ${CMAKE_INSTALL_LIBEXECDIR}/sbx)

  # libsbx.a (sbx_dist, SbxLayers.cmake): every layer in one object, only the public API global.
  install(FILES ${CMAKE_BINARY_DIR}/libsbx.a DESTINATION ${CMAKE_INSTALL_LIBDIR})

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
