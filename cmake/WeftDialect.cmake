# weft_add_dialect(<Name> MNEMONIC <m> [TYPES] [ATTRS] SOURCES <files>...)
#
# One MLIR dialect from <Name>Ops.td in the current directory: the ODS
# headers (target <Name>OpsIncGen), the op reference generated into
# docs/Dialects/<Name>Dialect.md with a `weft-update-<m>-docs` target that
# copies it to docs/dialects/<m>.md (part of `weft-update-docs`), and the
# library <Name>Dialect linked to MLIR.
function(weft_add_dialect name)
  cmake_parse_arguments(ARG "TYPES;ATTRS;ENUMS;INTERFACES" "MNEMONIC" "SOURCES" ${ARGN})
  set(m ${ARG_MNEMONIC})
  if(ARG_INTERFACES)
    set(LLVM_TARGET_DEFINITIONS ${name}Interfaces.td)
    mlir_tablegen(${name}Interfaces.h.inc -gen-op-interface-decls)
    mlir_tablegen(${name}Interfaces.cpp.inc -gen-op-interface-defs)
  endif()
  set(LLVM_TARGET_DEFINITIONS ${name}Ops.td)
  mlir_tablegen(${name}Ops.h.inc -gen-op-decls)
  mlir_tablegen(${name}Ops.cpp.inc -gen-op-defs)
  if(ARG_TYPES)
    mlir_tablegen(${name}Types.h.inc -gen-typedef-decls -typedefs-dialect=${m})
    mlir_tablegen(${name}Types.cpp.inc -gen-typedef-defs -typedefs-dialect=${m})
  endif()
  if(ARG_ENUMS)
    mlir_tablegen(${name}Enums.h.inc -gen-enum-decls)
    mlir_tablegen(${name}Enums.cpp.inc -gen-enum-defs)
  endif()
  if(ARG_ATTRS)
    mlir_tablegen(${name}Attrs.h.inc -gen-attrdef-decls -attrdefs-dialect=${m})
    mlir_tablegen(${name}Attrs.cpp.inc -gen-attrdef-defs -attrdefs-dialect=${m})
  endif()
  mlir_tablegen(${name}Dialect.h.inc -gen-dialect-decls -dialect=${m})
  mlir_tablegen(${name}Dialect.cpp.inc -gen-dialect-defs -dialect=${m})
  add_public_tablegen_target(${name}OpsIncGen)

  add_mlir_doc(${name}Ops ${name}Dialect Dialects/ -gen-dialect-doc -dialect=${m})
  add_custom_target(weft-update-${m}-docs
    COMMAND ${CMAKE_COMMAND} -E copy ${CMAKE_BINARY_DIR}/docs/Dialects/${name}Dialect.md
            ${CMAKE_SOURCE_DIR}/docs/dialects/${m}.md
    DEPENDS ${name}DialectDocGen)
  add_dependencies(weft-update-docs weft-update-${m}-docs)

  add_library(${name}Dialect ${ARG_SOURCES})
  add_dependencies(${name}Dialect ${name}OpsIncGen ${name}DialectDocGen)
  target_link_libraries(${name}Dialect PUBLIC MLIR LLVM)
endfunction()
