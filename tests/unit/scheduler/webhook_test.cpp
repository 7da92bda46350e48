// The mutating webhook: AdmissionReview v1 in and out, JSONPatch in base64, the refusals.
#include <gtest/gtest.h>

#include <set>

#include "scheduler_harness.h"
#include "vgpu/annotations.h"
#include "vgpu/codec/base64.h"
#include "webhook.h"

namespace vgpu::scheduler {
namespace {

using namespace vgpu::testing;

struct WebhookFixture : ::testing::Test {
  BackendSet backends = simBackends();
  metrics::Registry registry;
  SchedulerMetrics metrics{registry};
  std::unique_ptr<Webhook> webhook = std::make_unique<Webhook>(backends, WebhookOptions{}, metrics);

  void configure(WebhookOptions options) { webhook = std::make_unique<Webhook>(backends, std::move(options), metrics); }

  /// The response object of a review of `pod` (CREATE).
  json::object review(const json::object& pod, const std::string& operation = "CREATE") {
    return reviewAs(pod, operation, "alice");
  }
  /// The same by `user`, with the pod as it was (UPDATE) and a subresource.
  json::object reviewAs(const json::object& pod, const std::string& operation, const std::string& user,
                        const json::value& oldPod = nullptr, const std::string& subResource = "") {
    json::object req{{"uid", "705ab4f5-6393-11e8-b7cc-42010a800002"},
                     {"kind", json::object{{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
                     {"resource", json::object{{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
                     {"namespace", "team-a"},
                     {"operation", operation},
                     {"userInfo", json::object{{"username", user}}},
                     {"object", pod},
                     {"oldObject", oldPod},
                     {"dryRun", false}};
    if (!subResource.empty()) req["subResource"] = subResource;
    http::Request r;
    r.method = "POST";
    r.path = "/webhook";
    r.body = json::serialize(json::object{{"apiVersion", "admission.k8s.io/v1"}, {"kind", "AdmissionReview"}, {"request", req}});
    http::Response resp = webhook->review(r);
    EXPECT_EQ(resp.status, 200) << resp.body;
    auto v = json::parse(resp.body).as_object();
    EXPECT_EQ(v.at("apiVersion"), "admission.k8s.io/v1");
    EXPECT_EQ(v.at("kind"), "AdmissionReview");
    auto response = v.at("response").as_object();
    EXPECT_EQ(response.at("uid"), "705ab4f5-6393-11e8-b7cc-42010a800002");
    EXPECT_EQ(response.contains("patch"), response.contains("patchType"));
    return response;
  }
  json::array patchOf(const json::object& response) {
    EXPECT_EQ(response.at("patchType"), "JSONPatch");
    auto text = base64Decode(response.at("patch").as_string());
    if (!text.ok()) {
      ADD_FAILURE() << text.error().message;
      return {};
    }
    return json::parse(*text).as_array();
  }
};

TEST_F(WebhookFixture, SchedulerWebhookSetsSchedulerNameAndBackendDefaults) {
  json::object pod = podJson("", "train", {{"main", {{"nvidia.com/gpu", "1"}}}}, "");
  auto response = review(pod);
  EXPECT_EQ(response.at("allowed"), true);
  auto patch = patchOf(response);
  bool scheduler = false;
  for (const auto& op : patch) {
    EXPECT_EQ(op.at("op"), "add");
    if (op.at("path") == "/spec/schedulerName") {
      scheduler = true;
      EXPECT_EQ(op.at("value"), "vgpu-scheduler");
    }
  }
  EXPECT_TRUE(scheduler) << patch;
}

TEST_F(WebhookFixture, SchedulerWebhookAddsMissingLimitsMapsWithEscapedPaths) {
  // A bare count with cores unset: the sim backend's defaults fill what a whole card means.
  json::object pod = podJson("", "train", {{"main", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1000"}}}}, "vgpu-scheduler");
  auto response = review(pod);
  EXPECT_EQ(response.at("allowed"), true);
  if (response.contains("patch")) {
    for (const auto& op : patchOf(response)) {
      const std::string path(op.at("path").as_string());
      EXPECT_EQ(path.find("/spec/containers/0/resources/limits/"), 0u) << path;
      EXPECT_EQ(path.find("nvidia.com/"), std::string::npos) << "'/' in a key must be escaped as ~1: " << path;
    }
  }
  EXPECT_EQ(jsonPointerEscape("nvidia.com/gpu~x"), "nvidia.com~1gpu~0x");
  EXPECT_EQ(base64Encode("ab"), "YWI=");
  EXPECT_EQ(base64Encode("abc"), "YWJj");
  EXPECT_EQ(base64Encode("abcd"), "YWJjZA==");
}

TEST_F(WebhookFixture, SchedulerWebhookLeavesOtherPodsUntouched) {
  struct Case {
    const char* description;
    json::object pod;
    std::string operation = "CREATE";
  };
  json::object optedOut = podJson("", "x", {{"main", {{"nvidia.com/gpu", "1"}}}}, "");
  optedOut["metadata"].as_object()["labels"] = json::object{{"vgpu.io/webhook", "ignore"}};
  std::vector<Case> cases{
      {"no managed resource", podJson("", "web", {{"main", {{"cpu", "1"}}}}, "")},
      {"another scheduler", podJson("", "x", {{"main", {{"nvidia.com/gpu", "1"}}}}, "volcano")},
      {"opted out by label", optedOut},
      {"an UPDATE", podJson("", "x", {{"main", {{"nvidia.com/gpu", "1"}}}}, ""), "UPDATE"},
  };
  for (auto& c : cases) {
    auto response = review(c.pod, c.operation);
    EXPECT_EQ(response.at("allowed"), true) << c.description;
    EXPECT_FALSE(response.contains("patch")) << c.description;
    EXPECT_FALSE(response.contains("patchType")) << c.description;
  }
}

TEST_F(WebhookFixture, SchedulerWebhookRefusesWhatCannotWorkWithAClearMessage) {
  json::object bound = podJson("", "x", {{"main", {{"nvidia.com/gpu", "1"}}}}, "");
  bound["spec"].as_object()["nodeName"] = "node-7";
  ContainerSpecForTest privileged{"main", {{"nvidia.com/gpu", "1"}}};
  privileged.privileged = true;
  struct Case {
    const char* description;
    json::object pod;
    std::string expect;
  } cases[] = {
      {"nodeName set", bound, "spec.nodeName=node-7"},
      {"privileged share", podJson("", "x", {privileged}, ""), "privileged"},
      {"cores over 100", podJson("", "x", {{"main", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpucores", "150"}}}}, ""), "150"},
      {"memory 0", podJson("", "x", {{"main", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "0"}}}}, ""), "0"},
  };
  for (auto& c : cases) {
    auto response = review(c.pod);
    EXPECT_EQ(response.at("allowed"), false) << c.description;
    ASSERT_TRUE(response.contains("status")) << c.description;
    const auto& status = response.at("status").as_object();
    const std::string message(status.at("message").as_string());
    EXPECT_NE(message.find(c.expect), std::string::npos) << c.description << ": " << message;
    EXPECT_GE(status.at("code").as_int64(), 400);
    EXPECT_FALSE(response.contains("patch"));
  }
  EXPECT_EQ(metrics.webhookReviews.value({"denied"}), 4);
}

TEST_F(WebhookFixture, SchedulerWebhookWarnsWhenInitContainersAskForWhatOldKubeletsReject) {
  // Kubelets before 1.31 strip resources the node does not advertise from app containers
  // only (kubernetes issue 124255): the pod is allowed, with a warning that says so.
  ContainerSpecForTest prep{"prep", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1000"}}};
  prep.init = true;
  ContainerSpecForTest main{"main", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "2000"}}};
  auto response = review(podJson("", "x", {prep, main}, ""));
  EXPECT_EQ(response.at("allowed"), true);
  EXPECT_FALSE(response.contains("status"));
  ASSERT_TRUE(response.contains("warnings")) << response;
  const auto& warnings = response.at("warnings").as_array();
  ASSERT_EQ(warnings.size(), 1u) << warnings;
  const std::string w(warnings[0].as_string());
  for (const char* part : {"init container \"prep\"", "nvidia.com/gpumem", "older than 1.31", "124255",
                           "OutOfnvidia.com/gpumem", "nvidia.com/gpu alone"})
    EXPECT_NE(w.find(part), std::string::npos) << part << " missing from: " << w;
  EXPECT_EQ(w.find("\"main\""), std::string::npos) << w;

  // The same when only the init container asks; each init container is named.
  ContainerSpecForTest warm{"warm", {{"nvidia.com/gpucores", "20"}}};
  warm.init = true;
  auto alone = review(podJson("", "y", {prep, warm, {"main", {{"cpu", "1"}}}}, ""));
  EXPECT_EQ(alone.at("allowed"), true);
  ASSERT_TRUE(alone.contains("warnings")) << alone;
  ASSERT_EQ(alone.at("warnings").as_array().size(), 2u);
  EXPECT_NE(std::string(alone.at("warnings").as_array()[1].as_string()).find("\"warm\" asks for nvidia.com/gpucores"),
            std::string::npos)
      << alone.at("warnings");
}

TEST_F(WebhookFixture, SchedulerWebhookGivesInitContainersOnlyTheDeviceCountDefault) {
  // A bare count means a whole device either way; writing cores 100 into an init container
  // would itself make kubelets before 1.31 reject the pod, so only app containers get it.
  ContainerSpecForTest prep{"prep", {{"nvidia.com/gpu", "1"}}};
  prep.init = true;
  auto response = review(podJson("", "x", {prep, {"main", {{"nvidia.com/gpu", "1"}}}}, ""));
  EXPECT_EQ(response.at("allowed"), true);
  EXPECT_FALSE(response.contains("warnings")) << response;
  bool mainCores = false;
  for (const auto& op : patchOf(response)) {
    const std::string path(op.at("path").as_string());
    EXPECT_EQ(path.find("/spec/initContainers/"), std::string::npos) << path;
    if (path == "/spec/containers/0/resources/limits/nvidia.com~1gpucores") mainCores = true;
  }
  EXPECT_TRUE(mainCores);

  // A memory-only init container still gets its count (advertised), and no warning is
  // made of what the webhook added itself.
  ContainerSpecForTest memOnly{"prep", {{"nvidia.com/gpumem", "1000"}}};
  memOnly.init = true;
  auto counted = review(podJson("", "y", {memOnly, {"main", {{"cpu", "1"}}}}, ""));
  bool count = false;
  for (const auto& op : patchOf(counted))
    if (op.at("path") == "/spec/initContainers/0/resources/limits/nvidia.com~1gpu") count = true;
  EXPECT_TRUE(count);
  ASSERT_TRUE(counted.contains("warnings"));
  EXPECT_EQ(counted.at("warnings").as_array().size(), 1u);
}

// nvidia.com/disable-control runs a container without libvgpu.so, out of its limits: the
// NVIDIA backend refuses it at admission unless the operator set allowOptOut (default false).
TEST(SchedulerWebhookNvidia, RefusesAnOptOutTheOperatorDidNotAllow) {
  auto verdict = [](const std::map<std::string, std::string>& options) {
    BackendParams params;
    params.name = "nvidia";
    params.settings.options = options;
    auto nvidia = loadBackend(backendLibraryPath(VGPU_BACKEND_DIR, "nvidia"), params);
    if (!nvidia.ok()) throw std::runtime_error(nvidia.error().message);
    BackendSet backends;
    (void)backends.add(std::move(nvidia).value());
    metrics::Registry registry;
    SchedulerMetrics metrics{registry};
    Webhook webhook{backends, WebhookOptions{}, metrics};
    json::object pod = podJson("", "debugger", {{"train", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "4000"}}}}, "",
                               json::object{{"nvidia.com/disable-control", "train"}});
    json::object req{{"uid", "u-1"},
                     {"kind", json::object{{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
                     {"namespace", "team-a"},
                     {"operation", "CREATE"},
                     {"object", pod}};
    http::Request r;
    r.body = json::serialize(json::object{{"apiVersion", "admission.k8s.io/v1"}, {"kind", "AdmissionReview"}, {"request", req}});
    http::Response resp = webhook.review(r);
    EXPECT_EQ(resp.status, 200) << resp.body;
    return json::parse(resp.body).as_object().at("response").as_object();
  };
  auto refused = verdict({});
  EXPECT_EQ(refused.at("allowed"), false);
  ASSERT_TRUE(refused.contains("status"));
  const std::string message(refused.at("status").as_object().at("message").as_string());
  EXPECT_NE(message.find("container \"train\""), std::string::npos) << message;
  EXPECT_NE(message.find("nvidia.com/disable-control"), std::string::npos) << message;
  EXPECT_NE(message.find("allowOptOut is false"), std::string::npos) << message;

  auto allowed = verdict({{"allowOptOut", "true"}});
  EXPECT_EQ(allowed.at("allowed"), true);
}

/// `pod` with `env` (and `envFrom`) set on its container `index` of `group`.
json::object withEnv(json::object pod, const char* group, size_t index, json::array env, json::array envFrom = {}) {
  auto& c = pod["spec"].as_object()[group].as_array()[index].as_object();
  if (!env.empty()) c["env"] = std::move(env);
  if (!envFrom.empty()) c["envFrom"] = std::move(envFrom);
  return pod;
}
json::object var(const std::string& name, const std::string& value = "x") {
  return json::object{{"name", name}, {"value", value}};
}

std::string messageOf(const json::object& response) {
  if (!response.contains("status")) return {};
  return std::string(response.at("status").as_object().at("message").as_string());
}

// Issue 26 item 3: a pod may not choose its own devices or limits through the environment.
// The sim backend declares VGPU_SIM_VISIBLE_DEVICES for every container and its limits for
// containers that ask for it (SimBackend::protectedEnv), as the real backends do theirs.
TEST_F(WebhookFixture, SchedulerWebhookSecurityRefusesProtectedEnvNamingContainerAndVariable) {
  const std::map<std::string, std::string> gpu{{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1000"}};
  json::object cpuOnly = podJson("", "web", {{"main", {{"cpu", "1"}}}}, "");
  json::object gpuPod = podJson("", "train", {{"main", gpu}}, "");
  json::object optedOut = withEnv(cpuOnly, "containers", 0, {var("VGPU_SIM_VISIBLE_DEVICES", "all")});
  optedOut["metadata"].as_object()["labels"] = json::object{{"vgpu.io/webhook", "ignore"}, {"hami.io/webhook", "ignore"}};
  optedOut["spec"].as_object()["schedulerName"] = "volcano";
  ContainerSpecForTest prep{"prep", {{"cpu", "1"}}};
  prep.init = true;
  struct Case {
    const char* description;
    json::object pod;
    std::vector<std::string> expect;
  } cases[] = {
      {"a pod without a device request names devices", withEnv(cpuOnly, "containers", 0, {var("VGPU_SIM_VISIBLE_DEVICES", "all")}),
       {"container \"main\" sets VGPU_SIM_VISIBLE_DEVICES"}},
      {"a device pod sets its own limit (a prefix family)", withEnv(gpuPod, "containers", 0, {var("PATH", "/bin"), var("VGPU_SIM_MEMORY_LIMIT_0", "80g")}),
       {"container \"main\" sets VGPU_SIM_MEMORY_LIMIT_0"}},
      {"valueFrom is judged by the name", withEnv(gpuPod, "containers", 0, {json::object{{"name", "VGPU_SIM_CORE_LIMIT"},
           {"valueFrom", json::object{{"configMapKeyRef", json::object{{"name", "cfg"}, {"key", "cores"}}}}}}}),
       {"container \"main\" sets VGPU_SIM_CORE_LIMIT"}},
      {"an init container", withEnv(podJson("", "x", {prep, {"main", gpu}}, ""), "initContainers", 0, {var("VGPU_SIM_VISIBLE_DEVICES")}),
       {"init container \"prep\" sets VGPU_SIM_VISIBLE_DEVICES"}},
      {"envFrom with a prefix that can form one", withEnv(gpuPod, "containers", 0, {}, {json::object{{"prefix", "VGPU_SIM_"},
           {"configMapRef", json::object{{"name", "limits"}}}}}),
       {"container \"main\" takes envFrom with prefix VGPU_SIM_"}},
      {"opt-out labels, another scheduler: not honoured for this", optedOut, {"VGPU_SIM_VISIBLE_DEVICES"}},
      {"every finding is named", withEnv(gpuPod, "containers", 0, {var("VGPU_SIM_VISIBLE_DEVICES"), var("VGPU_SIM_CORE_LIMIT")}),
       {"sets VGPU_SIM_VISIBLE_DEVICES", "sets VGPU_SIM_CORE_LIMIT", "remove them"}},
  };
  for (auto& c : cases) {
    auto response = review(c.pod);
    EXPECT_EQ(response.at("allowed"), false) << c.description;
    const std::string message = messageOf(response);
    for (const auto& part : c.expect) EXPECT_NE(message.find(part), std::string::npos) << c.description << ": " << message;
    if (response.contains("status")) {
      EXPECT_EQ(response.at("status").as_object().at("code"), 403) << c.description;
    }
    EXPECT_FALSE(response.contains("patch")) << c.description;
  }

  // What stays allowed: a limiter variable where the container has no such device, an envFrom
  // that cannot be inspected (no prefix), and the node agent's own pods.
  json::object agent = withEnv(cpuOnly, "containers", 0, {var("VGPU_SIM_VISIBLE_DEVICES", "all")});
  agent["spec"].as_object()["serviceAccountName"] = "vgpu-device-plugin";
  struct Allowed {
    const char* description;
    json::object pod;
  } allowed[] = {
      {"a limit variable in a container without the device", withEnv(cpuOnly, "containers", 0, {var("VGPU_SIM_CORE_LIMIT", "5")})},
      {"envFrom without a prefix", withEnv(gpuPod, "containers", 0, {}, {json::object{{"configMapRef", json::object{{"name", "c"}}}}})},
      {"the node agent's pod (its service account is trusted)", agent},
  };
  configure({"vgpu-scheduler", EnvPolicy::kRefuse, {"system:serviceaccount:team-a:vgpu-device-plugin"}});
  for (auto& a : allowed) {
    auto response = review(a.pod);
    EXPECT_EQ(response.at("allowed"), true) << a.description << ": " << messageOf(response);
  }
  // The same service account name in another namespace is somebody else's.
  configure({"vgpu-scheduler", EnvPolicy::kRefuse, {"system:serviceaccount:vgpu:vgpu-device-plugin"}});
  EXPECT_EQ(review(agent).at("allowed"), false);
}

TEST_F(WebhookFixture, SchedulerWebhookSecurityStripsProtectedEnvWhenConfigured) {
  configure({"vgpu-scheduler", EnvPolicy::kStrip, {}});
  json::object pod = withEnv(podJson("", "train", {{"main", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1000"}}}}, ""),
                             "containers", 0,
                             {var("VGPU_SIM_CORE_LIMIT"), var("PATH", "/bin"), var("VGPU_SIM_VISIBLE_DEVICES")},
                             {json::object{{"configMapRef", json::object{{"name", "a"}}}},
                              json::object{{"prefix", "VGPU_SIM_MEMORY"}, {"configMapRef", json::object{{"name", "b"}}}}});
  auto response = review(pod);
  EXPECT_EQ(response.at("allowed"), true) << messageOf(response);
  std::vector<std::string> removed;
  for (const auto& op : patchOf(response))
    if (op.at("op") == "remove") removed.emplace_back(op.at("path").as_string());
  // Highest index first within an array, so each removal leaves the next index valid.
  EXPECT_EQ(removed, (std::vector<std::string>{"/spec/containers/0/env/2", "/spec/containers/0/env/0",
                                               "/spec/containers/0/envFrom/1"}));
  ASSERT_TRUE(response.contains("warnings"));
  const std::string warnings = json::serialize(response.at("warnings"));
  for (const char* part : {"VGPU_SIM_CORE_LIMIT", "VGPU_SIM_VISIBLE_DEVICES", "prefix VGPU_SIM_MEMORY", "container \\\"main\\\""})
    EXPECT_NE(warnings.find(part), std::string::npos) << part << " missing from " << warnings;

  EXPECT_EQ(parseEnvPolicy("strip").value(), EnvPolicy::kStrip);
  EXPECT_EQ(parseEnvPolicy("refuse").value(), EnvPolicy::kRefuse);
  ASSERT_FALSE(parseEnvPolicy("ignore").ok());
  EXPECT_NE(parseEnvPolicy("ignore").error().message.find("\"ignore\""), std::string::npos);
}

TEST_F(WebhookFixture, SchedulerWebhookSecurityChecksEphemeralContainersAsTheyAreAdded) {
  json::object before = podJson("", "x", {{"main", {{"cpu", "1"}}}}, "");
  before["spec"].as_object()["ephemeralContainers"] = json::array{json::object{{"name", "old"}, {"image", "busybox"}}};
  json::object after = before;
  after["spec"].as_object()["ephemeralContainers"].as_array().push_back(
      json::object{{"name", "debug"}, {"image", "busybox"}, {"env", json::array{var("VGPU_SIM_VISIBLE_DEVICES", "all")}}});
  auto refused = reviewAs(after, "UPDATE", "alice", before, "ephemeralcontainers");
  EXPECT_EQ(refused.at("allowed"), false);
  EXPECT_NE(messageOf(refused).find("ephemeral container \"debug\" sets VGPU_SIM_VISIBLE_DEVICES"), std::string::npos)
      << messageOf(refused);
  json::object clean = before;
  clean["spec"].as_object()["ephemeralContainers"].as_array().push_back(json::object{{"name", "debug"}, {"image", "busybox"}});
  EXPECT_EQ(reviewAs(clean, "UPDATE", "alice", before, "ephemeralcontainers").at("allowed"), true);
}

// Issue 26 item 4: vgpu.io/assignment and its siblings are written by vgpu-scheduler and the
// node agent only. A user's copies are removed at create, a user's changes refused at update.
TEST_F(WebhookFixture, SchedulerWebhookSecurityRemovesReservedAnnotationsOthersCreate) {
  const std::string scheduler = "system:serviceaccount:vgpu:vgpu-scheduler";
  configure({"vgpu-scheduler", EnvPolicy::kRefuse, {scheduler}});
  json::object ann;
  for (std::string_view key : keys::kReservedPodAnnotations) ann[key] = "forged";
  ann["vgpu.io/node-scheduler-policy"] = "spread";  // the user's to set
  json::object squatter = podJson("", "squatter", {{"main", {{"cpu", "1"}}}}, "", ann);
  squatter["spec"].as_object()["nodeName"] = "n1";
  auto response = reviewAs(squatter, "CREATE", "alice");
  EXPECT_EQ(response.at("allowed"), true);
  std::set<std::string> removed;
  for (const auto& op : patchOf(response)) {
    EXPECT_EQ(op.at("op"), "remove");
    removed.emplace(op.at("path").as_string());
  }
  EXPECT_EQ(removed, (std::set<std::string>{"/metadata/annotations/vgpu.io~1assignment", "/metadata/annotations/vgpu.io~1bind-phase",
                                            "/metadata/annotations/vgpu.io~1bind-time", "/metadata/annotations/vgpu.io~1allocate-error",
                                            "/metadata/annotations/vgpu.io~1capacity-freed"}));
  ASSERT_TRUE(response.contains("warnings"));
  EXPECT_NE(json::serialize(response.at("warnings")).find("removed annotation vgpu.io/assignment"), std::string::npos);
  // A pod opted out of the webhook by label loses them too.
  squatter["metadata"].as_object()["labels"] = json::object{{"vgpu.io/webhook", "ignore"}};
  EXPECT_TRUE(reviewAs(squatter, "CREATE", "alice").contains("patch"));
  // Our own service account's are kept.
  auto ours = reviewAs(squatter, "CREATE", scheduler);
  EXPECT_EQ(ours.at("allowed"), true);
  EXPECT_FALSE(ours.contains("patch"));
}

// Issue 28 item 1: HAMi's opt-out label (pods; namespaces through the chart's selector)
// skips placement as ours does, and, like ours, none of the security checks.
TEST_F(WebhookFixture, SchedulerWebhookSecurityHamisOptOutLabelSkipsPlacementOnly) {
  json::object pod = podJson("", "x", {{"main", {{"nvidia.com/gpu", "1"}}}}, "");
  pod["metadata"].as_object()["labels"] = json::object{{"hami.io/webhook", "ignore"}};
  auto untouched = review(pod);
  EXPECT_EQ(untouched.at("allowed"), true);
  EXPECT_FALSE(untouched.contains("patch")) << "no scheduler name, no defaults";
  // Another value is not an opt-out.
  pod["metadata"].as_object()["labels"] = json::object{{"hami.io/webhook", "yes"}};
  EXPECT_TRUE(review(pod).contains("patch"));

  pod["metadata"].as_object()["labels"] = json::object{{"hami.io/webhook", "ignore"}};
  pod["metadata"].as_object()["annotations"] = json::object{{std::string(keys::kPodAssignment), "forged"}};
  auto forged = review(pod);
  EXPECT_EQ(forged.at("allowed"), true);
  const json::array patch = patchOf(forged);
  ASSERT_EQ(patch.size(), 1u) << patch;
  EXPECT_EQ(patch[0].at("op"), "remove");
  EXPECT_EQ(patch[0].at("path"), "/metadata/annotations/vgpu.io~1assignment");

  auto env = review(withEnv(pod, "containers", 0, {var("VGPU_SIM_VISIBLE_DEVICES", "all")}));
  EXPECT_EQ(env.at("allowed"), false);
  EXPECT_NE(messageOf(env).find("sets VGPU_SIM_VISIBLE_DEVICES"), std::string::npos) << messageOf(env);
}

// Issue 28 item 7: HAMi clamps gpucores above 100 to 100. vgpu refuses it, except in
// HAMi-compatibility mode, where it becomes 100 with a warning that says so.
TEST_F(WebhookFixture, SchedulerWebhookHamiCompatTakesCoresAbove100AsTheWholeDevice) {
  json::object pod = podJson("", "x", {{"main", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1000"},
                                                 {"nvidia.com/gpucores", "150"}}}}, "");
  auto& resources = pod["spec"].as_object()["containers"].as_array()[0].as_object()["resources"].as_object();
  resources["requests"] = json::object{{"nvidia.com/gpucores", "150"}};
  auto refused = review(pod);
  EXPECT_EQ(refused.at("allowed"), false);
  EXPECT_NE(messageOf(refused).find("nvidia.com/gpucores must be between 0 and 100, got 150"), std::string::npos)
      << messageOf(refused);

  WebhookOptions compat;
  compat.hamiCompat = true;
  configure(compat);
  auto taken = review(pod);
  EXPECT_EQ(taken.at("allowed"), true);
  std::set<std::string> replaced;
  for (const auto& op : patchOf(taken))
    if (op.at("op") == "replace") {
      EXPECT_EQ(op.at("value"), "100");
      replaced.emplace(op.at("path").as_string());
    }
  EXPECT_EQ(replaced, (std::set<std::string>{"/spec/containers/0/resources/limits/nvidia.com~1gpucores",
                                             "/spec/containers/0/resources/requests/nvidia.com~1gpucores"}));
  ASSERT_TRUE(taken.contains("warnings"));
  ASSERT_EQ(taken.at("warnings").as_array().size(), 1u);
  EXPECT_EQ(taken.at("warnings").as_array()[0].as_string(),
            "vgpu: container \"main\" asks for nvidia.com/gpucores 150, above 100; in HAMi-compatibility mode it is "
            "set to 100 (the whole device's compute), as HAMi does");
  // 100 and below, and other resources above 100, are not touched.
  auto& limits = resources["limits"].as_object();
  limits["nvidia.com/gpucores"] = "100";
  resources.erase("requests");
  limits["nvidia.com/gpumem"] = "150";
  auto plain = review(pod);
  EXPECT_EQ(plain.at("allowed"), true);
  EXPECT_FALSE(plain.contains("warnings"));
  for (const auto& op : patchOf(plain)) EXPECT_NE(op.at("op"), "replace") << op;
}

TEST_F(WebhookFixture, SchedulerWebhookSecurityRefusesOthersChangesToReservedAnnotations) {
  const std::string agent = "system:serviceaccount:vgpu:vgpu-device-plugin";
  configure({"vgpu-scheduler", EnvPolicy::kRefuse, {agent}});
  json::object bound = podJson("", "x", {{"main", {{"nvidia.com/gpu", "1"}}}}, "vgpu-scheduler",
                               json::object{{"vgpu.io/assignment", "{\"real\":1}"}, {"vgpu.io/bind-phase", "allocating"}});
  auto changed = [&](const char* key, const json::value& value) {
    json::object pod = bound;
    auto& a = pod["metadata"].as_object()["annotations"].as_object();
    if (value.is_null()) a.erase(key); else a[key] = value;
    return pod;
  };
  struct Case {
    const char* description;
    json::object pod;
    std::string expect;
  } cases[] = {
      {"forging an assignment", changed("vgpu.io/assignment", "{\"forged\":1}"), "may not set annotation vgpu.io/assignment"},
      {"removing one", changed("vgpu.io/bind-phase", nullptr), "may not remove annotation vgpu.io/bind-phase"},
      {"adding one", changed("vgpu.io/capacity-freed", "n1"), "may not set annotation vgpu.io/capacity-freed"},
  };
  for (auto& c : cases) {
    auto response = reviewAs(c.pod, "UPDATE", "alice", bound);
    EXPECT_EQ(response.at("allowed"), false) << c.description;
    EXPECT_NE(messageOf(response).find(c.expect), std::string::npos) << c.description << ": " << messageOf(response);
    EXPECT_NE(messageOf(response).find("user \"alice\""), std::string::npos) << messageOf(response);
  }
  // Other changes pass; the node agent's changes pass.
  json::object relabelled = bound;
  relabelled["metadata"].as_object()["labels"] = json::object{{"team", "a"}};
  EXPECT_EQ(reviewAs(relabelled, "UPDATE", "alice", bound).at("allowed"), true);
  auto confirmed = reviewAs(changed("vgpu.io/bind-phase", "success"), "UPDATE", agent, bound);
  EXPECT_EQ(confirmed.at("allowed"), true);
  EXPECT_FALSE(confirmed.contains("patch"));
}

TEST(SchedulerWebhookOptions, TrustedUsersParseAndBadEntriesAreNamed) {
  EXPECT_TRUE(parseTrustedUsers("").value().empty());
  EXPECT_EQ(parseTrustedUsers(" system:serviceaccount:a:b , system:serviceaccount:a:c").value(),
            (std::vector<std::string>{"system:serviceaccount:a:b", "system:serviceaccount:a:c"}));
  auto empty = parseTrustedUsers("a,,b");
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.error().message.find("entry 2"), std::string::npos) << empty.error().message;
  auto spaced = parseTrustedUsers("system:serviceaccount:a b");
  ASSERT_FALSE(spaced.ok());
  EXPECT_NE(spaced.error().message.find("\"system:serviceaccount:a b\""), std::string::npos);
}

// The real backends declare their variables (vendor names stay in backends/): NVIDIA's
// visibility variable in any container; the driver cap, LD_PRELOAD and the limiter's
// variables (HAMi-core's included) in containers that ask for NVIDIA resources; Cambricon's.
TEST(SchedulerWebhookRealBackends, SecurityRefusesEachBackendsProtectedVariables) {
  BackendSet backends;
  for (const char* name : {"nvidia", "cambricon", "hygon"}) {
    BackendParams params;
    params.name = name;
    auto b = loadBackend(backendLibraryPath(VGPU_BACKEND_DIR, name), params);
    ASSERT_TRUE(b.ok()) << name << ": " << b.error().message;
    ASSERT_TRUE(backends.add(std::move(b).value()).ok());
  }
  metrics::Registry registry;
  SchedulerMetrics metrics{registry};
  Webhook webhook{backends, WebhookOptions{}, metrics};
  auto allowed = [&](const std::map<std::string, std::string>& limits, const std::string& variable) {
    json::object pod = withEnv(podJson("", "p", {{"main", limits}}, ""), "containers", 0, {var(variable)});
    json::object req{{"uid", "u-1"}, {"kind", json::object{{"kind", "Pod"}}}, {"namespace", "team-a"},
                     {"operation", "CREATE"}, {"userInfo", json::object{{"username", "alice"}}}, {"object", pod}};
    http::Request r;
    r.body = json::serialize(json::object{{"apiVersion", "admission.k8s.io/v1"}, {"kind", "AdmissionReview"}, {"request", req}});
    auto response = json::parse(webhook.review(r).body).as_object().at("response").as_object();
    if (!response.at("allowed").as_bool()) {
      EXPECT_NE(messageOf(response).find("container \"main\" sets " + variable), std::string::npos) << messageOf(response);
    }
    return response.at("allowed").as_bool();
  };
  const std::map<std::string, std::string> none{{"cpu", "1"}}, gpu{{"nvidia.com/gpu", "1"}}, mlu{{"cambricon.com/vmlu", "1"}};
  for (const char* v : {"NVIDIA_VISIBLE_DEVICES", "CAMBRICON_VISIBLE_DEVICES"}) {
    EXPECT_FALSE(allowed(none, v)) << v;
    EXPECT_FALSE(allowed(gpu, v)) << v;
  }
  for (const char* v : {"NVIDIA_GPU_MEMORY_LIMIT", "NVIDIA_GPU_MEMORY_REQUEST", "LD_PRELOAD", "CUDA_DEVICE_MEMORY_LIMIT",
                        "CUDA_DEVICE_MEMORY_LIMIT_0", "CUDA_DEVICE_SM_LIMIT", "CUDA_DEVICE_SM_LIMIT_3",
                        "CUDA_DEVICE_MEMORY_SHARED_CACHE", "CUDA_OVERSUBSCRIBE", "CUDA_TASK_PRIORITY",
                        "GPU_CORE_UTILIZATION_POLICY", "VGPU_ACTIVITY_BOARD", "VGPU_LIMITS_FILE", "CUDA_DISABLE_CONTROL",
                        "CUDA_REDIRECT"}) {
    EXPECT_FALSE(allowed(gpu, v)) << v;
    EXPECT_TRUE(allowed(none, v)) << v << " in a container without a GPU limits nothing";
  }
  EXPECT_FALSE(allowed(mlu, "VIRTUAL_DEVICES"));
  EXPECT_TRUE(allowed(gpu, "LIBVGPU_LOG_LEVEL"));  // diagnostics only
  EXPECT_TRUE(allowed(gpu, "CUDA_VISIBLE_DEVICES"));  // narrows what the container was given
}

TEST_F(WebhookFixture, SchedulerWebhookMalformedReviewsAre400) {
  for (const char* body : {"", "[]", R"({"apiVersion":"admission.k8s.io/v1beta1","request":{"uid":"u"}})",
                           R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"})",
                           R"({"apiVersion":"admission.k8s.io/v1","request":{"operation":"CREATE"}})"}) {
    http::Request r;
    r.body = body;
    EXPECT_EQ(webhook->review(r).status, 400) << body;
  }
}

}  // namespace
}  // namespace vgpu::scheduler
