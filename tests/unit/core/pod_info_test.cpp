#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "vgpu/pod_info.h"
#include "vgpu/yaml_json.h"

namespace vgpu {
namespace {

using ::testing::HasSubstr;

Result<PodInfo> parseYaml(const std::string& yaml) {
  auto docs = yamlDocumentsToJson(yaml, "test.yaml");
  if (!docs.ok()) return std::move(docs).error();
  if (docs->size() != 1) return makeError("expected one document");
  return parsePod((*docs)[0]);
}

TEST(PodInfo, ReadsPriorityAndNominatedNode) {
  auto pod = parseYaml(R"(
metadata: {name: p}
spec: {priority: -5, containers: []}
status: {phase: Pending, nominatedNodeName: n7}
)");
  ASSERT_TRUE(pod.ok()) << pod.error().message;
  EXPECT_EQ(pod->priority, -5);
  EXPECT_EQ(pod->nominatedNodeName, "n7");
  auto plain = parseYaml("metadata: {name: p}\nspec: {containers: []}\n");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->priority, 0);
  EXPECT_EQ(plain->nominatedNodeName, "");
}

TEST(PodInfo, RefusesAPriorityThatIsNotA32BitInteger) {
  for (const char* bad : {"\"high\"", "1.5", "4294967296"}) {
    auto pod = parseYaml(std::string("metadata: {name: p}\nspec: {priority: ") + bad + ", containers: []}\n");
    ASSERT_FALSE(pod.ok()) << bad;
    EXPECT_THAT(pod.error().message, HasSubstr("spec.priority")) << bad;
  }
}

TEST(PodInfo, ReadsContainersInitFirstWithExtendedResourcesOnly) {
  auto pod = parseYaml(R"(
kind: Pod
metadata: {name: p, namespace: ns, uid: u-1, annotations: {a: "1"}, labels: {app: x}}
spec:
  nodeName: n1
  schedulerName: vgpu-scheduler
  containers:
    - name: main
      resources:
        limits: {nvidia.com/gpu: 2, nvidia.com/gpumem: "3Gi", cpu: 500m, memory: 1Gi}
        requests: {nvidia.com/gpucores: 30, nvidia.com/gpu: 1}
  initContainers:
    - name: warm
      resources: {limits: {nvidia.com/gpu: "1"}}
status: {phase: Running}
)");
  ASSERT_TRUE(pod.ok()) << pod.error().message;
  EXPECT_EQ(pod->key(), "ns/p");
  EXPECT_EQ(pod->uid, "u-1");
  EXPECT_EQ(pod->nodeName, "n1");
  EXPECT_EQ(pod->schedulerName, "vgpu-scheduler");
  EXPECT_EQ(pod->phase, "Running");
  EXPECT_EQ(pod->annotations.at("a"), "1");
  EXPECT_EQ(pod->labels.at("app"), "x");
  ASSERT_EQ(pod->containers.size(), 2u);
  EXPECT_EQ(pod->containers[0].name, "warm");
  EXPECT_TRUE(pod->containers[0].init);
  const auto& main = pod->containers[1].limits;
  EXPECT_EQ(main.at("nvidia.com/gpu"), 2);  // the limit wins over the request
  EXPECT_EQ(main.at("nvidia.com/gpumem"), 3221225472);
  EXPECT_EQ(main.at("nvidia.com/gpucores"), 30);  // only requested: taken from requests
  EXPECT_FALSE(main.contains("cpu"));
}

TEST(PodInfo, RefusesMalformedPodsNamingTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {"kind: Pod\nspec: {}", "no metadata"},
      {"kind: Pod\nmetadata: {namespace: x}\nspec: {}", "metadata.name is missing"},
      {"kind: Pod\nmetadata: {name: p}", "pod default/p: no spec"},
      {"kind: Pod\nmetadata: {name: p}\nspec: {containers: {}}", "spec.containers: expected a list"},
      {"kind: Pod\nmetadata: {name: p}\nspec: {containers: [{resources: {}}]}", "container has no name"},
      {"kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, resources: {limits: {a.com/x: 1.5}}}]}",
       "resources.limits.a.com/x: must be an integer"},
      {"kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, resources: {limits: {a.com/x: \"2KB\"}}}]}",
       "resources.limits.a.com/x"},
      {"kind: Pod\nmetadata: {name: p, annotations: {a: [1]}}\nspec: {}", "metadata.annotations.a: expected a string"},
  };
  for (const auto& [yaml, expected] : cases) {
    auto pod = parseYaml(yaml);
    ASSERT_FALSE(pod.ok()) << yaml;
    EXPECT_THAT(pod.error().message, HasSubstr(expected)) << yaml;
  }
  EXPECT_FALSE(parsePod(boost::json::value(42)).ok());
}

TEST(YamlJson, KeepsQuotedScalarsAsStringsAndSkipsEmptyDocuments) {
  auto docs = yamlDocumentsToJson("a: 1\nb: \"1\"\nc: true\nd: ~\ne: 1.5\n---\n---\nx: y\n", "t");
  ASSERT_TRUE(docs.ok());
  ASSERT_EQ(docs->size(), 2u);
  const auto& o = (*docs)[0].as_object();
  EXPECT_TRUE(o.at("a").is_int64());
  EXPECT_TRUE(o.at("b").is_string());
  EXPECT_TRUE(o.at("c").is_bool());
  EXPECT_TRUE(o.at("d").is_null());
  EXPECT_TRUE(o.at("e").is_double());
  auto bad = yamlDocumentsToJson("a: [1, 2", "broken.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.error().message, HasSubstr("broken.yaml"));
}

}  // namespace
}  // namespace vgpu

#include "vgpu/virtual_device_id.h"

namespace vgpu {
namespace {

TEST(VirtualDeviceId, RoundTripsAndRefusesMalformedIds) {
  EXPECT_EQ(formatVirtualDeviceId("GPU-1::x", 3), "GPU-1::x::3");
  EXPECT_EQ(parseVirtualDeviceId("GPU-1::x::3"), (VirtualDeviceId{"GPU-1::x", 3}));
  for (const char* bad : {"GPU-1", "::3", "GPU-1::", "GPU-1::-1", "GPU-1::3a", "GPU-1::99999", ""})
    EXPECT_FALSE(parseVirtualDeviceId(bad).has_value()) << bad;
}

}  // namespace
}  // namespace vgpu
