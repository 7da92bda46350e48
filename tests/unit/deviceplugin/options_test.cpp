// Flags and environment of vgpu-device-plugin.
#include <gmock/gmock.h>

#include "agent.h"

namespace vgpu::deviceplugin {
namespace {

using ::testing::HasSubstr;

k8s::EnvLookup envOf(std::map<std::string, std::string> vars) {
  return [vars](const std::string& k) -> std::optional<std::string> {
    auto it = vars.find(k);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(DevicePluginOptions, FlagsWinOverEnvironmentWhichWinsOverDefaults) {
  const char* argv[] = {"vgpu-device-plugin", "--state-dir", "/flag/state", "--heartbeat-seconds", "5"};
  auto r = parseAgentOptions(5, argv, envOf({{"NODE_NAME", "n7"}, {"VGPU_STATE_DIR", "/env/state"},
                                             {"VGPU_DEVICE_PLUGIN_DIR", "/env/dp"}}));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->options.nodeName, "n7");
  EXPECT_EQ(r->options.stateDir, "/flag/state");
  EXPECT_EQ(r->options.pluginDir, "/env/dp");
  EXPECT_EQ(r->options.heartbeatInterval, std::chrono::seconds(5));
  EXPECT_EQ(r->options.podResourcesSocket, "/var/lib/kubelet/pod-resources/kubelet.sock");
}

// Issue 28: HAMi's metric names only when asked (the chart's metrics.hamiNames).
TEST(DevicePluginOptions, HamiMetricNamesAreOffUnlessAsked) {
  const char* plain[] = {"vgpu-device-plugin", "--node-name", "n"};
  auto r = parseAgentOptions(3, plain, envOf({}));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_FALSE(r->options.hamiMetrics);
  const char* asked[] = {"vgpu-device-plugin", "--node-name", "n", "--hami-metrics"};
  r = parseAgentOptions(4, asked, envOf({}));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->options.hamiMetrics);
}

TEST(DevicePluginOptions, ANodeNameIsRequired) {
  const char* argv[] = {"vgpu-device-plugin"};
  auto r = parseAgentOptions(1, argv, envOf({}));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, HasSubstr("NODE_NAME"));
}

TEST(DevicePluginOptions, BadFlagsAreClearErrors) {
  const char* argv[] = {"vgpu-device-plugin", "--node-name", "n", "--heartbeat-seconds", "x"};
  auto r = parseAgentOptions(5, argv, envOf({}));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, HasSubstr("heartbeat-seconds"));
  const char* help[] = {"vgpu-device-plugin", "--help"};
  auto h = parseAgentOptions(2, help, envOf({}));
  ASSERT_TRUE(h.ok());
  EXPECT_TRUE(h->help);
  EXPECT_THAT(h->usage, HasSubstr("--device-plugin-dir"));
}

TEST(DevicePluginOptions, RediscoveryRunsEveryThirtySecondsUnlessSetOtherwise) {
  const char* plain[] = {"vgpu-device-plugin", "--node-name", "n"};
  auto d = parseAgentOptions(3, plain, envOf({}));
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_EQ(d->options.rediscoverInterval, std::chrono::seconds(30));
  const char* off[] = {"vgpu-device-plugin", "--node-name", "n", "--rediscover-seconds", "0"};
  auto o = parseAgentOptions(5, off, envOf({}));
  ASSERT_TRUE(o.ok()) << o.error().message;
  EXPECT_EQ(o->options.rediscoverInterval, std::chrono::seconds(0));  // only on SIGHUP
  const char* bad[] = {"vgpu-device-plugin", "--node-name", "n", "--rediscover-seconds", "-1"};
  auto b = parseAgentOptions(5, bad, envOf({}));
  ASSERT_FALSE(b.ok());
  EXPECT_THAT(b.error().message, HasSubstr("--rediscover-seconds"));
}

// Issue 37 item 4: each container's folder a size-limited tmpfs, when the agent can mount one.
TEST(DevicePluginOptions, ContainerFoldersAreATmpfsWhereTheAgentCanMountOneUnlessSetOtherwise) {
  const char* plain[] = {"vgpu-device-plugin", "--node-name", "n"};
  auto d = parseAgentOptions(3, plain, envOf({}));
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_EQ(d->options.regionTmpfs, FolderTmpfs::kBestEffort);
  for (const auto& [text, mode] : {std::pair{"required", FolderTmpfs::kRequired}, std::pair{"off", FolderTmpfs::kOff},
                                   std::pair{"best-effort", FolderTmpfs::kBestEffort}}) {
    const char* argv[] = {"vgpu-device-plugin", "--node-name", "n", "--region-tmpfs", text};
    auto r = parseAgentOptions(5, argv, envOf({}));
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->options.regionTmpfs, mode) << text;
  }
  const char* bad[] = {"vgpu-device-plugin", "--node-name", "n", "--region-tmpfs", "yes"};
  auto b = parseAgentOptions(5, bad, envOf({}));
  ASSERT_FALSE(b.ok());
  EXPECT_THAT(b.error().message, HasSubstr("--region-tmpfs"));
  EXPECT_THAT(b.error().message, HasSubstr("required, best-effort, off"));
}

}  // namespace
}  // namespace vgpu::deviceplugin
