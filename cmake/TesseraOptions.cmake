# Compiler flags shared by every Tessera target (applied through tessera_add_library and
# tessera_target_defaults).

set(TESSERA_WARNINGS -Wall -Wextra -Wpedantic -Wnon-virtual-dtor -Wno-missing-field-initializers)
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  # -Wshadow=local is GCC's spelling; GCC 12 reports false positives for std::string
  # concatenation at -O3 (GCC bug 105651). Clang (the fuzz build) knows neither option.
  list(APPEND TESSERA_WARNINGS -Wshadow=local -Wno-restrict)
else()
  list(APPEND TESSERA_WARNINGS -Wshadow)
endif()
if(TESSERA_WERROR)
  list(APPEND TESSERA_WARNINGS -Werror)
endif()

if(TESSERA_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer
                      -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()
# libFuzzer targets (fuzz/): every object gets coverage instrumentation and ASan + UBSan; only
# the fuzz targets link libFuzzer's main (-fsanitize=fuzzer).
if(TESSERA_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "TESSERA_FUZZ needs clang (libFuzzer): configure with "
                        "-DCMAKE_CXX_COMPILER=clang++, or run scripts/fuzz.sh")
  endif()
  if(TESSERA_SANITIZE OR TESSERA_TSAN)
    message(FATAL_ERROR "TESSERA_FUZZ brings its own sanitizers")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer
                      -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()
if(TESSERA_TSAN)
  if(TESSERA_SANITIZE)
    message(FATAL_ERROR "TESSERA_TSAN and TESSERA_SANITIZE cannot be combined")
  endif()
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
endif()

function(tessera_target_defaults target)
  target_compile_options(${target} PRIVATE ${TESSERA_WARNINGS})
  target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
endfunction()

# tessera_add_library(name DIR dir DEPS deps...): a static library of every .cc under `dir`
# (not recursing into subfolders that are libraries of their own: pass EXCLUDE globs).
function(tessera_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  tessera_target_defaults(${name})
  target_link_libraries(${name} PUBLIC ${ARG_DEPS})
endfunction()
