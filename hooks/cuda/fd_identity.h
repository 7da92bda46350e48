#pragma once
// The identity of an exported VMM file descriptor: the key of its share entry in the region
// (VGPU_SHARE_FD, vgpu/region_shares.h), computed by the exporter from the descriptor it got
// and by an importer from the descriptor it was passed (SCM_RIGHTS, pidfd_getfd: the same
// open file). docs/limiter.md, section 3, says why it is made this way.

#include <stdint.h>

#include "vgpu/shared_region.h"

namespace vgpu::fdid {

/// Exports of one handle an importer can recognise when the file is a shared device node.
inline constexpr unsigned kMaxTags = 64;

/// What the exporter learns about a descriptor it is about to publish.
enum class Export : uint8_t {
  kNone,    // neither kind: not shared (the importer is charged)
  kInode,   // a regular file: its inode is the allocation's own; `key` is ready
  kTagged,  // a device node every export shares: the open file must be tagged (tag())
};

/// Classifies `fd`; for kInode fills `key`.
Export classify(int fd, uint8_t key[VGPU_REGION_SHARE_KEY_LEN]);

/// A new tag base for a handle (random, so that tags of different handles never meet).
uint64_t newBase();

/// Tags the open file of `fd` as export `index` of the handle whose tags start at `base`
/// (an open-file-description read lock on byte base+index, which lives as long as the open
/// file does, in whichever process). False if the file cannot be locked.
bool tag(int fd, uint64_t base, unsigned index);

/// The key of a tagged export: the device node and the handle's base.
void taggedKey(int fd, uint64_t base, uint8_t key[VGPU_REGION_SHARE_KEY_LEN]);

/// Importer: the key of the region's entry that `fd` was exported for, if any: its inode for
/// a regular file; for a device node, the tagged entry whose tag `fd`'s own open file holds.
/// False: no entry (the import is charged).
bool importKey(int fd, const vgpu_region* region, uint8_t key[VGPU_REGION_SHARE_KEY_LEN]);

}  // namespace vgpu::fdid
