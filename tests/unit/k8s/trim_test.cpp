// The informers' transforms keep every field vgpu reads and drop the bulk; an informer with a
// transform caches the cut-down objects from both the list and the watch.

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include "test_support.h"
#include "vgpu/annotations.h"
#include "vgpu/k8s/informer.h"
#include "vgpu/k8s/object.h"
#include "vgpu/k8s/trim.h"
#include "vgpu/pod_info.h"

namespace vgpu::k8s {
namespace {

namespace json = boost::json;
using testing::clientFor;
using testing::eventually;
using testing::startServer;

/// A pod as the apiserver sends it, with what kubectl, the kubelet and field managers add.
json::object fullPod() {
  return json::parse(R"({
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {
      "name": "train-0", "namespace": "ml", "uid": "u-1", "resourceVersion": "42",
      "generateName": "train-", "creationTimestamp": "2026-01-02T03:04:05Z",
      "deletionTimestamp": "2026-01-02T04:00:00Z", "deletionGracePeriodSeconds": 30,
      "labels": {"app": "train"},
      "annotations": {
        "vgpu.io/assignment": "opaque", "vgpu.io/bind-phase": "success",
        "vgpu.io/bind-time": "2026-01-02T03:04:06Z", "nvidia.com/use-gputype": "A100",
        "kubectl.kubernetes.io/last-applied-configuration": "{\"huge\": \"copy of the spec\"}"
      },
      "ownerReferences": [{"kind": "Job", "name": "train", "uid": "j"}],
      "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}]
    },
    "spec": {
      "nodeName": "n1", "schedulerName": "vgpu-scheduler", "priority": 100,
      "serviceAccountName": "default", "tolerations": [{"key": "k"}],
      "volumes": [{"name": "v", "emptyDir": {}}],
      "initContainers": [
        {"name": "fetch", "image": "busybox", "command": ["sh"],
         "resources": {"limits": {"nvidia.com/gpu": "1"}}},
        {"name": "proxy", "image": "envoy", "restartPolicy": "Always", "env": [{"name": "A", "value": "b"}]}
      ],
      "containers": [
        {"name": "main", "image": "pytorch", "args": ["train.py"],
         "env": [{"name": "X", "value": "y"}], "volumeMounts": [{"name": "v", "mountPath": "/v"}],
         "livenessProbe": {"exec": {"command": ["true"]}},
         "resources": {"requests": {"cpu": "1", "nvidia.com/gpumem": "1000"},
                       "limits": {"nvidia.com/gpu": "2", "memory": "1Gi"}}}
      ]
    },
    "status": {
      "phase": "Running", "podIP": "10.0.0.1", "qosClass": "Burstable", "nominatedNodeName": "n2",
      "conditions": [{"type": "Ready", "status": "True"}],
      "initContainerStatuses": [
        {"name": "fetch", "image": "busybox", "imageID": "sha256:x", "containerID": "containerd://1",
         "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}
      ],
      "containerStatuses": [
        {"name": "main", "image": "pytorch", "ready": true, "restartCount": 0, "containerID": "containerd://2",
         "state": {"running": {"startedAt": "2026-01-02T03:05:00Z"}}}
      ]
    }
  })").as_object();
}

json::object fullNode() {
  return json::parse(R"({
    "apiVersion": "v1", "kind": "Node",
    "metadata": {
      "name": "n1", "uid": "nu", "resourceVersion": "7",
      "labels": {"kubernetes.io/hostname": "n1"},
      "annotations": {"vgpu.io/devices-sim": "inventory", "vgpu.io/heartbeat": "2026-01-02T03:04:05Z",
                      "vgpu.io/device-cordon": "GPU-1", "csi.volume.kubernetes.io/nodeid": "{}",
                      "kubectl.kubernetes.io/last-applied-configuration": "{}"},
      "managedFields": [{"manager": "kubelet"}]
    },
    "spec": {"podCIDR": "10.0.0.0/24"},
    "status": {"capacity": {"cpu": "8"}, "images": [{"names": ["a"], "sizeBytes": 1}],
               "conditions": [{"type": "Ready"}]}
  })").as_object();
}

TEST(K8sTrim, PodKeepsEveryFieldVgpuReadsAndDropsTheRest) {
  json::object trimmed = trimPod(fullPod());
  EXPECT_EQ(json::serialize(trimmed), json::serialize(json::parse(R"({
    "metadata": {
      "name": "train-0", "namespace": "ml", "uid": "u-1", "resourceVersion": "42",
      "creationTimestamp": "2026-01-02T03:04:05Z", "deletionTimestamp": "2026-01-02T04:00:00Z",
      "annotations": {"vgpu.io/assignment": "opaque", "vgpu.io/bind-phase": "success",
                      "vgpu.io/bind-time": "2026-01-02T03:04:06Z", "nvidia.com/use-gputype": "A100"}
    },
    "spec": {
      "nodeName": "n1", "schedulerName": "vgpu-scheduler", "priority": 100,
      "initContainers": [{"name": "fetch", "resources": {"limits": {"nvidia.com/gpu": "1"}}},
                         {"name": "proxy", "restartPolicy": "Always"}],
      "containers": [{"name": "main", "resources": {"requests": {"nvidia.com/gpumem": "1000"},
                                                     "limits": {"nvidia.com/gpu": "2"}}}]
    },
    "status": {
      "phase": "Running", "nominatedNodeName": "n2",
      "initContainerStatuses": [{"name": "fetch", "containerID": "containerd://1",
                                 "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}],
      "containerStatuses": [{"name": "main", "containerID": "containerd://2"}]
    }
  })")));
}

TEST(K8sTrim, PodParsesTheSameTrimmedAsWhole) {
  auto whole = parsePod(json::value(fullPod()));
  auto cut = parsePod(json::value(trimPod(fullPod())));
  ASSERT_TRUE(whole.ok());
  ASSERT_TRUE(cut.ok());
  EXPECT_EQ(cut->key(), whole->key());
  EXPECT_EQ(cut->uid, whole->uid);
  EXPECT_EQ(cut->nodeName, whole->nodeName);
  EXPECT_EQ(cut->schedulerName, whole->schedulerName);
  EXPECT_EQ(cut->phase, whole->phase);
  EXPECT_EQ(cut->deleting, whole->deleting);
  EXPECT_EQ(cut->priority, 100);
  EXPECT_EQ(cut->priority, whole->priority);
  EXPECT_EQ(cut->nominatedNodeName, "n2");
  EXPECT_EQ(cut->nominatedNodeName, whole->nominatedNodeName);
  EXPECT_TRUE(cut->labels.empty());  // no reader of a cached pod looks at them
  Annotations ann = whole->annotations;
  ann.erase("kubectl.kubernetes.io/last-applied-configuration");
  EXPECT_EQ(cut->annotations, ann);
  ASSERT_EQ(cut->containers.size(), whole->containers.size());
  for (std::size_t i = 0; i < cut->containers.size(); ++i) {
    EXPECT_EQ(cut->containers[i].name, whole->containers[i].name);
    EXPECT_EQ(cut->containers[i].init, whole->containers[i].init);
    EXPECT_EQ(cut->containers[i].limits, whole->containers[i].limits);
  }
}

TEST(K8sTrim, MalformedPodFieldsStayForTheParserToReport) {
  auto pod = json::parse(R"({"metadata": {"name": "p", "annotations": "not a map"},
                             "spec": {"containers": {"name": "not a list"}}})").as_object();
  json::object cut = trimPod(pod);
  EXPECT_EQ(json::serialize(cut), json::serialize(pod));
  EXPECT_FALSE(parsePod(json::value(cut)).ok());
}

TEST(K8sTrim, NodeKeepsNameVersionAndAnnotationsOnly) {
  EXPECT_EQ(json::serialize(trimNode(fullNode())), json::serialize(json::parse(R"({
    "metadata": {"name": "n1", "uid": "nu", "resourceVersion": "7",
                 "annotations": {"vgpu.io/devices-sim": "inventory", "vgpu.io/heartbeat": "2026-01-02T03:04:05Z",
                                 "vgpu.io/device-cordon": "GPU-1", "csi.volume.kubernetes.io/nodeid": "{}"}}
  })")));
}

TEST(K8sTrim, PodStubKeepsWhoThePodIsAndWhereItRuns) {
  EXPECT_EQ(json::serialize(podStub(fullPod())), json::serialize(json::parse(R"({
    "metadata": {"name": "train-0", "namespace": "ml", "uid": "u-1", "resourceVersion": "42"},
    "spec": {"nodeName": "n1"}
  })")));
}

TEST(K8sTrim, InformerCachesTrimmedObjectsFromListAndWatch) {
  auto server = startServer();
  json::object listed = fullPod();
  listed["metadata"].as_object().erase("deletionTimestamp");
  listed["metadata"].as_object().erase("uid");
  listed["metadata"].as_object().erase("resourceVersion");
  ASSERT_TRUE(server->create("pods", listed));
  auto client = clientFor(*server);
  InformerOptions o;
  o.transform = trimPod;
  o.pageSize = 1;
  std::vector<ObjectPtr> added;
  std::mutex mu;
  InformerHandlers h;
  h.onAdd = [&](const ObjectPtr& p) {
    std::lock_guard lock(mu);
    added.push_back(p);
  };
  Informer informer(*client, kPods, o, h);
  informer.start();
  ASSERT_TRUE(informer.waitForSync(std::chrono::seconds(10)));
  json::object watched = listed;
  watched["metadata"].as_object()["name"] = "train-1";
  ASSERT_TRUE(server->create("pods", watched));
  ASSERT_TRUE(eventually([&] { return informer.size() == 2; }));
  for (const char* key : {"ml/train-0", "ml/train-1"}) {
    ObjectPtr p = informer.get(key);
    ASSERT_NE(p, nullptr) << key;
    EXPECT_FALSE(p->contains("apiVersion")) << key;
    EXPECT_EQ(findPath(*p, {"metadata", "managedFields"}), nullptr) << key;
    EXPECT_EQ(findPath(*p, {"status", "conditions"}), nullptr) << key;
    EXPECT_EQ(annotation(*p, "kubectl.kubernetes.io/last-applied-configuration"), std::nullopt) << key;
    EXPECT_EQ(annotation(*p, keys::kPodAssignment), "opaque") << key;
    EXPECT_FALSE(uid(*p).empty()) << key;
    EXPECT_FALSE(resourceVersion(*p).empty()) << key;
    EXPECT_EQ(nodeName(*p), "n1") << key;
  }
  std::lock_guard lock(mu);
  ASSERT_EQ(added.size(), 2u);
  EXPECT_EQ(findPath(*added[1], {"spec", "volumes"}), nullptr);
}

}  // namespace
}  // namespace vgpu::k8s
