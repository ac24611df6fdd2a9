# ctest install-runtime: the runtime component installs into an empty prefix
# and runs from there (weft-run and weft-detect --help, weft-inspect on a
# plan), holds no compiler, and packs into weft-runtime_<version>_<arch>.deb.
#   cmake -DBUILD=dir -DPREFIX=dir -DPLAN=file.weft -P TestRuntimeInstall.cmake
file(REMOVE_RECURSE "${PREFIX}")
execute_process(COMMAND ${CMAKE_COMMAND} --install "${BUILD}" --component runtime
                        --prefix "${PREFIX}"
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install --component runtime failed (${rc})")
endif()
foreach(f bin/weft-run bin/weft-serve bin/weft-detect bin/weft-inspect include/weft/weft.h
          lib/pkgconfig/weft.pc lib/cmake/Weft/WeftConfig.cmake)
  if(NOT EXISTS "${PREFIX}/${f}")
    message(FATAL_ERROR "the runtime install lacks ${f}")
  endif()
endforeach()
if(EXISTS "${PREFIX}/bin/weft-compile")
  message(FATAL_ERROR "the runtime install holds the compiler")
endif()
execute_process(COMMAND "${PREFIX}/bin/weft-run" --help
                RESULT_VARIABLE rc OUTPUT_VARIABLE out)
if(NOT rc EQUAL 0 OR NOT out MATCHES "usage: weft-run PLAN")
  message(FATAL_ERROR "installed weft-run --help failed (${rc}): ${out}")
endif()
execute_process(COMMAND "${PREFIX}/bin/weft-detect" --help
                RESULT_VARIABLE rc OUTPUT_VARIABLE out)
if(NOT rc EQUAL 0 OR NOT out MATCHES "usage: weft-detect")
  message(FATAL_ERROR "installed weft-detect --help failed (${rc}): ${out}")
endif()
execute_process(COMMAND "${PREFIX}/bin/weft-inspect" "${PLAN}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out)
if(NOT rc EQUAL 0 OR NOT out MATCHES "model: tiny-llama")
  message(FATAL_ERROR "installed weft-inspect failed (${rc}): ${out}")
endif()
find_program(DPKG_DEB dpkg-deb)
if(DPKG_DEB)
  set(pkgdir "${BUILD}/package-test")
  file(REMOVE_RECURSE "${pkgdir}")
  file(MAKE_DIRECTORY "${pkgdir}")
  execute_process(COMMAND cpack --config "${BUILD}/CPackConfig.cmake" -G DEB
                          -D CPACK_COMPONENTS_ALL=runtime -B "${pkgdir}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  file(GLOB debs "${pkgdir}/weft-runtime_*.deb")
  if(NOT rc EQUAL 0 OR NOT debs)
    message(FATAL_ERROR "cpack -G DEB failed (${rc}): ${out} ${err}")
  endif()
  execute_process(COMMAND ${DPKG_DEB} -c ${debs} OUTPUT_VARIABLE listing)
  if(NOT listing MATCHES "bin/weft-run")
    message(FATAL_ERROR "${debs} does not hold bin/weft-run")
  endif()
  message(STATUS "packed ${debs}")
endif()
message(STATUS "runtime install in ${PREFIX}: weft-run --help and weft-inspect ran")
