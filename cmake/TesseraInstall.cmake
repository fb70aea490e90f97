# `cmake --install` layout (GNUInstallDirs):
#   bin/tessera                                   the command-line tool
#   <libdir>/libtessera.so.<version> (+ SONAME)   the library: C API and C++ API
#   <libdir>/tessera/libtessera_npu_reference.so  the reference NPU driver (found next to the
#                                                 library or tool, see core/install_paths.h)
#   include/tessera/{api,core,graph/onnx,scheduler}/...  public headers; the include directory is
#                                                 include/tessera: #include "api/tessera.h"
#   share/tessera/platforms/*.json                shipped board descriptions
#   <libdir>/cmake/Tessera/                       find_package(Tessera): Tessera::tessera
#   <libdir>/pkgconfig/tessera.pc                 pkg-config --cflags --libs tessera
#   <libdir>/libtessera.a                         with TESSERA_STATIC_LIBRARY (default ON): every
#                                                 component in one archive; Tessera::tessera_static
#                                                 and pkg-config tessera-static give its link line
include(CMakePackageConfigHelpers)

set(TESSERA_INSTALL_INCLUDEDIR ${CMAKE_INSTALL_INCLUDEDIR}/tessera)
set(TESSERA_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/Tessera)

install(TARGETS tessera RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(
  TARGETS tessera_shared
  EXPORT TesseraTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${TESSERA_INSTALL_INCLUDEDIR})
if(TARGET tessera_npu_reference)
  install(TARGETS tessera_npu_reference LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/tessera)
endif()

# The public headers and the headers they include (checked by the install test, which compiles
# the examples against the installed tree alone).
foreach(header api/tessera.h api/tessera_c.h core/status.h core/tensor.h core/dtype.h
               core/shape.h scheduler/plan.h graph/onnx/import_options.h)
  get_filename_component(dir ${header} DIRECTORY)
  install(FILES ${PROJECT_SOURCE_DIR}/${header} DESTINATION ${TESSERA_INSTALL_INCLUDEDIR}/${dir})
endforeach()

install(DIRECTORY ${PROJECT_SOURCE_DIR}/energy/platforms/
        DESTINATION ${CMAKE_INSTALL_DATADIR}/tessera/platforms FILES_MATCHING PATTERN "*.json")

# The exported target is named Tessera::tessera; consumers need C++20 for the C++ API (the C API
# is plain C).
set_target_properties(tessera_shared PROPERTIES EXPORT_NAME tessera)
target_include_directories(tessera_shared INTERFACE
                           $<INSTALL_INTERFACE:${TESSERA_INSTALL_INCLUDEDIR}>)
install(
  EXPORT TesseraTargets
  NAMESPACE Tessera::
  DESTINATION ${TESSERA_INSTALL_CMAKEDIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/TesseraConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/TesseraConfig.cmake
                              INSTALL_DESTINATION ${TESSERA_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/TesseraConfigVersion.cmake
                                 COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/TesseraConfig.cmake
              ${PROJECT_BINARY_DIR}/TesseraConfigVersion.cmake
        DESTINATION ${TESSERA_INSTALL_CMAKEDIR})

# tessera.pc locates the prefix from its own directory, so the installed tree may be moved.
file(RELATIVE_PATH TESSERA_PC_TO_PREFIX "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
configure_file(${PROJECT_SOURCE_DIR}/cmake/tessera.pc.in ${PROJECT_BINARY_DIR}/tessera.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/tessera.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# libtessera.a: the static component libraries of the API, merged into one archive (ar's MRI
# script), and the link line it needs, taken from libtessera.so's NEEDED entries after it links.
option(TESSERA_STATIC_LIBRARY "Also build and install libtessera.a" ON)
if(TESSERA_STATIC_LIBRARY)
  # The tessera_* static libraries tessera_api links, transitively.
  set(_tessera_components "")
  set(_todo tessera_api)
  while(_todo)
    list(POP_FRONT _todo _t)
    if(_t IN_LIST _tessera_components)
      continue()
    endif()
    list(APPEND _tessera_components ${_t})
    get_target_property(_deps ${_t} LINK_LIBRARIES)
    foreach(_d ${_deps})
      if(TARGET ${_d} AND _d MATCHES "^tessera_")
        get_target_property(_type ${_d} TYPE)
        if(_type STREQUAL "STATIC_LIBRARY")
          list(APPEND _todo ${_d})
        endif()
      endif()
    endforeach()
  endwhile()
  set(_mri "CREATE ${PROJECT_BINARY_DIR}/api/libtessera.a\n")
  set(_deps_files "")
  foreach(_c ${_tessera_components})
    string(APPEND _mri "ADDLIB $<TARGET_FILE:${_c}>\n")
    list(APPEND _deps_files ${_c})
  endforeach()
  string(APPEND _mri "SAVE\nEND\n")
  file(GENERATE OUTPUT ${PROJECT_BINARY_DIR}/api/libtessera.mri CONTENT "${_mri}")
  find_program(TESSERA_READELF NAMES readelf REQUIRED)
  add_custom_command(
    OUTPUT ${PROJECT_BINARY_DIR}/api/libtessera.a ${PROJECT_BINARY_DIR}/TesseraStaticLibs.cmake
           ${PROJECT_BINARY_DIR}/tessera-static.pc
    COMMAND ${CMAKE_COMMAND} -E rm -f ${PROJECT_BINARY_DIR}/api/libtessera.a
    COMMAND ${CMAKE_AR} -M < ${PROJECT_BINARY_DIR}/api/libtessera.mri
    COMMAND ${CMAKE_COMMAND} -DSHARED=$<TARGET_FILE:tessera_shared> -DREADELF=${TESSERA_READELF}
            -DCMAKE_OUT=${PROJECT_BINARY_DIR}/TesseraStaticLibs.cmake
            -DPC_IN=${PROJECT_SOURCE_DIR}/cmake/tessera-static.pc.in
            -DPC_OUT=${PROJECT_BINARY_DIR}/tessera-static.pc
            -DTESSERA_PC_TO_PREFIX=${TESSERA_PC_TO_PREFIX} -DLIBDIR=${CMAKE_INSTALL_LIBDIR}
            -DINCLUDEDIR=${CMAKE_INSTALL_INCLUDEDIR} -DVERSION=${PROJECT_VERSION} -P
            ${PROJECT_SOURCE_DIR}/cmake/TesseraStaticLibs.cmake
    DEPENDS ${_deps_files} tessera_shared ${PROJECT_SOURCE_DIR}/cmake/TesseraStaticLibs.cmake
            ${PROJECT_SOURCE_DIR}/cmake/tessera-static.pc.in
    COMMENT "Merging the component libraries into libtessera.a"
    VERBATIM)
  add_custom_target(tessera_static ALL DEPENDS ${PROJECT_BINARY_DIR}/api/libtessera.a)
  install(FILES ${PROJECT_BINARY_DIR}/api/libtessera.a DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(FILES ${PROJECT_BINARY_DIR}/tessera-static.pc
          DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
  install(FILES ${PROJECT_BINARY_DIR}/TesseraStaticLibs.cmake
          DESTINATION ${TESSERA_INSTALL_CMAKEDIR})
endif()
