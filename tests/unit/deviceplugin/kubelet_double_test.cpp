// The kubelet double's own behaviour, against a PluginServer with a scripted handler.
#include <gmock/gmock.h>

#include <sys/stat.h>

#include <condition_variable>
#include <mutex>

#include "plugin_server.h"
#include "pod_resources_client.h"
#include "test_support.h"

namespace vgpu::deviceplugin::testing {
namespace {

using ::testing::HasSubstr;

/// Two devices; Allocate echoes the IDs; the preferred answer is set by the test.
class ScriptedHandler : public PluginHandler {
 public:
  std::vector<VirtualDevice> devices(const std::string&, std::uint64_t& version) override {
    std::lock_guard lock(mu_);
    version = version_;
    return devices_;
  }
  bool waitForDevices(const std::string&, std::uint64_t seen, std::chrono::milliseconds timeout) override {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return version_ != seen; });
  }
  std::vector<std::string> preferred(const std::string&, const std::vector<std::string>&,
                                     const std::vector<std::string>& mustInclude, std::size_t) override {
    std::lock_guard lock(mu_);
    ++preferredCalls;
    mustIncludes.push_back(mustInclude);
    return preferred_;
  }
  std::variant<ContainerSpec, RpcError> allocate(const std::string&, const std::vector<std::string>& ids) override {
    {
      std::lock_guard lock(mu_);
      allocateCalls.push_back(ids);
    }
    if (fail) return RpcError{RpcCode::kFailedPrecondition, "scripted failure"};
    ContainerSpec s;
    for (size_t i = 0; i < ids.size(); ++i) s.env["ID_" + std::to_string(i)] = ids[i];
    s.mounts.push_back({"/host/x", "/ctr/x", true});
    s.devices.push_back({"/dev/fake0", "/dev/fake0", "rw"});
    return s;
  }
  void setHealth(const std::string& id, bool healthy) {
    {
      std::lock_guard lock(mu_);
      for (auto& d : devices_)
        if (d.id == id) d.healthy = healthy;
      ++version_;
    }
    cv_.notify_all();
  }
  void setPreferred(std::vector<std::string> p) {
    std::lock_guard lock(mu_);
    preferred_ = std::move(p);
  }
  int preferredCalls = 0;
  std::vector<std::vector<std::string>> mustIncludes;  // per GetPreferredAllocation
  std::vector<std::vector<std::string>> allocateCalls;  // the IDs of each Allocate
  bool fail = false;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::uint64_t version_ = 1;
  std::vector<VirtualDevice> devices_{{"a::0", true, 0}, {"a::1", true, 0}, {"b::0", true, 1}, {"b::1", true, 1}};
  std::vector<std::string> preferred_;
};

class KubeletDouble : public ::testing::Test {
 protected:
  void start(bool ignorePreferred = false, const std::string& resource = "example.com/dev") {
    fakes::FakeKubeletOptions ko;
    ko.devicePluginDir = (dir.path() / "dp").string();
    ko.podResourcesSocket = (dir.path() / "pr.sock").string();
    ko.ignorePreferred = ignorePreferred;
    auto k = fakes::FakeKubelet::start(ko);
    ASSERT_TRUE(k.ok()) << k.error().message;
    kubelet = std::move(k).value();
    PluginServerOptions po;
    po.resource = resource;
    po.pluginDir = ko.devicePluginDir;
    po.socketName = "example.sock";
    plugin = std::make_unique<PluginServer>(po, handler);
    ASSERT_TRUE(plugin->start().ok());
  }
  void TearDown() override {
    if (plugin) plugin->stop();
    if (kubelet) kubelet->stop();
  }
  fakes::KubeletPod pod(const std::string& name, int count) {
    return {"default", name, "uid-" + name, {{"main", false, {{"example.com/dev", count}}}}};
  }
  /// What PodResources List says: "ns/name" -> container -> resource -> IDs.
  std::map<std::string, HeldDevices> listed() {
    auto l = listPodResources((dir.path() / "pr.sock").string(), std::chrono::seconds(2));
    EXPECT_TRUE(l.ok()) << (l.ok() ? "" : l.error().message);
    return l.ok() ? *l : std::map<std::string, HeldDevices>{};
  }

