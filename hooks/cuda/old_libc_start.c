/* Makes a program built on a new glibc start on an old one (the probe that runs in a Debian 11
 * root, vgpu-cdi-hook that runs on any host; glibc_baseline.cmake's vgpu_glibc_baseline_program). A program's start code (crt1.o) calls __libc_start_main, which glibc 2.34
 * gave a new default version; linked with -Wl,--wrap=__libc_start_main, the call lands here
 * and goes on to the version every glibc has. That older entry point runs the program's own
 * constructors only through the `init` argument, which new start code leaves NULL: then
 * they are run from here. */

typedef int (*vgpu_main_fn)(int, char**, char**);
typedef void (*vgpu_init_fn)(int, char**, char**);

extern vgpu_init_fn __preinit_array_start[] __attribute__((visibility("hidden")));
extern vgpu_init_fn __preinit_array_end[] __attribute__((visibility("hidden")));
extern vgpu_init_fn __init_array_start[] __attribute__((visibility("hidden")));
extern vgpu_init_fn __init_array_end[] __attribute__((visibility("hidden")));

#if defined(__x86_64__)
__asm__(".symver vgpu_old_libc_start_main,__libc_start_main@GLIBC_2.2.5");
#elif defined(__aarch64__)
__asm__(".symver vgpu_old_libc_start_main,__libc_start_main@GLIBC_2.17");
#endif
int vgpu_old_libc_start_main(vgpu_main_fn main, int argc, char** argv, vgpu_init_fn init, void (*fini)(void),
                             void (*rtld_fini)(void), void* stack_end);

static void vgpu_run_constructors(int argc, char** argv, char** envp) {
  for (vgpu_init_fn* f = __preinit_array_start; f < __preinit_array_end; ++f) (*f)(argc, argv, envp);
  for (vgpu_init_fn* f = __init_array_start; f < __init_array_end; ++f) (*f)(argc, argv, envp);
}

int __wrap___libc_start_main(vgpu_main_fn main, int argc, char** argv, vgpu_init_fn init, void (*fini)(void),
                             void (*rtld_fini)(void), void* stack_end);
int __wrap___libc_start_main(vgpu_main_fn main, int argc, char** argv, vgpu_init_fn init, void (*fini)(void),
                             void (*rtld_fini)(void), void* stack_end) {
  return vgpu_old_libc_start_main(main, argc, argv, init != 0 ? init : vgpu_run_constructors, fini, rtld_fini,
                                  stack_end);
}
