# Cross-compiling Tessera for 64-bit ARM Linux (the HiKey 970, Jetson TX2 / AGX Xavier and
# Raspberry Pi boards) from an x86-64 Debian machine: scripts/aarch64.sh installs what this file
# expects and passes it as CMAKE_TOOLCHAIN_FILE.
#
#   compilers      aarch64-linux-gnu-gcc / -g++ (Debian: crossbuild-essential-arm64)
#   libraries      Debian's arm64 multiarch packages under /usr/lib/aarch64-linux-gnu, and, for
#                  the packages that cannot be co-installed with their amd64 versions (XNNPACK,
#                  pthreadpool, cpuinfo's -dev, ONNX's -dev), their arm64 .debs unpacked into
#                  TESSERA_AARCH64_PREFIX (default /opt/tessera-aarch64)
#   build tools    flatc and protoc are the host's (CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
#   running        qemu-aarch64 is the CMAKE_CROSSCOMPILING_EMULATOR: ctest and GoogleTest's
#                  test discovery run the arm64 binaries through it, on Debian's arm64 libc
#                  (libc6:arm64, installed by the script)
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
# -ffp-contract=off: GCC would fuse a * b + c into FMAs on AArch64 (FMA is baseline there, not
# on x86-64), so Tessera's own C++ arithmetic would round differently from the x86-64 build and
# between two inlinings of one formula (the slice table and the per-query cost model compare
# exactly). XNNPACK's and OpenBLAS's kernels use their FMAs regardless.
# -Wno-psabi: GCC's notes that GCC 10.1 changed how std::pair arguments are passed on AArch64:
# informational only, and everything here is built by one compiler.
set(CMAKE_C_FLAGS_INIT "-ffp-contract=off")
set(CMAKE_CXX_FLAGS_INIT "-ffp-contract=off -Wno-psabi")

if(NOT TESSERA_AARCH64_PREFIX)
  if(DEFINED ENV{TESSERA_AARCH64_PREFIX})
    set(TESSERA_AARCH64_PREFIX $ENV{TESSERA_AARCH64_PREFIX})
  else()
    set(TESSERA_AARCH64_PREFIX /opt/tessera-aarch64)
  endif()
endif()
# Passed on to try_compile projects, which read this file again.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES TESSERA_AARCH64_PREFIX)
set(_tessera_arm_libdir ${TESSERA_AARCH64_PREFIX}/usr/lib/aarch64-linux-gnu)

# Unpacked prefix first, then the multiarch system; programs only from the host.
set(CMAKE_FIND_ROOT_PATH ${TESSERA_AARCH64_PREFIX} /)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(CMAKE_PREFIX_PATH /usr)
# The .pc files of the unpacked prefix were rewritten by scripts/aarch64.sh to point into it.
set(ENV{PKG_CONFIG_LIBDIR}
    "${_tessera_arm_libdir}/pkgconfig:/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")

# XNNPACK's own dependencies (pthreadpool, cpuinfo) live in the prefix too: the linker needs to
# find them behind libXNNPACK.so, and the loader at run time.
set(CMAKE_EXE_LINKER_FLAGS_INIT "-Wl,-rpath-link,${_tessera_arm_libdir}")
set(CMAKE_SHARED_LINKER_FLAGS_INIT "-Wl,-rpath-link,${_tessera_arm_libdir}")
set(CMAKE_MODULE_LINKER_FLAGS_INIT "-Wl,-rpath-link,${_tessera_arm_libdir}")

find_program(TESSERA_QEMU_AARCH64 NAMES qemu-aarch64 qemu-aarch64-static)
if(TESSERA_QEMU_AARCH64)
  # The guest's loader and libc are the multiarch libc6:arm64 (/lib/ld-linux-aarch64.so.1,
  # /usr/lib/aarch64-linux-gnu), not the cross toolchain's copy under /usr/aarch64-linux-gnu:
  # with that one as QEMU_LD_PREFIX (-L), qemu-aarch64 7.2 hangs in the first pthread_create.
  set(CMAKE_CROSSCOMPILING_EMULATOR ${TESSERA_QEMU_AARCH64} -E
                                    LD_LIBRARY_PATH=${_tessera_arm_libdir})
endif()
