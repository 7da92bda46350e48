// MIG through the node agent, on the NVIDIA backend over the fake NVML: each MIG resource of
// migStrategy mixed lists only its own devices, an info series per MIG device (static) and per
// instance made at Allocate (dynamic), HAMi's MIG instance series with --hami-metrics.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>

#include "agent_fixture.h"
#include "promtool_check.h"
#include "region_support.h"
#include "vgpu/partition.h"
#include "vgpu/proto/deviceplugin_v1beta1.grpc.pb.h"

#ifdef VGPU_FAKE_NVML_LIBRARY
#include "mig_test_support.h"

namespace vgpu::deviceplugin::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using vgpu::testing::promtoolProblems;

constexpr const char* kA100 = "GPU-22222222-2222-2222-2222-222222222222";
constexpr const char* kH100 = "GPU-11111111-1111-1111-1111-111111111111";

/// The value of the first series of `name` whose labels contain every one of `labels`
/// ("" when none); its label text in `found`.
std::string seriesWith(const std::string& text, const std::string& name, const std::vector<std::string>& labels,
                       std::string* found = nullptr) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.starts_with(name + "{")) continue;
    if (!std::all_of(labels.begin(), labels.end(), [&](const std::string& l) { return line.find(l) != std::string::npos; }))
      continue;
    const auto close = line.rfind('}');
    if (found) *found = line.substr(name.size(), close + 1 - name.size());
    return line.substr(close + 2);
  }
  return "";
}

class DevicePluginMig : public AgentFixture {
 protected:
  void SetUp() override {
    AgentFixture::SetUp();
    ::setenv("VGPU_FAKE_GPU_STATE", (dir.path() / "gpu-state").c_str(), 1);
  }
  void TearDown() override {
    AgentFixture::TearDown();
    ::unsetenv("VGPU_FAKE_GPU_STATE");
  }
  void writeMachine(const std::string& a100Mig) {
    ::setenv("VGPU_FAKE_GPU_CONFIG",
             dir.write("machine.conf", std::string("gpu uuid=") + kA100 +
                                           " name=\"NVIDIA A100-SXM4-40GB\" memory_mib=40960 mig=" + a100Mig +
                                           " mig_profiles=a100-40gb\ngpu uuid=" + kH100 +
                                           " name=\"NVIDIA H100 80GB HBM3\" memory_mib=81559\n")
                 .c_str(),
             1);
  }
  void writeConfig(const std::string& options) {
    dir.write("device-config.yaml", std::string("version: 1\nbackends:\n  nvidia:\n    enabled: true\n    splitCount: 2\n"
                                                "    options:\n      discovery: nvml\n      nvmlLibrary: ") +
                                        VGPU_FAKE_NVML_LIBRARY + "\n      hostSysRoot: /nonexistent-sys\n" + options);
  }
  void start(bool hamiMetrics) {
    startKubelet();
    AgentOptions o = options();
    o.hamiMetrics = hamiMetrics;
    startAgent(o);
    ASSERT_TRUE(kubelet->waitForDevices("nvidia.com/gpu", std::chrono::seconds(10)));
    ASSERT_TRUE(waitFor([&] { return agent->podsSynced(); }));
  }
  /// The MIG devices the kubelet lists under `resource`, without their slots.
  std::set<std::string> listed(const std::string& resource) const {
    std::set<std::string> out;
    for (const auto& d : kubelet->devices(resource)) out.insert(parseVirtualDeviceId(d.id)->deviceId);
    return out;
  }
  /// Allocate straight on `resource`'s plugin socket, as a kubelet that ignores the lists would.
  grpc::Status allocate(const std::string& resource, const std::string& id) {
    auto channel = grpc::CreateChannel("unix://" + (dir.path() / "dp" / pluginSocketName(resource)).string(),
                                       grpc::InsecureChannelCredentials());
    auto stub = v1beta1::DevicePlugin::NewStub(channel);
    v1beta1::AllocateRequest req;
    req.add_container_requests()->add_devices_ids(id);
    v1beta1::AllocateResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return stub->Allocate(&ctx, req, &resp);
  }
};