  TempDir dir;
  ScriptedHandler handler;
  std::unique_ptr<fakes::FakeKubelet> kubelet;
  std::unique_ptr<PluginServer> plugin;
};

TEST_F(KubeletDouble, RegistersAServingPluginAndFollowsItsDeviceList) {
  start();
  ASSERT_TRUE(kubelet->waitForDevices("example.com/dev", std::chrono::seconds(10)));
  EXPECT_TRUE(waitFor([&] { return plugin->registered(); }));
  auto list = kubelet->devices("example.com/dev");
  ASSERT_EQ(list.size(), 4u);
  EXPECT_EQ(list[2].numaNodes, (std::vector<std::int64_t>{1}));
  handler.setHealth("b::1", false);
  EXPECT_TRUE(kubelet->waitForDevices("example.com/dev", std::chrono::seconds(5), [](const auto& l) {
    return l.size() == 4 && !l[3].healthy && l[0].healthy;
  }));
  EXPECT_GE(kubelet->listsReceived("example.com/dev"), 2u);
}

TEST_F(KubeletDouble, RefusesANameThatIsNotAnExtendedResource) {
  start(false, "kubernetes.io/dev");
  EXPECT_TRUE(waitFor([&] { return !plugin->stats().lastError.empty(); }));
  EXPECT_THAT(plugin->stats().lastError, HasSubstr("invalid extended resource name"));
  EXPECT_TRUE(kubelet->registrations().empty());
}

TEST_F(KubeletDouble, AsksForPreferredIdsAndTakesThemUnlessToldToIgnoreThem) {
  start();
  ASSERT_TRUE(kubelet->waitForDevices("example.com/dev", std::chrono::seconds(10)));
  handler.setPreferred({"b::1"});
  auto r = kubelet->admit(pod("p1", 1));
  ASSERT_TRUE(r.admitted) << r.error;
  EXPECT_EQ(r.allocations[0].deviceIds, (std::vector<std::string>{"b::1"}));
  EXPECT_EQ(r.allocations[0].response.env.at("ID_0"), "b::1");
  EXPECT_EQ(r.allocations[0].response.devices.size(), 1u);
  // A hint naming a device in use is only partly followed; the gap is filled in order.
  handler.setPreferred({"b::1", "b::0"});
  auto r2 = kubelet->admit(pod("p2", 2));
  ASSERT_TRUE(r2.admitted);
  EXPECT_EQ(r2.allocations[0].deviceIds, (std::vector<std::string>{"b::0", "a::0"}));
  EXPECT_EQ(handler.preferredCalls, 2);
}

TEST_F(KubeletDouble, IgnoringPreferredIdsTakesTheLowestAvailable) {
  start(/*ignorePreferred=*/true);
  ASSERT_TRUE(kubelet->waitForDevices("example.com/dev", std::chrono::seconds(10)));
  handler.setPreferred({"b::1"});
  auto r = kubelet->admit(pod("p1", 1));
  ASSERT_TRUE(r.admitted);
  EXPECT_EQ(r.allocations[0].deviceIds, (std::vector<std::string>{"a::0"}));
  EXPECT_EQ(handler.preferredCalls, 0);
}

TEST_F(KubeletDouble, RejectsAPodWhenAllocateFailsOrDevicesRunOut) {
  start();
  ASSERT_TRUE(kubelet->waitForDevices("example.com/dev", std::chrono::seconds(10)));
  auto big = kubelet->admit(pod("big", 5));
  EXPECT_FALSE(big.admitted);
  EXPECT_THAT(big.error, HasSubstr("Requested: 5, Available: 4"));
  handler.fail = true;
  auto r = kubelet->admit(pod("p", 1));
  EXPECT_FALSE(r.admitted);
  EXPECT_THAT(r.error, HasSubstr("scripted failure"));
  EXPECT_TRUE(kubelet->allocations().empty());
}

