# vgpu_glibc_baseline(<target>): binds the target's glibc references to old symbol versions
# (glibc_baseline.h, force-included) and makes libdl.so.2 and libpthread.so.0 NEEDED, where
# those versions live on a glibc before 2.34. For libvgpu.so and for the test programs that
# also run in an old root (tests/fakes/gpu, tests/unit/hooks).
include_guard(GLOBAL)
set(VGPU_GLIBC_BASELINE_HEADER ${CMAKE_CURRENT_LIST_DIR}/glibc_baseline.h CACHE INTERNAL
    "Header binding glibc references to old symbol versions")
function(vgpu_glibc_baseline target)
  target_compile_options(${target} PRIVATE "SHELL:-include ${VGPU_GLIBC_BASELINE_HEADER}")
  target_link_options(${target} PRIVATE
    "SHELL:-Wl,--push-state,--no-as-needed -l:libdl.so.2 -l:libpthread.so.0 -Wl,--pop-state")
endfunction()

# vgpu_glibc_baseline_program(<target>): the same for an executable, whose start code (crt1.o)
# also calls __libc_start_main at glibc 2.34's version: old_libc_start.c takes that call
# (--wrap) to the version every glibc has.
set(VGPU_OLD_LIBC_START ${CMAKE_CURRENT_LIST_DIR}/old_libc_start.c CACHE INTERNAL
    "Start code shim of programs built at the glibc baseline")
function(vgpu_glibc_baseline_program target)
  vgpu_glibc_baseline(${target})
  target_sources(${target} PRIVATE ${VGPU_OLD_LIBC_START})
  set_source_files_properties(${VGPU_OLD_LIBC_START} PROPERTIES LANGUAGE C)
  target_link_options(${target} PRIVATE -Wl,--wrap=__libc_start_main)
endfunction()
