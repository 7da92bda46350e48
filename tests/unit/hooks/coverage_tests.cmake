# The limiter's coverage of the CUDA driver API (issue 36 item 5, issue 37 item 5): the entry
# points beyond the everyday allocators, run as limited processes on the fake driver.
# Included by CMakeLists.txt when libvgpu.so and the fake driver are both built.

# Like limiter_probe: C, links only libc/libdl, dlopens the driver as an application does.
add_executable(vgpu_coverage_probe coverage_probe.c)
target_link_libraries(vgpu_coverage_probe PRIVATE vgpu_cuda_api ${CMAKE_DL_LIBS})
set_target_properties(vgpu_coverage_probe PROPERTIES C_STANDARD 11 C_EXTENSIONS ON)
target_compile_options(vgpu_coverage_probe PRIVATE -Wall -Wextra -Werror)

vgpu_gtest(vgpu_limiter_coverage_test SOURCES coverage_preload_test.cpp NO_DISCOVERY)
add_dependencies(vgpu_limiter_coverage_test vgpu_coverage_probe vgpu vgpu_fake_cuda vgpu_fake_nvml)
target_compile_definitions(vgpu_limiter_coverage_test PRIVATE
  VGPU_COVERAGE_PROBE="$<TARGET_FILE:vgpu_coverage_probe>"
  VGPU_LIBVGPU="$<TARGET_FILE:vgpu>"
  VGPU_FAKE_LIB_PATH="$<TARGET_FILE_DIR:vgpu_fake_cuda>:$<TARGET_FILE_DIR:vgpu_fake_nvml>")
vgpu_gtest_cases(vgpu_limiter_coverage_test PROPERTIES LABELS limiter)
