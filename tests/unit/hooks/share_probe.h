/* What the sharing probe's two halves share (share_probe.c runs the scenario, share_worker.c
 * is each CUDA process of the container): the messages between them over a unix socket, which
 * also carries descriptors (SCM_RIGHTS) as NCCL and PyTorch pass them. */
#ifndef VGPU_SHARE_PROBE_H
#define VGPU_SHARE_PROBE_H

#include <stddef.h>
#include <stdint.h>

#include "vgpu/cuda/driver_api.h"

#define MIB (1024ull * 1024ull)

typedef struct {
  char op[16];
  int64_t a, b;
  unsigned char data[CU_IPC_HANDLE_SIZE];
} Msg;

typedef struct {
  int32_t rc; /* CUresult */
  int64_t v1, v2;
  unsigned char data[CU_IPC_HANDLE_SIZE];
} Reply;


/* Sends one message with descriptor `fd` (-1: none); 0 or -1. */
int sendWithFd(int sock, const void* buf, size_t len, int fd);
/* Receives one message; *fd gets a descriptor that came with it, or -1. */
int recvWithFd(int sock, void* buf, size_t len, int* fd);

/* A worker: answers the scenario's messages on `sock` until "quit". */
int workerMain(int sock);

#endif
