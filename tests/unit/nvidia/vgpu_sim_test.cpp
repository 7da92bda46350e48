// vgpu-sim places the pods of examples/nvidia on NVIDIA devices with this backend's allocator
// (loaded from libvgpu-backend-nvidia.so by the simulator itself).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <boost/json.hpp>
#include <cstdio>
#include <string>

namespace {

using ::testing::HasSubstr;

struct SimRun {
  int status = -1;
  std::string out;
};

SimRun runSim(const std::string& output, const std::string& example = "nvidia") {
  const std::string dir = VGPU_EXAMPLES_DIR "/" + example;
  const std::string cmd = std::string(VGPU_SIM_BINARY) + " --cluster " + dir + "/cluster.yaml --pods " + dir +
                          "/pods.yaml --config " + dir + "/device-config.yaml --backend-dir " + VGPU_BACKEND_DIR +
                          " -o " + output + " 2>&1";
  SimRun r;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n = 0;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int status = pclose(p);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

const boost::json::object& podNamed(const boost::json::value& doc, const std::string& name) {
  for (const auto& p : doc.at("pods").as_array())
    if (p.at("pod").as_string() == name) return p.as_object();
  throw std::runtime_error("no pod " + name);
}

TEST(NvidiaVgpuSim, PlacesTheExamplePodsOnNvidiaDevices) {
  const SimRun run = runSim("json");
  ASSERT_EQ(run.status, 0) << run.out;
  boost::json::value doc;
  ASSERT_NO_THROW(doc = boost::json::parse(run.out)) << run.out;

  const auto& small = podNamed(doc, "serving/small-inference");
  EXPECT_EQ(small.at("status").as_string(), "placed");
  EXPECT_EQ(small.at("node").as_string(), "t4-node");
  const auto& smallDevice = small.at("containers").as_array()[0].at("devices").as_array()[0];
  EXPECT_EQ(smallDevice.at("backend").as_string(), "nvidia");
  EXPECT_EQ(smallDevice.at("id").as_string(), "GPU-t4-0");
  EXPECT_EQ(smallDevice.at("memoryMiB").to_number<std::int64_t>(), 8000);
  EXPECT_EQ(smallDevice.at("compute").to_number<std::int64_t>(), 20);

  const auto& train = podNamed(doc, "research/train-two-h100");
  EXPECT_EQ(train.at("status").as_string(), "placed");
  EXPECT_EQ(train.at("node").as_string(), "h100-node");
  const auto& trainDevices = train.at("containers").as_array()[0].at("devices").as_array();
  ASSERT_EQ(trainDevices.size(), 2u);
  // numa-bind: both GPUs from one NUMA node (0-1 on node 0, 2-3 on node 1).
  const auto a = std::string(trainDevices[0].at("id").as_string());
  const auto b = std::string(trainDevices[1].at("id").as_string());
  EXPECT_EQ((a.back() - '0') / 2, (b.back() - '0') / 2) << a << " " << b;

  const auto& whole = podNamed(doc, "research/whole-a100");
  EXPECT_EQ(whole.at("status").as_string(), "placed");
  EXPECT_EQ(whole.at("node").as_string(), "a100-node");
  const auto& wholeDevice = whole.at("containers").as_array()[0].at("devices").as_array()[0];
  EXPECT_EQ(wholeDevice.at("id").as_string(), "GPU-a100-0");
  EXPECT_EQ(wholeDevice.at("memoryMiB").to_number<std::int64_t>(), 40960);
  EXPECT_EQ(wholeDevice.at("compute").to_number<std::int64_t>(), 100);

  const auto& half = podNamed(doc, "research/half-an-a100");
  EXPECT_EQ(half.at("status").as_string(), "pending");
  const std::string halfWhy = boost::json::serialize(half.at("reasons"));
  EXPECT_THAT(halfWhy, HasSubstr("a100-node"));
  EXPECT_THAT(halfWhy, HasSubstr("unhealthy"));
  EXPECT_THAT(halfWhy, HasSubstr("mig-node"));
  EXPECT_THAT(halfWhy, HasSubstr("MIG mode"));

  const auto& large = podNamed(doc, "research/too-large");
  EXPECT_EQ(large.at("status").as_string(), "pending");
  EXPECT_THAT(boost::json::serialize(large.at("reasons")), HasSubstr("90000 MiB"));

  const auto& bad = podNamed(doc, "research/bad-cores");
  EXPECT_EQ(bad.at("status").as_string(), "invalid");
  EXPECT_THAT(std::string(bad.at("error").as_string()), HasSubstr("nvidia.com/gpucores must be between 0 and 100"));
}

TEST(NvidiaVgpuSim, TheTextReportSaysWhyPodsArePending) {
  const SimRun run = runSim("text");
  ASSERT_EQ(run.status, 0) << run.out;
  EXPECT_THAT(run.out, HasSubstr("research/too-large: no node fits"));
  EXPECT_THAT(run.out, HasSubstr("3 placed, 2 pending, 1 invalid"));
}

}  // namespace

namespace {

// examples/nvidia-mig: static MIG devices (mixed) and a GPU under dynamic MIG.
TEST(NvidiaVgpuSim, PlacesMigPodsAndSaysWhyTheOthersWait) {
  const SimRun run = runSim("json", "nvidia-mig");
  ASSERT_EQ(run.status, 0) << run.out;
  boost::json::value doc;
  ASSERT_NO_THROW(doc = boost::json::parse(run.out)) << run.out;
  // Dynamic MIG: 3000 MiB is a 1g.5gb instance, its memory and 1 of 7 compute slices.
  const auto& notebook = podNamed(doc, "lab/notebook");
  EXPECT_EQ(notebook.at("status").as_string(), "placed");
  const auto& nd = notebook.at("containers").as_array()[0].at("devices").as_array()[0];
  EXPECT_EQ(nd.at("id").as_string(), "GPU-dmig-0");
  EXPECT_EQ(nd.at("memoryMiB").to_number<std::int64_t>(), 4864);
  EXPECT_EQ(nd.at("compute").to_number<std::int64_t>(), 14);
  EXPECT_EQ(nd.at("placement").as_string(), "1g.5gb@6");  // fills from the end, 0-3 kept for a 3g
  // Static MIG, mixed: the 3g.20gb MIG device, whole.
  const auto& inference = podNamed(doc, "lab/inference-3g");
  EXPECT_EQ(inference.at("status").as_string(), "placed");
  EXPECT_EQ(inference.at("containers").as_array()[0].at("devices").as_array()[0].at("id").as_string(), "MIG-3g-0");
  EXPECT_FALSE(inference.at("containers").as_array()[0].at("devices").as_array()[0].as_object().contains("placement"));
  // The operator's 1g.10gb on slices 4-5 leaves one place for a 3g.20gb: the first takes it,
  // the second is refused by the scheduler, in the planner's words, not at Allocate.
  const auto& first = podNamed(doc, "lab/first-3g");
  ASSERT_EQ(first.at("status").as_string(), "placed");
  EXPECT_EQ(first.at("containers").as_array()[0].at("devices").as_array()[0].at("placement").as_string(),
            "3g.20gb@0-3");
  const auto& second = podNamed(doc, "lab/second-3g");
  EXPECT_EQ(second.at("status").as_string(), "pending");
  EXPECT_EQ(second.at("reasons").at("dynamic-node").as_string(),
            "container \"server\" needs 1 nvidia.com/gpu (12000 MiB, 0 percent compute): 0 of 1 fit; 1/1 no free "
            "3g.20gb placement: slices 0\u20133 hold a 3g.20gb; slices 4\u20137 hold a 1g.10gb and a 1g.5gb");
  const std::string whole = boost::json::serialize(podNamed(doc, "lab/whole-a100").at("reasons"));
  EXPECT_THAT(whole, HasSubstr("no free 7g.40gb placement: slices 0\u20137 hold a 1g.10gb and a 1g.5gb and a 3g.20gb"));
  EXPECT_THAT(whole, HasSubstr("it serves only its nvidia.com/mig-<profile> resource"));
  const std::string large = boost::json::serialize(podNamed(doc, "lab/too-large").at("reasons"));
  EXPECT_THAT(large, HasSubstr("no MIG profile of this GPU has 50000 MiB (the largest allowed has 40192 MiB)"));
  EXPECT_THAT(large, HasSubstr("needs 1 nvidia.com/gpu"));
}

TEST(NvidiaVgpuSim, TheTextReportShowsEachMigPlacement) {
  const SimRun run = runSim("text", "nvidia-mig");
  ASSERT_EQ(run.status, 0) << run.out;
  EXPECT_THAT(run.out, HasSubstr("PLACEMENT"));
  EXPECT_THAT(run.out, ::testing::ContainsRegex("lab/first-3g +dynamic-node +server +GPU-dmig-0 +19968 MiB +42% +3g.20gb@0-3"));
  EXPECT_THAT(run.out, HasSubstr("1/1 no free 3g.20gb placement: slices 0\u20133 hold a 3g.20gb"));
  EXPECT_THAT(run.out, HasSubstr("3 placed, 3 pending, 0 invalid"));
}

}  // namespace
