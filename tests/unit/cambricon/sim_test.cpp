// vgpu-sim from the build tree on examples/cambricon: MLU pods on a mixed cluster.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <cstdio>
#include <map>
#include <string>

namespace {

namespace json = boost::json;
using ::testing::HasSubstr;
using ::testing::StartsWith;

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

class CambriconSim : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = VGPU_EXAMPLES_DIR "/cambricon";
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

  const json::object& pod(const std::string& name) {
    auto it = pods_.find(name);
    if (it == pods_.end()) {
      ADD_FAILURE() << "no pod " << name;
      static const json::object empty;
      return empty;
    }
    return it->second;
  }
  std::string status(const std::string& name) { return std::string(pod(name).at("status").as_string()); }
  std::string node(const std::string& name) { return std::string(pod(name).at("node").as_string()); }
  const json::array& devices(const std::string& name, size_t container = 0) {
    return pod(name).at("containers").as_array().at(container).at("devices").as_array();
  }

  std::map<std::string, json::object> pods_;
};

TEST_F(CambriconSim, PlacesSharedSlicesOnSmluCards) {
  for (const char* name : {"inference/mlu-infer-0", "inference/mlu-infer-1", "inference/mlu-infer-2",
                           "inference/mlu-infer-3", "class/mlu-notebook"}) {
    ASSERT_EQ(status(name), "placed") << name;
    const auto& d = devices(name).at(0).as_object();
    EXPECT_EQ(d.at("backend").as_string(), "cambricon") << name;
    EXPECT_THAT(std::string(d.at("id").as_string()), StartsWith("MLU-370-")) << name;
  }
  const auto& infer = devices("inference/mlu-infer-0").at(0).as_object();
  EXPECT_EQ(infer.at("memoryMiB").as_int64(), 4096) << "16 units of 256 MiB";
  EXPECT_EQ(infer.at("compute").as_int64(), 25);
}

TEST_F(CambriconSim, GivesMultiCardRequestsDistinctWholeCardsOfOneNode) {
  ASSERT_EQ(status("research/mlu-multi"), "placed");
  const auto& d = devices("research/mlu-multi");
  ASSERT_EQ(d.size(), 2u);
  EXPECT_NE(d.at(0).at("id"), d.at(1).at("id"));
  EXPECT_EQ(d.at(0).at("compute").as_int64(), 100);
}

TEST_F(CambriconSim, RefusesAShareOfTwoCardsWithTheReason) {
  ASSERT_EQ(status("research/mlu-multi-share"), "invalid");
  EXPECT_THAT(std::string(pod("research/mlu-multi-share").at("error").as_string()), HasSubstr("one sMLU instance"));
}

TEST_F(CambriconSim, HonoursModelAndUuidAnnotations) {
  ASSERT_EQ(status("research/mlu-pinned"), "placed");
  EXPECT_EQ(devices("research/mlu-pinned").at(0).at("id").as_string(), "MLU-370-2-0");
  ASSERT_EQ(status("research/mlu-train-whole"), "placed");
  EXPECT_EQ(node("research/mlu-train-whole"), "mlu590-whole-1");
  EXPECT_EQ(devices("research/mlu-train-whole").at(0).at("compute").as_int64(), 100);
  ASSERT_EQ(status("research/mlu-not-370"), "placed");
  EXPECT_EQ(node("research/mlu-not-370"), "mlu590-whole-1");
}

TEST_F(CambriconSim, OffersCardsNotInSmluModeOnlyWhole) {
  ASSERT_EQ(status("research/mlu590-shared"), "pending");
  const auto& reasons = pod("research/mlu590-shared").at("reasons").as_object();
  EXPECT_THAT(std::string(reasons.at("mlu590-whole-1").as_string()), HasSubstr("not in sMLU mode"));
}

TEST_F(CambriconSim, ExplainsWhatCannotBePlaced) {
  ASSERT_EQ(status("research/mlu-too-big"), "pending");
  EXPECT_THAT(std::string(pod("research/mlu-too-big").at("reasons").at("mlu370-smlu-1").as_string()),
              HasSubstr("51200 MiB"));
  ASSERT_EQ(status("research/mlu-bad-vcore"), "invalid");
  EXPECT_THAT(std::string(pod("research/mlu-bad-vcore").at("error").as_string()),
              HasSubstr("cambricon.com/mlu.smlu.vcore"));
}

TEST_F(CambriconSim, PlacesGpuAndMluContainersOfOnePodOnTheMixedNode) {
  ASSERT_EQ(status("inference/gpu-serve"), "placed");
  EXPECT_EQ(devices("inference/gpu-serve").at(0).at("backend").as_string(), "sim");
  ASSERT_EQ(status("inference/mixed-pipeline"), "placed");
  EXPECT_EQ(node("inference/mixed-pipeline"), "mixed-1");
  EXPECT_EQ(devices("inference/mixed-pipeline", 0).at(0).at("backend").as_string(), "sim");
  EXPECT_EQ(devices("inference/mixed-pipeline", 1).at(0).at("backend").as_string(), "cambricon");
}

}  // namespace