TEST_F(KubeletDouble, RestartDeletesEverySocketRecreatesItsOwnAndThePluginComesBack) {
  start();
  ASSERT_TRUE(kubelet->waitForDevices("example.com/dev", std::chrono::seconds(10)));
  const auto kubeletSock = dir.path() / "dp" / "kubelet.sock";
  struct stat before {};
  ASSERT_EQ(::stat(kubeletSock.c_str(), &before), 0);
  ASSERT_TRUE(kubelet->admit(pod("keep", 1)).admitted);
  ASSERT_TRUE(kubelet->restart().ok());
  struct stat after {};
  ASSERT_EQ(::stat(kubeletSock.c_str(), &after), 0);
  EXPECT_TRUE(S_ISSOCK(after.st_mode));
  EXPECT_TRUE(waitFor([&] { return kubelet->registrations().size() == 2; }, std::chrono::seconds(5)));
  EXPECT_GE(plugin->stats().restarts, 1u);
  // The checkpoint: the admitted pod keeps its device.
  EXPECT_EQ(kubelet->allocations().size(), 1u);
}

// pkg/kubelet/cm/devicemanager: Allocate adds a non-restartable init container's devices to
// the pod's devicesToReuse, and devicesToAllocate takes from them first, asking the plugin
// for a preference only for what they do not cover (must_include = the reused ones).
TEST_F(KubeletDouble, ReusesAnInitContainersDevicesForTheContainersAfterIt) {
  start();
  ASSERT_TRUE(kubelet->waitForDevices("example.com/dev", std::chrono::seconds(10)));
  handler.setPreferred({"b::0"});
  fakes::KubeletPod p{"default",
                      "p",
                      "uid-p",
                      {{"same", false, {{"example.com/dev", 1}}},
                       {"setup", true, {{"example.com/dev", 1}}},
                       {"wider", false, {{"example.com/dev", 2}}}}};
  auto r = kubelet->admit(p);
  ASSERT_TRUE(r.admitted) << r.error;
  ASSERT_EQ(r.allocations.size(), 3u);
  // Init container first (whatever the order given), then the app containers in order.
  EXPECT_EQ(r.allocations[0].container, "setup");
  EXPECT_EQ(r.allocations[0].deviceIds, (std::vector<std::string>{"b::0"}));
  // "same" takes the init container's device without asking for a preference...
  EXPECT_EQ(r.allocations[1].container, "same");
  EXPECT_EQ(r.allocations[1].deviceIds, (std::vector<std::string>{"b::0"}));
  // ...and it is then taken: "wider" gets two others.
  EXPECT_EQ(r.allocations[2].deviceIds, (std::vector<std::string>{"a::0", "a::1"}));
  EXPECT_EQ(handler.allocateCalls,
            (std::vector<std::vector<std::string>>{{"b::0"}, {"b::0"}, {"a::0", "a::1"}}));
  EXPECT_EQ(handler.preferredCalls, 2);

  // An init container's device covering part of a wider container: must_include names it.
  fakes::KubeletPod q{"default",
                      "q",
                      "uid-q",
                      {{"setup", true, {{"example.com/dev", 1}}}, {"main", false, {{"example.com/dev", 2}}}}};
  kubelet->removePod("uid-p");
  handler.setPreferred({"b::1"});
  auto r2 = kubelet->admit(q);
  ASSERT_TRUE(r2.admitted) << r2.error;
  EXPECT_EQ(r2.allocations[0].deviceIds, (std::vector<std::string>{"b::1"}));
  EXPECT_EQ(r2.allocations[1].deviceIds, (std::vector<std::string>{"b::1", "a::0"}));
  EXPECT_EQ(handler.mustIncludes.back(), (std::vector<std::string>{"b::1"}));
}

