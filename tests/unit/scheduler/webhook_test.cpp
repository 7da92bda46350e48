// The mutating webhook: AdmissionReview v1 in and out, JSONPatch in base64, the refusals.
#include <gtest/gtest.h>

#include "scheduler_harness.h"
#include "vgpu/codec/base64.h"
#include "webhook.h"

namespace vgpu::scheduler {
namespace {

using namespace vgpu::testing;

struct WebhookFixture : ::testing::Test {
  BackendSet backends = simBackends();
  metrics::Registry registry;
  SchedulerMetrics metrics{registry};
  Webhook webhook{backends, "vgpu-scheduler", metrics};

  /// The response object of a review of `pod` (CREATE).
  json::object review(const json::object& pod, const std::string& operation = "CREATE") {
    json::object req{{"uid", "705ab4f5-6393-11e8-b7cc-42010a800002"},
                     {"kind", json::object{{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
                     {"resource", json::object{{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
                     {"namespace", "team-a"},
                     {"operation", operation},
                     {"userInfo", json::object{{"username", "alice"}}},
                     {"object", pod},
                     {"oldObject", nullptr},
                     {"dryRun", false}};
    http::Request r;
    r.method = "POST";
    r.path = "/webhook";
    r.body = json::serialize(json::object{{"apiVersion", "admission.k8s.io/v1"}, {"kind", "AdmissionReview"}, {"request", req}});
    http::Response resp = webhook.review(r);
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
    Webhook webhook{backends, "vgpu-scheduler", metrics};
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

TEST_F(WebhookFixture, SchedulerWebhookMalformedReviewsAre400) {
  for (const char* body : {"", "[]", R"({"apiVersion":"admission.k8s.io/v1beta1","request":{"uid":"u"}})",
                           R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"})",
                           R"({"apiVersion":"admission.k8s.io/v1","request":{"operation":"CREATE"}})"}) {
    http::Request r;
    r.body = body;
    EXPECT_EQ(webhook.review(r).status, 400) << body;
  }
}

}  // namespace
}  // namespace vgpu::scheduler
