/*
 * Binds references to glibc functions to the symbol versions of old glibc releases, so that
 * a library built on a new distribution (Debian 12, glibc 2.36) loads with the glibc of older
 * container images. Force-included (-include) into every translation unit of libvgpu.so and
 * of the test programs that run in an old root (tests/fakes/gpu, tests/unit/hooks).
 *
 * glibc 2.34 moved libdl and libpthread into libc and gave the moved functions a new default
 * version (GLIBC_2.34); the previous versions stay exported from libc as compatibility
 * symbols. A reference pinned here to such a previous version resolves, on an old glibc, in
 * libdl.so.2 / libpthread.so.0, which must therefore be NEEDED (VGPU_GLIBC_BASELINE_LIBS in
 * hooks/cuda/CMakeLists.txt); on a new glibc those two are empty and libc answers.
 *
 * Only references the code makes are affected (a pin for an unused function emits nothing).
 * Functions newer than the baseline have no older version to pin to; the code must not use
 * them (fstat, GLIBC_2.33: use lseek; arc4random, 2.36; _dl_find_object, 2.35: the C++ runtime
 * and unwinder, which is why libvgpu.so is linked without them). The test
 * LimiterExports.NeedsNoGlibcNewerThan217 reads what libvgpu.so asks for.
 */
#ifndef VGPU_GLIBC_BASELINE_H
#define VGPU_GLIBC_BASELINE_H

#if defined(__x86_64__)
#define VGPU_GLIBC_OLD(sym, x86, arm) __asm__(".symver " #sym "," #sym "@" #x86);
#elif defined(__aarch64__)
#define VGPU_GLIBC_OLD(sym, x86, arm) __asm__(".symver " #sym "," #sym "@" #arm);
#else
#error "glibc_baseline.h knows the symbol versions of x86-64 and aarch64 only"
#endif

/* libdl (all GLIBC_2.2.5 on x86-64; aarch64 begins at GLIBC_2.17) */
VGPU_GLIBC_OLD(dlopen, GLIBC_2.2.5, GLIBC_2.17)
VGPU_GLIBC_OLD(dlclose, GLIBC_2.2.5, GLIBC_2.17)
#ifndef VGPU_DEFINES_DLSYM /* libvgpu.so defines (exports) its own dlsym */
VGPU_GLIBC_OLD(dlsym, GLIBC_2.2.5, GLIBC_2.17)
#endif
VGPU_GLIBC_OLD(dlvsym, GLIBC_2.2.5, GLIBC_2.17)
VGPU_GLIBC_OLD(dladdr, GLIBC_2.2.5, GLIBC_2.17)
VGPU_GLIBC_OLD(dlerror, GLIBC_2.2.5, GLIBC_2.17)

/* libpthread */
VGPU_GLIBC_OLD(pthread_once, GLIBC_2.2.5, GLIBC_2.17)
VGPU_GLIBC_OLD(pthread_create, GLIBC_2.2.5, GLIBC_2.17)
VGPU_GLIBC_OLD(pthread_join, GLIBC_2.2.5, GLIBC_2.17)
VGPU_GLIBC_OLD(pthread_detach, GLIBC_2.2.5, GLIBC_2.17)
VGPU_GLIBC_OLD(pthread_key_create, GLIBC_2.2.5, GLIBC_2.17)
VGPU_GLIBC_OLD(pthread_key_delete, GLIBC_2.2.5, GLIBC_2.17)
VGPU_GLIBC_OLD(pthread_getspecific, GLIBC_2.2.5, GLIBC_2.17)
VGPU_GLIBC_OLD(pthread_setspecific, GLIBC_2.2.5, GLIBC_2.17)
VGPU_GLIBC_OLD(pthread_mutex_trylock, GLIBC_2.2.5, GLIBC_2.17)
VGPU_GLIBC_OLD(pthread_mutex_timedlock, GLIBC_2.2.5, GLIBC_2.17)
VGPU_GLIBC_OLD(pthread_mutexattr_init, GLIBC_2.2.5, GLIBC_2.17)
VGPU_GLIBC_OLD(pthread_mutexattr_destroy, GLIBC_2.2.5, GLIBC_2.17)
VGPU_GLIBC_OLD(pthread_mutexattr_settype, GLIBC_2.2.5, GLIBC_2.17)
VGPU_GLIBC_OLD(pthread_mutexattr_setpshared, GLIBC_2.2.5, GLIBC_2.17)
VGPU_GLIBC_OLD(pthread_mutexattr_setrobust, GLIBC_2.12, GLIBC_2.17)
VGPU_GLIBC_OLD(pthread_mutex_consistent, GLIBC_2.12, GLIBC_2.17)
VGPU_GLIBC_OLD(pthread_attr_setstacksize, GLIBC_2.2.5, GLIBC_2.17)
VGPU_GLIBC_OLD(pthread_sigmask, GLIBC_2.2.5, GLIBC_2.17)
/* Newer than GLIBC_2.17, for the test doubles only (they run in a Debian 11 root, 2.31). */
VGPU_GLIBC_OLD(pthread_cond_clockwait, GLIBC_2.30, GLIBC_2.30)

#undef VGPU_GLIBC_OLD
#endif