TEST_F(KubeletDouble, ASidecarKeepsItsDevicesAndPodResourcesListsItButNoOtherInitContainer) {
  start();
  ASSERT_TRUE(kubelet->waitForDevices("example.com/dev", std::chrono::seconds(10)));
  handler.setPreferred({"a::0"});
  fakes::KubeletPod p{"default", "p", "uid-p", {}};
  p.containers.push_back({"setup", true, {{"example.com/dev", 1}}});
  p.containers.push_back({"proxy", true, {{"example.com/dev", 1}}, /*restartAlways=*/true});
  p.containers.push_back({"main", false, {{"example.com/dev", 1}}});
  auto r = kubelet->admit(p);
  ASSERT_TRUE(r.admitted) << r.error;
  // The sidecar reuses the first init container's device; the app container cannot reuse
  // the sidecar's, so it gets another.
  EXPECT_EQ(r.allocations[1].deviceIds, (std::vector<std::string>{"a::0"}));
  EXPECT_EQ(r.allocations[2].deviceIds, (std::vector<std::string>{"a::1"}));
  auto l = listed();
  ASSERT_TRUE(l.contains("default/p"));
  const HeldDevices want{{"proxy", {{"example.com/dev", {"a::0"}}}}, {"main", {{"example.com/dev", {"a::1"}}}}};
  EXPECT_EQ(l.at("default/p"), want);
}

// devicesToAllocate: a container whose devices the device manager recorded (its checkpoint
// survives restarts and reboots) gets them again with no RPC; only without a record (the
// checkpoint lost or unreadable) are they allocated anew.
TEST_F(KubeletDouble, AfterARestartAPodIsAdmittedFromTheCheckpointOrAnewWhenTheCheckpointIsLost) {
  start();
  ASSERT_TRUE(kubelet->waitForDevices("example.com/dev", std::chrono::seconds(10)));
  handler.setPreferred({"b::1"});
  auto first = kubelet->admit(pod("p", 1));
  ASSERT_TRUE(first.admitted);
  ASSERT_EQ(handler.allocateCalls.size(), 1u);

  ASSERT_TRUE(kubelet->restart().ok());
  ASSERT_TRUE(kubelet->waitForDevices("example.com/dev", std::chrono::seconds(10), [](const auto& l) {
    return !l.empty() && l[0].healthy;
  }));
  auto again = kubelet->admit(pod("p", 1));
  ASSERT_TRUE(again.admitted) << again.error;
  EXPECT_FALSE(again.allocations.at(0).allocateCalled);
  EXPECT_EQ(again.allocations.at(0).deviceIds, (std::vector<std::string>{"b::1"}));
  EXPECT_EQ(again.allocations.at(0).response.env, first.allocations.at(0).response.env);
  EXPECT_EQ(handler.allocateCalls.size(), 1u);

  ASSERT_TRUE(kubelet->restart(/*checkpointLost=*/true).ok());
  ASSERT_TRUE(kubelet->waitForDevices("example.com/dev", std::chrono::seconds(10), [](const auto& l) {
    return !l.empty() && l[0].healthy;
  }));
  // The pod is still the kubelet's, holding nothing until it is admitted again.
  EXPECT_EQ(listed().at("default/p"), (HeldDevices{{"main", {}}}));
  handler.setPreferred({"a::1"});
  auto anew = kubelet->admit(pod("p", 1));
  ASSERT_TRUE(anew.admitted) << anew.error;
  EXPECT_TRUE(anew.allocations.at(0).allocateCalled);
  EXPECT_EQ(anew.allocations.at(0).deviceIds, (std::vector<std::string>{"a::1"}));
  EXPECT_EQ(handler.allocateCalls.size(), 2u);
}

}  // namespace
}  // namespace vgpu::deviceplugin::testing
