# Tests that run small CUDA programs as separate processes with LD_PRELOAD=libvgpu.so
# against the fake driver, as a container would. Included by CMakeLists.txt when libvgpu.so
# and the fake driver are both built.

# The probe is C and links only libc/libdl, like an application that dlopens the driver. It is
# built at the glibc baseline (like libvgpu.so; its start code too, old_libc_start.c), so the
# same binary also runs in the Debian 11 root of the old-userland tests.
add_executable(vgpu_limiter_probe limiter_probe.c)
target_link_libraries(vgpu_limiter_probe PRIVATE vgpu_cuda_api)
set_target_properties(vgpu_limiter_probe PROPERTIES C_STANDARD 11 C_EXTENSIONS ON)
vgpu_glibc_baseline_program(vgpu_limiter_probe)
# Not vgpu_warnings: ISO C (-Wpedantic) forbids casting dlsym's void* to a function pointer,
# which is exactly what an application that dlopens libcuda does.
target_compile_options(vgpu_limiter_probe PRIVATE -Wall -Wextra -Werror)

vgpu_gtest(vgpu_limiter_preload_test SOURCES preload_test.cpp LIBS vgpu_region vgpu_cuda_api ${CMAKE_DL_LIBS} NO_DISCOVERY)
target_include_directories(vgpu_limiter_preload_test PRIVATE ${VGPU_HOOKS_SOURCE_DIR})
add_dependencies(vgpu_limiter_preload_test vgpu_limiter_probe vgpu vgpu_fake_cuda vgpu_fake_nvml
                 vgpu_fake_cuda_r470 vgpu_fake_nvml_r470 vgpu_fake_cuda_no_timing)
target_compile_definitions(vgpu_limiter_preload_test PRIVATE
  VGPU_PROBE="$<TARGET_FILE:vgpu_limiter_probe>"
  VGPU_LIBVGPU="$<TARGET_FILE:vgpu>"
  VGPU_FAKE_LIB_PATH="$<TARGET_FILE_DIR:vgpu_fake_cuda>:$<TARGET_FILE_DIR:vgpu_fake_nvml>"
  VGPU_FAKE_NO_TIMING_LIB_PATH="${VGPU_FAKE_GPU_NO_TIMING_LIB_DIR}")

# The cases run three times: on today's fake driver, on the R470-like one (CUDA 11.4), and
# inside a Debian 11 root. Each run registers only the cases meant for it, and the cases that
# measure the compute share (LimiterCompute) run alone: a loaded CPU delays the throttle's
# sleeps and the measured share with them.
set(vgpu_root_only "*EveryProgramOfTheRootStartsWithTheLibraryInLdSoPreload")
# Per-cgroup driver limits (issue 40): the R470-like fake has none, and the old root sees
# other cgroup paths.
set(vgpu_default_fake_only "*AComputeLimitThatCannotBeEnforcedIsSaidOnceAndPublished"
    "*InADriverLimitedCgroupMemGetInfoIsTheSmallerOfTheTwoViews")
set(vgpu_compute "*LimiterCompute.*:*LimiterComputeKernels.*")
set(vgpu_security "*LimiterSecurity.*")  # also under the label security
function(vgpu_preload_cases prefix exclude)
  cmake_parse_arguments(ARG "" "" "PROPERTIES" ${ARGN})
  list(JOIN exclude ":" not)
  vgpu_gtest_cases(vgpu_limiter_preload_test PREFIX "${prefix}" FILTER "-${vgpu_compute}:${vgpu_security}:${not}"
                   PROPERTIES ${ARG_PROPERTIES})
  vgpu_gtest_cases(vgpu_limiter_preload_test PREFIX "${prefix}" FILTER "${vgpu_security}-${not}"
                   PROPERTIES LABELS security ${ARG_PROPERTIES})
  vgpu_gtest_cases(vgpu_limiter_preload_test PREFIX "${prefix}" FILTER "${vgpu_compute}"
                   PROPERTIES RUN_SERIAL TRUE ${ARG_PROPERTIES})
endfunction()

vgpu_preload_cases("" "${vgpu_root_only}")
vgpu_preload_cases(R470. "${vgpu_root_only};${vgpu_default_fake_only}"
  PROPERTIES ENVIRONMENT "VGPU_TEST_FAKE_GPU_DIR=${VGPU_FAKE_GPU_R470_LIB_DIR}")

# And inside a Debian 11 root (glibc 2.31, as Ubuntu 20.04; UBI 8 has 2.28), made once per
# machine (in ~/.cache/vgpu) by the fixture below with debootstrap and reused while complete. Needs root
# (debootstrap, chroot, a mount namespace): as anyone else the fixture and the tests are
# skipped, saying so. VGPU_OLD_ROOT may name a root made elsewhere (it is then reused as is).
if(DEFINED ENV{HOME})
  set(old_root_default $ENV{HOME}/.cache/vgpu/old-root-bullseye)
else()
  set(old_root_default ${CMAKE_BINARY_DIR}/old-root/bullseye)
endif()
set(VGPU_OLD_ROOT ${old_root_default} CACHE PATH
    "Debian 11 root for the limiter's old-userland tests (made by debootstrap when missing)")
set(VGPU_DEBIAN_MIRROR "http://deb.debian.org/debian" CACHE STRING "Debian mirror for debootstrap")
add_test(NAME LimiterOldRoot.Create
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/make_old_root.sh ${VGPU_OLD_ROOT} bullseye ${VGPU_DEBIAN_MIRROR})
set_tests_properties(LimiterOldRoot.Create PROPERTIES FIXTURES_SETUP vgpu_old_root SKIP_RETURN_CODE 77
                     TIMEOUT 900 RESOURCE_LOCK vgpu_old_root_create)
vgpu_preload_cases(OldRoot. "${vgpu_default_fake_only}"
  PROPERTIES FIXTURES_REQUIRED vgpu_old_root ENVIRONMENT "VGPU_TEST_OLD_ROOT=${VGPU_OLD_ROOT}")
