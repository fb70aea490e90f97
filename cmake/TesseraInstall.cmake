# `cmake --install` layout (GNUInstallDirs):
#   bin/tessera                                   the command-line tool
#   <libdir>/libtessera.so.<version> (+ SONAME)   the library: C API and C++ API
#   <libdir>/tessera/libtessera_npu_reference.so  the reference NPU driver (found next to the
#                                                 library or tool, see core/install_paths.h)
#   include/tessera/{api,core,scheduler}/...      public headers; the include directory is
#                                                 include/tessera: #include "api/tessera.h"
#   share/tessera/platforms/*.json                shipped board descriptions
#   <libdir>/cmake/Tessera/                       find_package(Tessera): Tessera::tessera
#   <libdir>/pkgconfig/tessera.pc                 pkg-config --cflags --libs tessera
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
               core/shape.h scheduler/plan.h)
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
