# Processes killed at random while they allocate through libvgpu.so leak nothing (issue 36):
# storm_probe churns or fills under the limiter against the fake driver. Included by
# CMakeLists.txt where libvgpu.so and the fake driver are built.

add_executable(vgpu_storm_probe storm_probe.c)
target_link_libraries(vgpu_storm_probe PRIVATE vgpu_cuda_api ${CMAKE_DL_LIBS})
set_target_properties(vgpu_storm_probe PROPERTIES C_STANDARD 11 C_EXTENSIONS ON)
# Not vgpu_warnings: ISO C forbids casting dlsym's void* to a function pointer (limiter_probe.c).
target_compile_options(vgpu_storm_probe PRIVATE -Wall -Wextra -Werror)

vgpu_gtest(vgpu_limiter_storm_test SOURCES kill_storm_test.cpp NO_DISCOVERY)
add_dependencies(vgpu_limiter_storm_test vgpu_storm_probe vgpu vgpu_fake_cuda vgpu_fake_nvml)
target_compile_definitions(vgpu_limiter_storm_test PRIVATE
  VGPU_STORM_PROBE="$<TARGET_FILE:vgpu_storm_probe>"
  VGPU_LIBVGPU="$<TARGET_FILE:vgpu>"
  VGPU_FAKE_LIB_PATH="$<TARGET_FILE_DIR:vgpu_fake_cuda>:$<TARGET_FILE_DIR:vgpu_fake_nvml>")
vgpu_gtest_cases(vgpu_limiter_storm_test)
