/* The pod sandbox's process for the test images (registry.k8s.io/pause:<v> built here, as
 * docker/images.toml lists it): holds the pod's namespaces until told to stop, and as PID 1
 * reaps the orphans the pod's containers leave. Linked statically: the image has nothing else.
 * Usage: pause [-v]. SIGINT or SIGTERM: exit 0. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int sig) {
  (void)sig;
  _exit(0);
}

static void reap(int sig) {
  (void)sig;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

int main(int argc, char** argv) {
  if (argc == 2 && strcmp(argv[1], "-v") == 0) {
    printf("vgpu pause (tests/images/pause.c)\n");
    return 0;
  }
  if (argc != 1) {
    fprintf(stderr, "usage: pause [-v]\n");
    return 2;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = stop;
  if (sigaction(SIGINT, &sa, NULL) != 0 || sigaction(SIGTERM, &sa, NULL) != 0) return 1;
  sa.sa_handler = reap;
  sa.sa_flags = SA_NOCLDSTOP | SA_RESTART;
  if (sigaction(SIGCHLD, &sa, NULL) != 0) return 1;
  if (getpid() != 1) fprintf(stderr, "pause: not PID 1: orphans are reaped only as PID 1\n");
  for (;;) pause();
}
