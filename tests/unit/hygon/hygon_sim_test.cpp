// vgpu-sim, the built binary, schedules DCU pods on the mixed cluster of examples/hygon with
// the real libvgpu-backend-hygon.so.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <array>
#include <cstdio>
#include <map>
#include <string>

namespace {

namespace json = boost::json;
using ::testing::HasSubstr;

std::string run(const std::string& command, int& status) {
  std::string out;
  FILE* p = popen(command.c_str(), "r");
  if (p == nullptr) return out;
  std::array<char, 4096> buf;
  size_t n = 0;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  status = pclose(p);
  return out;
}

class HygonSim : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = std::string(VGPU_EXAMPLES_DIR) + "/hygon";
    int status = -1;
    const std::string out = run(std::string(VGPU_SIM_BINARY) + " --cluster " + dir + "/cluster.yaml --pods " + dir +
                                    "/pods.yaml --config " + dir + "/device-config.yaml --backend-dir " +
                                    VGPU_BACKEND_DIR + " --output json 2>&1",
                                status);
    ASSERT_EQ(status, 0) << out;
    const json::value v = json::parse(out);
    for (const auto& pod : v.at("pods").as_array()) {
      const std::string name(pod.at("pod").as_string());  // namespace/name
      pods_[name.substr(name.find('/') + 1)] = pod.as_object();
    }
    for (const auto& d : v.at("devices").as_array())
      nodeOf_[std::string(d.at("id").as_string())] = std::string(d.at("node").as_string());
  }

  std::string status(const std::string& pod) { return std::string(pods_.at(pod).at("status").as_string()); }
  std::vector<std::pair<std::string, std::string>> devices(const std::string& pod, size_t container = 0) {
    std::vector<std::pair<std::string, std::string>> out;
    const auto& c = pods_.at(pod).at("containers").as_array().at(container);
    for (const auto& d : c.at("devices").as_array())
      out.emplace_back(std::string(d.at("backend").as_string()), std::string(d.at("id").as_string()));
    return out;
  }
  std::string reasons(const std::string& pod) { return json::serialize(pods_.at(pod).at("reasons")); }

  std::map<std::string, json::object> pods_;
  std::map<std::string, std::string> nodeOf_;
};

TEST_F(HygonSim, DcuPodsLandOnDcusAndGpuPodsOnGpus) {
  for (const char* pod : {"dcu-infer-0", "dcu-infer-1", "dcu-z100-only", "dcu-not-k100", "dcu-train-whole",
                          "dcu-pinned-big"}) {
    ASSERT_EQ(status(pod), "placed") << pod;
    for (const auto& [backend, id] : devices(pod)) {
      EXPECT_EQ(backend, "hygon") << pod;
      EXPECT_EQ(id.rfind("DCU-", 0), 0u) << pod << " got " << id;
    }
  }
  ASSERT_EQ(status("gpu-infer-0"), "placed");
  EXPECT_EQ(devices("gpu-infer-0")[0].first, "sim");
}

TEST_F(HygonSim, ModelFiltersAndWholeDcusAreHonoured) {
  EXPECT_EQ(nodeOf_.at(devices("dcu-z100-only")[0].second), "dcu-z100-1");
  EXPECT_EQ(nodeOf_.at(devices("dcu-not-k100")[0].second), "dcu-z100-1");
  const auto whole = devices("dcu-train-whole");
  ASSERT_EQ(whole.size(), 2u);
  EXPECT_NE(whole[0].second, whole[1].second);
  const auto& c = pods_.at("dcu-train-whole").at("containers").as_array().at(0).at("devices").as_array();
  EXPECT_EQ(c.at(0).at("compute").as_int64(), 100);
}

TEST_F(HygonSim, APodWithGpuAndDcuContainersGetsBothOnOneNode) {
  ASSERT_EQ(status("gpu-and-dcu"), "placed");
  const auto gpu = devices("gpu-and-dcu", 0);
  const auto dcu = devices("gpu-and-dcu", 1);
  ASSERT_EQ(gpu.size(), 1u);
  ASSERT_EQ(dcu.size(), 1u);
  EXPECT_EQ(gpu[0].first, "sim");
  EXPECT_EQ(dcu[0].first, "hygon");
  EXPECT_EQ(nodeOf_.at(gpu[0].second), "dcu-mixed-1");
  EXPECT_EQ(nodeOf_.at(dcu[0].second), "dcu-mixed-1");
}

TEST_F(HygonSim, ComputeIsBookedInWholeComputeUnits) {
  // 25% of a 120-CU K100_AI is 30 CUs = 25%; 25% of a 60-CU Z100 is 15 CUs = 25%; 96% of a
  // Z100 is 58 CUs, booked as 97%.
  const auto& big = pods_.at("dcu-pinned-big").at("containers").as_array().at(0).at("devices").as_array().at(0);
  EXPECT_EQ(big.at("compute").as_int64(), 97);
}

TEST_F(HygonSim, RefusalsSayWhyInWords) {
  EXPECT_EQ(status("dcu-too-big"), "pending");
  EXPECT_THAT(reasons("dcu-too-big"), HasSubstr("MiB"));
  EXPECT_EQ(status("dcu-pinned-small"), "pending");
  EXPECT_THAT(reasons("dcu-pinned-small"), HasSubstr("whole compute units"));
  EXPECT_EQ(status("dcu-two-slices"), "invalid");
  EXPECT_THAT(json::serialize(pods_.at("dcu-two-slices").at("error")), HasSubstr("at most one virtual DCU"));
}

}  // namespace
