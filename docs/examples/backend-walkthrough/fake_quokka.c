/* The fake libquokka.so.1 for tests: the real symbols, devices from the file that
 * VGPU_FAKE_QUOKKA_CONFIG names, read on every call (so a test can change the node):
 * one device per line, "<uuid> <model> <memoryMiB> <numa> ok|lost". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quokka_api.h"

#define EXPORT __attribute__((visibility("default")))

static int read_devices(quokka_device_info* out, int capacity) {
  const char* path = getenv("VGPU_FAKE_QUOKKA_CONFIG");
  FILE* f = path ? fopen(path, "r") : NULL;
  if (f == NULL) return -1;
  int n = 0;
  char state[16];
  quokka_device_info d;
  while (n < capacity) {
    memset(&d, 0, sizeof(d));
    unsigned long long memory = 0;
    if (fscanf(f, "%63s %63s %llu %d %15s", d.uuid, d.model, &memory, &d.numa_node, state) != 5) break;
    d.memory_mib = memory;
    d.healthy = strcmp(state, "ok") == 0;
    out[n++] = d;
  }
  fclose(f);
  return n;
}

EXPORT int quokka_device_count(int* count) {
  quokka_device_info devices[16];
  const int n = read_devices(devices, 16);
  if (n < 0) return -1;
  *count = n;
  return 0;
}

EXPORT int quokka_device_info_get(int index, quokka_device_info* info) {
  quokka_device_info devices[16];
  const int n = read_devices(devices, 16);
  if (n < 0 || index < 0 || index >= n) return -2;
  *info = devices[index];
  return 0;
}
