// The kill points of the region's test build (vgpu/region_kill_points.h): compiled only into
// vgpu_region_killpoints, so that a test can kill a process right after any write.

#include "vgpu/region_kill_points.h"

#include <signal.h>
#include <unistd.h>

namespace {
int gPoint = 0;  // per process: a forked child arms its own
int gLeft = 0;
int gSignal = SIGKILL;
}  // namespace

extern "C" {

void vgpu_region_kill_at(int point, int nth) { vgpu_region_signal_at(point, nth, SIGKILL); }

void vgpu_region_signal_at(int point, int nth, int sig) {
  gPoint = point;
  gLeft = nth;
  gSignal = sig;
}

void vgpu_region_kill_point(int point) {
  if (point != gPoint || gLeft <= 0 || --gLeft != 0) return;
  kill(getpid(), gSignal);
  if (gSignal == SIGKILL) {
    for (;;) pause();  // SIGKILL is never late by more than this
  }
}

}  // extern "C"
