#pragma once
/* The Quokka NPU management library (libquokka.so.1) as the backend calls it: an imaginary
 * vendor's C API, opened with dlopen at run time. */
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct quokka_device_info {
  char uuid[64];
  char model[64];
  uint64_t memory_mib;
  int numa_node; /* -1: unknown */
  int healthy;   /* 0: the device stopped answering */
} quokka_device_info;

/* Both return 0 on success, a negative code otherwise. */
typedef int (*quokka_device_count_fn)(int* count);
typedef int (*quokka_device_info_fn)(int index, quokka_device_info* info);

#ifdef __cplusplus
}
#endif
