// The region's table of memory shared between a container's processes
// (vgpu/region_shares.h): what an exporter, an importer and the reclaim of dead processes do
// to the device's sum, on a private region with slots used directly.

#include <gtest/gtest.h>

#include <cstring>

#include "vgpu/shared_region.h"

namespace {

constexpr uint64_t kMiB = 1ull << 20;

class RegionShares : public ::testing::Test {
 protected:
  void SetUp() override {
    char err[256] = "";
    ASSERT_EQ(vgpu_region_open_private(&r_, err, sizeof err), VGPU_REGION_OK) << err;
    std::memset(key_, 0x5a, sizeof key_);
    std::memset(other_, 0xa5, sizeof other_);
  }
  void TearDown() override { vgpu_region_close(r_); }

  uint64_t device(int dev) const { return vgpu_region_used(r_, dev); }
  uint64_t slot(int s, int dev) const { return r_->procs[s].memory_used[dev]; }

  vgpu_region* r_ = nullptr;
  uint8_t key_[VGPU_REGION_SHARE_KEY_LEN];
  uint8_t other_[VGPU_REGION_SHARE_KEY_LEN];
};

TEST_F(RegionShares, PublishMovesTheExportersChargeIntoAnEntryAndLeavesTheSum) {
  vgpu_region_force_add(r_, 0, 1, 48 * kMiB);
  ASSERT_EQ(vgpu_region_share_publish(r_, 0, VGPU_SHARE_IPC, key_, 1, 48 * kMiB), VGPU_REGION_OK);
  EXPECT_EQ(slot(0, 1), 0u);
  EXPECT_EQ(device(1), 48 * kMiB);
  EXPECT_EQ(vgpu_region_shared_bytes(r_, 1), 48 * kMiB);
}

TEST_F(RegionShares, AnImporterIsChargedNothingAndTheLastHolderTakesTheBytesOut) {
  vgpu_region_force_add(r_, 0, 0, 48 * kMiB);
  ASSERT_EQ(vgpu_region_share_publish(r_, 0, VGPU_SHARE_FD, key_, 0, 48 * kMiB), VGPU_REGION_OK);
  int dev = -1;
  uint64_t bytes = 0;
  ASSERT_EQ(vgpu_region_share_hold(r_, 7, VGPU_SHARE_FD, key_, &dev, &bytes), VGPU_REGION_OK);
  EXPECT_EQ(dev, 0);
  EXPECT_EQ(bytes, 48 * kMiB);
  EXPECT_EQ(slot(7, 0), 0u);
  EXPECT_EQ(device(0), 48 * kMiB);
  EXPECT_EQ(vgpu_region_share_drop(r_, 0, VGPU_SHARE_FD, key_), VGPU_REGION_OK);  // the exporter frees first
  EXPECT_EQ(device(0), 48 * kMiB);
  EXPECT_EQ(vgpu_region_share_drop(r_, 7, VGPU_SHARE_FD, key_), VGPU_REGION_OK);
  EXPECT_EQ(device(0), 0u);
  EXPECT_EQ(vgpu_region_share_hold(r_, 7, VGPU_SHARE_FD, key_, &dev, &bytes), VGPU_REGION_SHARE_NOT_FOUND);
}

TEST_F(RegionShares, AKeyAlreadyInTheTableIsNotPublishedAgain) {
  vgpu_region_force_add(r_, 0, 0, 16 * kMiB);
  vgpu_region_force_add(r_, 1, 0, 16 * kMiB);
  ASSERT_EQ(vgpu_region_share_publish(r_, 0, VGPU_SHARE_IPC, key_, 0, 16 * kMiB), VGPU_REGION_OK);
  EXPECT_EQ(vgpu_region_share_publish(r_, 1, VGPU_SHARE_IPC, key_, 0, 16 * kMiB), VGPU_REGION_SHARE_EXISTS);
  EXPECT_EQ(slot(1, 0), 16 * kMiB);  // it keeps paying for its own memory
  EXPECT_EQ(vgpu_region_share_drop(r_, 1, VGPU_SHARE_IPC, key_), VGPU_REGION_SHARE_NOT_FOUND);  // and holds nothing
  EXPECT_EQ(device(0), 32 * kMiB);
}

TEST_F(RegionShares, UnknownKeysKindsAndCountsAreRefused) {
  int dev = -1;
  uint64_t bytes = 0;
  EXPECT_EQ(vgpu_region_share_hold(r_, 0, VGPU_SHARE_IPC, other_, &dev, &bytes), VGPU_REGION_SHARE_NOT_FOUND);
  EXPECT_EQ(vgpu_region_share_publish(r_, 0, 99, key_, 0, 0), VGPU_REGION_ERROR);
  EXPECT_EQ(vgpu_region_share_publish(r_, VGPU_REGION_MAX_PROCS, VGPU_SHARE_IPC, key_, 0, 0), VGPU_REGION_ERROR);
  EXPECT_EQ(vgpu_region_share_publish(r_, 0, VGPU_SHARE_IPC, key_, VGPU_REGION_MAX_DEVICES, 0), VGPU_REGION_ERROR);
  // More than the slot holds: nothing moves.
  vgpu_region_force_add(r_, 0, 0, kMiB);
  EXPECT_EQ(vgpu_region_share_publish(r_, 0, VGPU_SHARE_IPC, key_, 0, 2 * kMiB), VGPU_REGION_ERROR);
  EXPECT_EQ(slot(0, 0), kMiB);
}

TEST_F(RegionShares, AnEntryOfNoBytesChargesItsImportersNothing) {
  ASSERT_EQ(vgpu_region_share_publish(r_, 0, VGPU_SHARE_FD, key_, 0, 0), VGPU_REGION_OK);  // a multicast object
  int dev = -1;
  uint64_t bytes = 1;
  ASSERT_EQ(vgpu_region_share_hold(r_, 3, VGPU_SHARE_FD, key_, &dev, &bytes), VGPU_REGION_OK);
  EXPECT_EQ(bytes, 0u);
  EXPECT_EQ(device(0), 0u);
}

TEST_F(RegionShares, ReclaimClearsDeadHoldersAndFreesEntriesNoOneHolds) {
  vgpu_region_force_add(r_, 0, 0, 8 * kMiB);
  vgpu_region_force_add(r_, 2, 0, 4 * kMiB);
  ASSERT_EQ(vgpu_region_share_publish(r_, 0, VGPU_SHARE_IPC, key_, 0, 8 * kMiB), VGPU_REGION_OK);
  ASSERT_EQ(vgpu_region_share_publish(r_, 2, VGPU_SHARE_IPC, other_, 0, 4 * kMiB), VGPU_REGION_OK);
  ASSERT_EQ(vgpu_region_share_hold(r_, 1, VGPU_SHARE_IPC, key_, nullptr, nullptr), VGPU_REGION_OK);
  uint64_t dead[VGPU_REGION_SHARE_HOLDER_WORDS] = {};
  dead[0] = 1u << 0 | 1u << 2;  // the two exporters died
  uint64_t held[VGPU_REGION_MAX_DEVICES] = {};
  ASSERT_EQ(vgpu_region_lock(r_), 0);
  vgpu_region_shares_reclaim_locked(r_, dead, held);
  vgpu_region_unlock(r_);
  EXPECT_EQ(held[0], 8 * kMiB);  // still held by slot 1
  EXPECT_EQ(vgpu_region_shared_bytes(r_, 0), 8 * kMiB);
  EXPECT_EQ(vgpu_region_share_hold(r_, 5, VGPU_SHARE_IPC, other_, nullptr, nullptr), VGPU_REGION_SHARE_NOT_FOUND);
}

}  // namespace
