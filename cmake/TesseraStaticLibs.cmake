# cmake -P script, run after libtessera.so links: writes the link line a static libtessera.a
# needs, from the shared library's own NEEDED entries (the same code, so the same external
# libraries), as a CMake list file and as a pkg-config file.
#   -DSHARED=<libtessera.so> -DREADELF=<readelf> -DCMAKE_OUT=<file> -DPC_IN=<.pc.in> -DPC_OUT=<.pc>
#   -DTESSERA_PC_TO_PREFIX=.. -DLIBDIR=lib -DINCLUDEDIR=include -DVERSION=x.y.z
execute_process(COMMAND ${READELF} -d ${SHARED} OUTPUT_VARIABLE dynamic RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "readelf -d ${SHARED} failed")
endif()
string(REGEX MATCHALL "\\(NEEDED\\)[^[]*\\[[^]]+\\]" needed "${dynamic}")
set(flags "")
foreach(entry ${needed})
  string(REGEX REPLACE ".*\\[(.*)\\]" "\\1" soname "${entry}")
  # The C and C++ runtimes come with the compiler driver (and -lstdc++ -lm below for C).
  if(soname MATCHES "^(libc|libm|libgcc_s|libstdc\\+\\+|ld-linux.*)\\.so")
    continue()
  endif()
  string(REGEX REPLACE "^lib(.*)\\.so.*$" "\\1" name "${soname}")
  list(APPEND flags "-l${name}")
endforeach()
list(APPEND flags -lpthread -ldl -lstdc++ -lm)
file(WRITE ${CMAKE_OUT} "set(TESSERA_STATIC_LINK_LIBRARIES \"${flags}\")\n")
string(REPLACE ";" " " TESSERA_STATIC_LIBS "${flags}")
configure_file(${PC_IN} ${PC_OUT} @ONLY)
