# Memory shared between the processes of one container (issue 36): share_probe starts the
# container's processes (with and without libvgpu.so) against the fake driver and checks,
# after every step, that the region's usage is what the device holds. Included by
# CMakeLists.txt where libvgpu.so and the fake driver are built.

add_executable(vgpu_share_probe share_probe.c share_worker.c)
target_link_libraries(vgpu_share_probe PRIVATE vgpu_cuda_api ${CMAKE_DL_LIBS})
# The region's layout, to write into it as a hostile process of the container would.
target_include_directories(vgpu_share_probe PRIVATE ${CMAKE_SOURCE_DIR}/hooks/region/include)
set_target_properties(vgpu_share_probe PROPERTIES C_STANDARD 11 C_EXTENSIONS ON)
# Not vgpu_warnings: ISO C forbids casting dlsym's void* to a function pointer (limiter_probe.c).
target_compile_options(vgpu_share_probe PRIVATE -Wall -Wextra -Werror)

vgpu_gtest(vgpu_limiter_share_test SOURCES share_test.cpp NO_DISCOVERY)
add_dependencies(vgpu_limiter_share_test vgpu_share_probe vgpu vgpu_fake_cuda vgpu_fake_nvml)
target_compile_definitions(vgpu_limiter_share_test PRIVATE
  VGPU_SHARE_PROBE="$<TARGET_FILE:vgpu_share_probe>"
  VGPU_LIBVGPU="$<TARGET_FILE:vgpu>"
  VGPU_FAKE_LIB_PATH="$<TARGET_FILE_DIR:vgpu_fake_cuda>:$<TARGET_FILE_DIR:vgpu_fake_nvml>")
vgpu_gtest_cases(vgpu_limiter_share_test PROPERTIES LABELS limiter)
