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

# Every entry point of the newest CUDA 13 cuda.h that can take device memory is hooked or
# listed in docs/limiter.md with why not. The header comes from PyPI once per build folder
# (cuda-coverage/); without PyPI and without that cache the test fails, saying so.
set(vgpu_cuda_coverage_cache ${CMAKE_BINARY_DIR}/cuda-coverage)
add_test(NAME LimiterCoverage.EveryCuda13EntryPointThatTakesDeviceMemoryIsHookedOrListed
         COMMAND ${VGPU_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/cuda_coverage.py --cache ${vgpu_cuda_coverage_cache}
                 --cc ${CMAKE_C_COMPILER} --nm ${VGPU_NM} --lib $<TARGET_FILE:vgpu>
                 --doc ${CMAKE_SOURCE_DIR}/docs/limiter.md)
set_tests_properties(LimiterCoverage.EveryCuda13EntryPointThatTakesDeviceMemoryIsHookedOrListed PROPERTIES
                     LABELS limiter TIMEOUT 300 FIXTURES_SETUP vgpu_cuda13_header
                     RESOURCE_LOCK vgpu_cuda_coverage_cache)

# vgpu's CUDA declarations against that same newest header (cuda_decl_check.cpp, compiled at
# test time: about a second), whether or not a toolkit is installed here.
add_test(NAME LimiterCoverage.DeclarationsAgreeWithTheNewestCuda13Header
         COMMAND ${VGPU_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/cuda_decl_check_newest.py --cache ${vgpu_cuda_coverage_cache}
                 --cxx ${CMAKE_CXX_COMPILER} --source-dir ${CMAKE_SOURCE_DIR})
set_tests_properties(LimiterCoverage.DeclarationsAgreeWithTheNewestCuda13Header PROPERTIES
                     LABELS limiter TIMEOUT 300 FIXTURES_REQUIRED vgpu_cuda13_header
                     RESOURCE_LOCK vgpu_cuda_coverage_cache)
