# Cross-build for 64-bit ARM Linux with Debian's cross compiler (g++-aarch64-linux-gnu):
#   cmake -S native -B native/build-aarch64 -DCMAKE_TOOLCHAIN_FILE=native/cmake/aarch64-linux-gnu.cmake
# The OpenCL headers are architecture-independent; the library is dlopen()ed on the target, so
# nothing OpenCL is linked. (Android: the NDK's toolchain file instead, examples/android_classifier/README.md.)
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
# the host's Khronos headers, without putting all of /usr/include on the cross include path
if(NOT OpenCL_INCLUDE_DIR AND EXISTS /usr/include/CL/cl.h)
  set(RVK_CL_HEADERS ${CMAKE_BINARY_DIR}/opencl-headers)
  file(MAKE_DIRECTORY ${RVK_CL_HEADERS})
  file(CREATE_LINK /usr/include/CL ${RVK_CL_HEADERS}/CL SYMBOLIC)
  set(OpenCL_INCLUDE_DIR ${RVK_CL_HEADERS} CACHE PATH "OpenCL headers")
endif()
