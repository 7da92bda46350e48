# Tests that run small CUDA programs as separate processes with LD_PRELOAD=libvgpu.so
# against the fake driver, as a container would. Included by CMakeLists.txt when libvgpu.so
# and the fake driver are both built.

# The probe is C and links only libc/libdl, like an application that dlopens the driver.
add_executable(vgpu_limiter_probe limiter_probe.c)
target_link_libraries(vgpu_limiter_probe PRIVATE vgpu_cuda_api ${CMAKE_DL_LIBS})
set_target_properties(vgpu_limiter_probe PROPERTIES C_STANDARD 11 C_EXTENSIONS ON)
# Not vgpu_warnings: ISO C (-Wpedantic) forbids casting dlsym's void* to a function pointer,
# which is exactly what an application that dlopens libcuda does.
target_compile_options(vgpu_limiter_probe PRIVATE -Wall -Wextra -Werror)

vgpu_gtest(vgpu_limiter_preload_test SOURCES preload_test.cpp LIBS vgpu_region)
add_dependencies(vgpu_limiter_preload_test vgpu_limiter_probe vgpu vgpu_fake_cuda vgpu_fake_nvml)
target_compile_definitions(vgpu_limiter_preload_test PRIVATE
  VGPU_PROBE="$<TARGET_FILE:vgpu_limiter_probe>"
  VGPU_LIBVGPU="$<TARGET_FILE:vgpu>"
  VGPU_FAKE_LIB_PATH="$<TARGET_FILE_DIR:vgpu_fake_cuda>:$<TARGET_FILE_DIR:vgpu_fake_nvml>")

