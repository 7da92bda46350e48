#pragma once
/*
 * Kill points of the shared region: each names the moment right after one write to the region,
 * where a process may be killed. Tests of crash safety build the region code a second time
 * with VGPU_REGION_KILL_POINTS defined (the library vgpu_region_killpoints, never libvgpu.so)
 * and make a child process die with SIGKILL at a chosen one; everywhere else the points
 * compile to nothing.
 */

#ifdef __cplusplus
extern "C" {
#endif

typedef enum vgpu_region_kill_point_id {
  VGPU_KP_ADD_MARKED = 1,  /* check-and-add: the slot's in-flight marker raised */
  VGPU_KP_ADD_DEVICE,      /* check-and-add: the device sum raised */
  VGPU_KP_ADD_SLOT,        /* check-and-add: the slot's counter raised (marker still up) */
  VGPU_KP_SUB_MARKED,      /* subtraction: marker raised */
  VGPU_KP_SUB_SLOT,        /* subtraction: the slot's counter lowered */
  VGPU_KP_SUB_DEVICE,      /* subtraction: the device sum lowered (marker still up) */
  VGPU_KP_FORCE_DEVICE,    /* forced add: the device sum raised */
  VGPU_KP_FORCE_SLOT,      /* forced add: the slot's counter raised */
  VGPU_KP_ATTACH_LOCKED,   /* attach: region lock taken */
  VGPU_KP_ATTACH_CLAIMED,  /* attach: the slot's file lock taken */
  VGPU_KP_ATTACH_RESET,    /* attach: the slot's counters zeroed */
  VGPU_KP_ATTACH_DONE,     /* attach: pid written, lock still held */
  VGPU_KP_CLEAR_SLOT,      /* detach: one device's counter of the slot taken */
  VGPU_KP_CLEAR_DEVICE,    /* detach: that device's sum lowered */
  VGPU_KP_CLEAR_DONE,      /* detach: the slot freed, lock still held */
  VGPU_KP_RECLAIM_FLAGGED, /* reclaim: `reclaiming` raised */
  VGPU_KP_RECLAIM_QUIET,   /* reclaim: no live slot in flight any more */
  VGPU_KP_RECLAIM_SHARES,  /* reclaim: the share table let go of the dead slots */
  VGPU_KP_RECLAIM_DEVICE,  /* reclaim: one device sum rewritten */
  VGPU_KP_RECLAIM_SLOT,    /* reclaim: one dead slot freed */
  VGPU_KP_RECLAIM_DONE,    /* reclaim: `reclaiming` lowered, lock still held */
  VGPU_KP_SHARE_PUBLISH_ENTRY, /* export: the entry written */
  VGPU_KP_SHARE_PUBLISH_SLOT,  /* export: the bytes taken out of the exporter's slot */
  VGPU_KP_SHARE_HOLD,          /* import: the holder bit set */
  VGPU_KP_SHARE_DROP_HOLDER,   /* drop: the holder bit cleared */
  VGPU_KP_SHARE_DROP_ENTRY,    /* drop: the last holder's entry freed */
  VGPU_KP_SHARE_DROP_DEVICE,   /* drop: its bytes taken out of the device sum */
  VGPU_KP_COUNT
} vgpu_region_kill_point_id;

#ifdef VGPU_REGION_KILL_POINTS
/** Test builds: dies with SIGKILL if this is the armed point's nth passage. */
void vgpu_region_kill_point(int point);
/** Arms `point`: the nth passage through it (1 = the next) kills the process. 0: disarms. */
void vgpu_region_kill_at(int point, int nth);
/** Like vgpu_region_kill_at with another signal: SIGSTOP stops the process there (it goes on
 *  from there when continued). */
void vgpu_region_signal_at(int point, int nth, int sig);
#define VGPU_REGION_KILL_POINT(p) vgpu_region_kill_point(p)
#else
#define VGPU_REGION_KILL_POINT(p) ((void)0)
#endif

#ifdef __cplusplus
}
#endif
