// Devices a backend partitions at fixed places (backend ABI 1.6, Allocator::placesGrants and
// fitPlaced): the placement engine keeps each grant's placement token, hands the tokens of a
// device's grants back to the backend's fit, also between the containers of one pod, and
// explains a refusal in the backend's words for that device.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

#include "declaring_backend.h"
#include "test_support.h"
#include "vgpu/placement.h"
#include "vgpu/sdk/backend_adapter.h"

namespace vgpu {
namespace {

using ::testing::HasSubstr;

constexpr std::int32_t kNoFreeHalf = VGPU_REASON_BACKEND + 1;

/// The sim backend whose devices with the attribute `halves` hold at most two grants, one
/// in each half, "low" then "high": where a grant goes depends on where the others sit.
class HalvesBackend final : public testing::ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;

  bool placesGrants(const vgpu_device& d) const override {
    for (std::size_t i = 0; i < d.attributes.count; ++i)
      if (std::strcmp(d.attributes.items[i].key, "halves") == 0) return true;
    return false;
  }
  void fitPlaced(const vgpu_device_request& q, const vgpu_device& d, const vgpu_device_usage& u, vgpu_placement& p,
                 vgpu_fit_result& r) const override {
    ++placedCalls;
    inner().fit(q, d, u, r);
    if (!r.fits) return;
    bool low = false, high = false;
    for (std::size_t i = 0; i < p.placed.count; ++i) {
      low = low || std::strcmp(p.placed.items[i], "low") == 0;
      high = high || std::strcmp(p.placed.items[i], "high") == 0;
    }
    if (low && high) {
      r = vgpu_fit_result{};
      r.reason = kNoFreeHalf;
      sdk::writeText(p.why, p.why_capacity, "both halves of " + std::string(d.id) + " hold a grant");
      return;
    }
    sdk::writeText(p.token, p.token_capacity, low ? "high" : "low");
  }
  std::string explain(const vgpu_fit_result& r) const override {
    return r.reason == kNoFreeHalf ? "no free half" : inner().explain(r);
  }

  mutable long placedCalls = 0;  ///< Not synchronized: for one thread.
};

ContainerResources gpu(const std::string& name = "main") {
  return {name, false, {{"vgpu.io/sim", 1}, {"vgpu.io/sim-memory", 1000}, {"vgpu.io/sim-cores", 10}}};
}

class PlacedGrants : public ::testing::Test {
 protected:
  void SetUp() override {
    auto sim = testing::loadSim();
    ASSERT_NE(sim, nullptr);
    auto halves = std::make_unique<HalvesBackend>(std::move(sim));
    halves_ = halves.get();
    ASSERT_TRUE(set_.add(std::move(halves)).ok());
  }
  /// A node of `count` sim devices, the first `halved` of them in halves.
  NodeState node(int count, int halved) {
    auto devices = testing::simDevices(count, "n-", 81920, "A100", 10);
    for (int i = 0; i < halved; ++i) devices[static_cast<std::size_t>(i)].attributes["halves"] = "2";
    return NodeState("n", std::make_shared<const NodeInventory>(std::move(devices), set_));
  }
  PreparedPod pod(const std::vector<ContainerResources>& containers) {
    auto request = buildPodRequest(set_, "default", "p", containers, {});
    EXPECT_TRUE(request.ok()) << request.error().message;
    auto prepared = PreparedPod::prepare(*request, set_);
    EXPECT_TRUE(prepared.ok());
    return std::move(prepared).value();
  }
  static std::vector<std::string> tokens(const Assignment& a) {
    std::vector<std::string> out;
    for (const auto& c : a.containers)
      for (const auto& g : c.devices) out.push_back(g.placement);
    return out;
  }

  BackendSet set_;
  HalvesBackend* halves_ = nullptr;
  PlacementEngine engine_;
};

TEST_F(PlacedGrants, EachGrantKeepsItsPlacementAndTheNextFitSeesIt) {
  NodeState n = node(1, 1);
  EXPECT_TRUE(n.inventory->placesGrants());
  auto first = engine_.assign(pod({gpu()}), n);
  ASSERT_TRUE(first.ok()) << first.error().message;
  EXPECT_THAT(tokens(*first), ::testing::ElementsAre("low"));
  ASSERT_TRUE(n.add(*first).ok());
  EXPECT_THAT(n.placed[0], ::testing::ElementsAre("low"));
  auto second = engine_.assign(pod({gpu()}), n);
  ASSERT_TRUE(second.ok()) << second.error().message;
  EXPECT_THAT(tokens(*second), ::testing::ElementsAre("high"));
  ASSERT_TRUE(n.add(*second).ok());
  // Memory and shares are left, but no half: refused by check() and assign(), and explained
  // in the backend's words for the device, not the generic words of its reason.
  const PreparedPod third = pod({gpu()});
  const NodeEvaluation e = engine_.check(third, n);
  EXPECT_FALSE(e.fits);
  EXPECT_THAT(engine_.explain(third, n, e), HasSubstr("1/1 both halves of n-gpu0 hold a grant"));
  auto refused = engine_.assign(third, n);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.error().message, HasSubstr("both halves of n-gpu0 hold a grant"));
  // A pod that leaves frees its half.
  ASSERT_TRUE(n.remove(*first).ok());
  EXPECT_THAT(n.placed[0], ::testing::ElementsAre("high"));
  auto again = engine_.assign(third, n);
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_THAT(tokens(*again), ::testing::ElementsAre("low"));
}

TEST_F(PlacedGrants, APodsEarlierContainersPlacementsCountForItsNextContainer) {
  NodeState n = node(1, 1);
  auto two = engine_.assign(pod({gpu("a"), gpu("b")}), n);
  ASSERT_TRUE(two.ok()) << two.error().message;
  EXPECT_THAT(tokens(*two), ::testing::ElementsAre("low", "high"));
  auto three = engine_.assign(pod({gpu("a"), gpu("b"), gpu("c")}), n);
  ASSERT_FALSE(three.ok());
  EXPECT_THAT(three.error().message, HasSubstr("container \"c\""));
}

TEST_F(PlacedGrants, DevicesThatAreNotPlacedGetNoTokenAndTheUsualFit) {
  NodeState n = node(2, 1);
  n.usage[0].shares = 10;  // the halved device is full: the plain one takes the pod
  auto a = engine_.assign(pod({gpu()}), n);
  ASSERT_TRUE(a.ok()) << a.error().message;
  EXPECT_EQ(a->containers[0].devices[0].deviceId, "n-gpu1");
  EXPECT_THAT(tokens(*a), ::testing::ElementsAre(""));
  const long calls = halves_->placedCalls;
  NodeState plain = node(3, 0);
  EXPECT_FALSE(plain.inventory->placesGrants());
  EXPECT_TRUE(plain.placed.empty());
  ASSERT_TRUE(engine_.assign(pod({gpu()}), plain).ok());
  EXPECT_EQ(halves_->placedCalls, calls);
}

TEST_F(PlacedGrants, AGrantWithoutAPlacementAddsItsUsageOnly) {
  NodeState n = node(1, 1);
  Assignment old{"n", {{"main", false, {DeviceGrant{"sim", "n-gpu0", 0, 1000, 10, 0}}}}};
  ASSERT_TRUE(n.add(old).ok());
  EXPECT_TRUE(n.placed[0].empty());
  EXPECT_EQ(n.usage[0].memoryMiB, 1000u);
  ASSERT_TRUE(n.remove(old).ok());
  EXPECT_EQ(n.usage[0].memoryMiB, 0u);
}

}  // namespace
}  // namespace vgpu
