// vgpu-sim from the build tree on examples/ascend: vNPU templates, whole chips and HAMi's
// device filter on a cluster of Ascend 910B nodes.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <cstdio>
#include <map>
#include <string>

namespace {

namespace json = boost::json;

std::string run(const std::string& command, int& status) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return out;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) out.append(buffer, n);
  status = pclose(pipe);
  return out;
}

class AscendSim : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = VGPU_EXAMPLES_DIR "/ascend";
    int status = -1;
    const std::string out = run(std::string(VGPU_SIM_BINARY) + " --cluster " + dir + "/cluster.yaml --pods " + dir +
                                    "/pods.yaml --config " + dir + "/device-config.yaml --backend-dir " +
                                    VGPU_BACKEND_DIR + " --output json 2>&1",
                                status);
    ASSERT_EQ(status, 0) << out;
    json::error_code ec;
    const json::value root = json::parse(out, ec);
    ASSERT_FALSE(ec) << out;
    for (const auto& pod : root.at("pods").as_array()) pods_[std::string(pod.at("pod").as_string())] = pod.as_object();
  }
  std::string field(const std::string& pod, const char* key) {
    auto it = pods_.find(pod);
    if (it == pods_.end()) return "no pod " + pod;
    return std::string(it->second.at(key).as_string());
  }
  /// "<id> <placement>" of each device of the pod's first container.
  std::vector<std::string> devices(const std::string& pod) {
    std::vector<std::string> out;
    auto it = pods_.find(pod);
    if (it == pods_.end()) return out;
    for (const auto& d : it->second.at("containers").as_array().at(0).at("devices").as_array())
      out.push_back(std::string(d.at("id").as_string()) + " " + std::string(d.at("placement").as_string()));
    return out;
  }
  std::map<std::string, json::object> pods_;
};

TEST_F(AscendSim, MemoryRoundsUpToTemplatesAndCountsAreWholeChips) {
  EXPECT_EQ(devices("inference/infer-small-0"), std::vector<std::string>{"Ascend-910b3-1-0 vir05_1c_16g"});
  EXPECT_EQ(devices("inference/infer-large-0"), std::vector<std::string>{"Ascend-910b3-1-2 vir10_3c_32g"});
  EXPECT_EQ(devices("training/train-whole-0"), std::vector<std::string>{"Ascend-910b3-1-3 whole"});
  const auto eight = devices("training/train-eight-0");
  ASSERT_EQ(eight.size(), 8u);
  for (const auto& d : eight) EXPECT_EQ(d.substr(d.size() - 5), "whole") << d;
}

TEST_F(AscendSim, HamisDeviceFilterAndTooLargeRequests) {
  EXPECT_EQ(devices("inference/pinned-0"), std::vector<std::string>{"Ascend-910b3-2-2 vir05_1c_16g"});
  EXPECT_EQ(field("training/too-big-0", "status"), "pending");
}

}  // namespace
