// vgpu-sim from the build tree on examples/amd: a CPX partition placed by token, shares and
// whole GPUs on SPX nodes, and a request larger than any MI300X.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <map>
#include <string>
#include <vector>

#include "../core/sim_run.h"

namespace {

namespace json = boost::json;

class AmdSim : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = VGPU_EXAMPLES_DIR "/amd";
    const auto run = vgpu::testing::runSim("--cluster " + dir + "/cluster.yaml --pods " + dir + "/pods.yaml --config " +
                                           dir + "/device-config.yaml --output json");
    ASSERT_EQ(run.exitCode, 0) << run.out;
    json::error_code ec;
    const json::value root = json::parse(run.out, ec);
    ASSERT_FALSE(ec) << run.out;
    for (const auto& pod : root.at("pods").as_array()) pods_[std::string(pod.at("pod").as_string())] = pod.as_object();
  }
  /// "<id> <placement>" of each device of the pod's first container ("-" without a token).
  std::vector<std::string> devices(const std::string& pod) const {
    std::vector<std::string> out;
    auto it = pods_.find(pod);
    if (it == pods_.end()) return out;
    for (const auto& d : it->second.at("containers").as_array().at(0).at("devices").as_array()) {
      const auto* token = d.as_object().if_contains("placement");
      out.push_back(std::string(d.at("id").as_string()) + " " + (token ? std::string(token->as_string()) : "-"));
    }
    return out;
  }
  std::map<std::string, json::object> pods_;
};

TEST_F(AmdSim, PartitionsArePlacedByTokenAndWholeGpusShared) {
  EXPECT_EQ(devices("inference/infer-part-0"), std::vector<std::string>{"mi300x-cpx-1-0 CPX@0"});
  const auto share = devices("inference/infer-share-0");
  ASSERT_EQ(share.size(), 1u);
  EXPECT_EQ(share[0].rfind("mi300x-spx-", 0), 0u) << share[0];  // no partition holds 48000 MiB
  EXPECT_EQ(devices("training/train-whole-0").size(), 2u);
  EXPECT_EQ(std::string(pods_.at("training/too-big-0").at("status").as_string()), "pending");
}

}  // namespace
