# What every example's CMakeLists.txt includes. Built with the runtime (native/CMakeLists.txt adds
# the example's folder), the runtime's target is there already; built on its own (a desktop, or the
# NDK), the runtime is built from ../native first. rvk_example_target(TARGET) gives an example's
# target the C standard, warnings as errors and the runtime to link.
if(NOT TARGET relax_vk_native)
  set(RVK_BUILD_EXAMPLES OFF CACHE BOOL "" FORCE)
  set(RVK_BUILD_TOOLS OFF CACHE BOOL "" FORCE)
  add_subdirectory(${CMAKE_CURRENT_LIST_DIR}/../native ${CMAKE_CURRENT_BINARY_DIR}/relax_vk_native)
endif()

function(rvk_example_target target)
  set_property(TARGET ${target} PROPERTY C_STANDARD 11)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Werror)
  target_link_libraries(${target} PRIVATE relax_vk_native)
endfunction()
