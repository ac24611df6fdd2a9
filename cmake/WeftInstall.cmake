# Installation and packaging. Two components:
#   runtime   what an edge box needs to run plans: weft-run, weft-serve,
#             weft-detect, weft-inspect, weft-bench, weft-tokenize, weft-chat-template,
#             libweft.so, its C header, a pkg-config file and a CMake package
#   compiler  weft-compile, weft-opt, weft-emit-cuda (needs LLVM/MLIR 19)
#   cmake --install build --component runtime --prefix /opt/weft
#   cpack --config build/CPackConfig.cmake -G DEB     (weft-runtime_*.deb)
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# Installed binaries find libweft and each other's libraries beside them.
set(CMAKE_INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")

set(_weft_runtime_tools weft-run weft-serve weft-detect weft-inspect weft-bench weft-tokenize
    weft-chat-template)
foreach(tool IN LISTS _weft_runtime_tools)
  if(TARGET ${tool})
    set_target_properties(${tool} PROPERTIES INSTALL_RPATH "${CMAKE_INSTALL_RPATH}")
    install(TARGETS ${tool} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
  endif()
endforeach()
if(TARGET weft)
  set_target_properties(weft PROPERTIES VERSION ${PROJECT_VERSION}
                                        SOVERSION ${PROJECT_VERSION_MAJOR})
  target_include_directories(weft INTERFACE
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  install(TARGETS weft EXPORT WeftTargets
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime)
  install(FILES ${PROJECT_SOURCE_DIR}/runtime/capi/weft.h
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/weft COMPONENT runtime)
  install(EXPORT WeftTargets NAMESPACE weft::
          DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Weft COMPONENT runtime)
  configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/WeftConfig.cmake.in
    ${CMAKE_CURRENT_BINARY_DIR}/WeftConfig.cmake
    INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Weft)
  write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/WeftConfigVersion.cmake
    COMPATIBILITY SameMajorVersion)
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/WeftConfig.cmake
                ${CMAKE_CURRENT_BINARY_DIR}/WeftConfigVersion.cmake
          DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Weft COMPONENT runtime)
  configure_file(${PROJECT_SOURCE_DIR}/cmake/weft.pc.in ${CMAKE_CURRENT_BINARY_DIR}/weft.pc @ONLY)
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/weft.pc
          DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT runtime)
endif()
foreach(tool weft-compile weft-opt weft-emit-cuda)
  if(TARGET ${tool})
    install(TARGETS ${tool} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT compiler)
  endif()
endforeach()

# Debian packages, one per component: weft-runtime needs only the NVIDIA
# driver and the CUDA runtime libraries it links (cuBLASLt) besides Debian's.
set(CPACK_PACKAGE_NAME weft)
set(CPACK_PACKAGE_VENDOR "Weft")
set(CPACK_PACKAGE_CONTACT "weft@localhost")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Weft: ahead-of-time compiled LLM inference")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_GENERATOR DEB)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime compiler)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS OFF)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME weft-runtime)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_DEPENDS "libsodium23, libcpp-httplib0.11 | libcpp-httplib-dev, libstdc++6")
set(CPACK_DEBIAN_RUNTIME_DESCRIPTION
  "Weft runtime: run and serve compiled plans (needs the NVIDIA driver and the CUDA 13 runtime libraries, libcublasLt.so.13)")
set(CPACK_DEBIAN_COMPILER_PACKAGE_NAME weft-compiler)
set(CPACK_DEBIAN_COMPILER_PACKAGE_DEPENDS "weft-runtime (= ${PROJECT_VERSION}), libmlir-19, libllvm19")
include(CPack)