TEST_F(DevicePluginMig, MixedListsEachMigResourceWithOnlyItsDevicesAndRefusesAnotherResourcesDevice) {
  writeMachine("on");
  nvidia::testing::FakeMigControl control(VGPU_FAKE_NVML_LIBRARY);
  ASSERT_TRUE(control.ok());
  ASSERT_EQ(control.partition(0, 9, 4, 4), NVML_SUCCESS);   // 3g.20gb on slices 4-7
  ASSERT_EQ(control.partition(0, 19, 0, 1), NVML_SUCCESS);  // 1g.5gb on slice 0
  ASSERT_EQ(control.partition(0, 19, 1, 1), NVML_SUCCESS);  // 1g.5gb on slice 1
  writeConfig("      migStrategy: mixed\n      migProfiles: 1g.5gb,3g.20gb\n");
  start(true);
  const std::string small = "nvidia.com/mig-1g.5gb", big = "nvidia.com/mig-3g.20gb";
  ASSERT_TRUE(kubelet->waitForDevices(small, std::chrono::seconds(10)));
  ASSERT_TRUE(kubelet->waitForDevices(big, std::chrono::seconds(10)));
  EXPECT_EQ(kubelet->devices(small).size(), 4u);  // two MIG devices, two slots each
  EXPECT_EQ(kubelet->devices(big).size(), 2u);
  EXPECT_EQ(listed("nvidia.com/gpu"), (std::set<std::string>{kH100}));
  ASSERT_EQ(listed(big).size(), 1u);
  const std::string bigId = *listed(big).begin();
  for (const auto& id : listed(small)) EXPECT_THAT(id, ::testing::StartsWith("MIG-"));
  EXPECT_FALSE(listed(small).contains(bigId));

  // A device of another resource: refused in words, before any pod is looked for.
  auto refused = allocate(small, bigId + "::0");
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(refused.error_message(), HasSubstr("device " + bigId + " (ID " + bigId + "::0) is served as " + big +
                                                 ", not as " + small));
  EXPECT_EQ(allocate("nvidia.com/gpu", bigId + "::1").error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  // One info series per MIG device, and HAMi's.
  const std::string text = agent->renderMetrics();
  EXPECT_EQ(promtoolProblems(text), "");
  std::string labels;
  EXPECT_EQ(seriesWith(text, "vgpu_device_partition_info", {"device_id=\"" + bigId + "\""}, &labels), "1");
  EXPECT_THAT(labels, HasSubstr("backend=\"nvidia\",device_id=\"" + bigId + "\",parent_id=\"" + kA100 +
                                "\",kind=\"mig\",profile=\"3g.20gb\",placement=\"4:4\",instance_id="));
  EXPECT_THAT(labels, HasSubstr("mode=\"static\""));
  EXPECT_EQ(seriesWith(text, "vgpu_device_partition_info", {"profile=\"1g.5gb\"", "placement=\"1:1\""}), "1");
  EXPECT_EQ(seriesWith(text, "hami_node_gpu_mig_instance_info",
                       {"node=\"" + std::string(kNode) + "\",device_uuid=\"" + kA100 +
                            "\",device_index=\"0\",mig_uuid=\"" + bigId + "\",profile=\"3g.20gb\",gpu_instance_id=\"",
                        "placement_start=\"4\",placement_size=\"4\",zone=\"vGPU\""}),
            "1");
  EXPECT_THAT(text, Not(HasSubstr("parent_id=\"" + std::string(kH100))));  // a whole GPU is no partition
}

TEST_F(DevicePluginMig, AnInstanceMadeAtAllocateHasAnInfoSeriesAndTheContainersSeriesCarryItsId) {
  writeMachine("on");
  writeConfig(std::string("      migManaged: ") + kA100 + "\n      migStateDir: " + (dir.path() / "mig").string() + "\n");
  start(true);
  EXPECT_THAT(agent->renderMetrics(), Not(HasSubstr("\nvgpu_device_partition_info{")));

  PodSpec spec{"small", {{"main", {{"nvidia.com/gpu", 1}, {"nvidia.com/gpumem", 3000}},
                          {grant(kA100, 0, 4864, 14, 0, "nvidia")}}}};
  const std::string uid = createPod(spec);
  auto result = kubelet->admit(kubeletPod(spec, uid));
  ASSERT_TRUE(result.admitted) << result.error;
  const std::string mig = result.allocations[0].response.env.at("NVIDIA_VISIBLE_DEVICES");
  ASSERT_THAT(mig, ::testing::StartsWith("MIG-"));
  // The instance, as the backend reported it, is on the pod too.
  auto onPod = decodePartitions(annotationOf("small", madePartitionsKey(0)));
  ASSERT_TRUE(onPod.ok()) << onPod.error().message;
  ASSERT_EQ(onPod->size(), 1u);
  EXPECT_EQ((*onPod)[0].id, mig);

  // libvgpu.so records the container's GPU 0, the device it was given, in its region.
  writeRegion(folderOf(result.allocations[0]) + "/shared/shared-region", mig, 100ull << 20, 4864ull << 20, 0);
  const std::string text = agent->renderMetrics();
  EXPECT_EQ(promtoolProblems(text), "");
  std::string info;
  EXPECT_EQ(seriesWith(text, "vgpu_device_partition_info", {"mode=\"dynamic\""}, &info), "1");
  EXPECT_THAT(info, HasSubstr("device_id=\"" + mig + "\",parent_id=\"" + kA100 +
                              "\",kind=\"mig\",profile=\"1g.5gb\",placement=\"6:1\""));
  EXPECT_EQ(seriesWith(text, "vgpu_container_memory_used_bytes", {"pod=\"small\"", "device_uuid=\"" + mig + "\""}),
            "104857600");
  EXPECT_EQ(seriesWith(text, "hami_node_gpu_mig_instance_info",
                       {"device_uuid=\"" + std::string(kA100) + "\",device_index=\"0\",mig_uuid=\"" + mig +
                            "\",profile=\"1g.5gb\"",
                        "placement_start=\"6\",placement_size=\"1\""}),
            "1");
  EXPECT_EQ(seriesWith(text, "hami_vgpu_memory_used_bytes", {"device_uuid=\"" + mig + "\""}), "104857600");

  // The container ends: its instance goes, and so does the series.
  ASSERT_TRUE(api->remove("pods", "default", "small").ok());
  kubelet->removePod(uid);
  agent->maintainNow();
  EXPECT_THAT(agent->renderMetrics(), Not(HasSubstr("\nvgpu_device_partition_info{")));
  nvidia::testing::FakeMigControl control(VGPU_FAKE_NVML_LIBRARY);
  EXPECT_EQ(control.migDevices(0), 0u);
}

TEST_F(DevicePluginMig, ARestartedAgentStillReportsTheInstancesItMade) {
  writeMachine("on");
  writeConfig(std::string("      migManaged: ") + kA100 + "\n      migStateDir: " + (dir.path() / "mig").string() + "\n");
  start(false);
  PodSpec spec{"small", {{"main", {{"nvidia.com/gpu", 1}, {"nvidia.com/gpumem", 3000}},
                          {grant(kA100, 0, 4864, 14, 0, "nvidia")}}}};
  auto result = kubelet->admit(kubeletPod(spec, createPod(spec)));
  ASSERT_TRUE(result.admitted) << result.error;
  const std::string mig = result.allocations[0].response.env.at("NVIDIA_VISIBLE_DEVICES");
  agent->stop();
  agent.reset();

  startAgent(options());  // the container's record (and what the backend reported) is in the journal
  ASSERT_TRUE(waitFor([&] { return agent->podsSynced(); }));
  agent->maintainNow();
  std::string info;
  EXPECT_EQ(seriesWith(agent->renderMetrics(), "vgpu_device_partition_info", {"mode=\"dynamic\""}, &info), "1");
  EXPECT_THAT(info, HasSubstr("device_id=\"" + mig + "\""));
  nvidia::testing::FakeMigControl control(VGPU_FAKE_NVML_LIBRARY);
  EXPECT_EQ(control.migDevices(0), 1u);  // kept: its container lives
}

TEST_F(DevicePluginMig, NoPartitionSeriesWithoutMig) {
  writeMachine("off");
  writeConfig("");
  start(true);
  const std::string text = agent->renderMetrics();
  EXPECT_THAT(text, Not(HasSubstr("\nvgpu_device_partition_info{")));
  EXPECT_THAT(text, Not(HasSubstr("\nhami_node_gpu_mig_instance_info{")));
  EXPECT_EQ(promtoolProblems(text), "");
}

}  // namespace
}  // namespace vgpu::deviceplugin::testing
#endif
