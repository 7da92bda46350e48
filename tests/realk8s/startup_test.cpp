// Issue 42 item 1 against the real apiservers: the informers' streaming list (WatchList, on
// by default in 1.34 and 1.37), their paged lists in a control plane with the gate off, and
// vgpu-scheduler's start-up memory at 1,000 nodes and 10,000 pods in a process of its own.

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <thread>

#include <boost/json.hpp>

#include "realk8s_fixture.h"
#include "vgpu/k8s/client.h"
#include "vgpu/k8s/informer.h"

namespace vgpu::realk8s {
namespace {
namespace json = boost::json;

std::unique_ptr<k8s::Client> adminClient(RealCluster& c) {
  auto config = k8s::loadKubeconfig(c.adminKubeconfig());
  if (!config.ok()) ADD_FAILURE() << config.error().message;
  auto client = k8s::Client::create(*config);
  if (!client.ok()) ADD_FAILURE() << client.error().message;
  return client.ok() ? std::move(client).value() : nullptr;
}

/// A pending pod of no scheduler that runs here: nothing but the test touches it.
json::object idlePod(const std::string& name, int envCount = 0, const std::string& node = "") {
  json::array env;
  for (int e = 0; e < envCount; ++e)
    env.push_back(json::object{{"name", "SETTING_" + std::to_string(e)}, {"value", "value-" + std::to_string(e * 7919)}});
  json::object spec{{"schedulerName", "startup-test-none"},
                    {"containers", json::array{json::object{{"name", "main"},
                                                            {"image", "registry.example.com/ml/trainer:2026.11.3"},
                                                            {"env", env}}}}};
  if (!node.empty()) spec["nodeName"] = node;
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"labels", {{"app", "startup-test"}, {"job", "job-" + std::to_string(name.size() * 7 % 10)}}}}},
          {"spec", spec}};
}

/// Counts the informer's callbacks; the store is checked through the informer itself.
struct Counts {
  std::atomic<int> adds{0}, updates{0}, deletes{0};
  k8s::InformerHandlers handlers() {
    return {[this](const k8s::ObjectPtr&) { ++adds; }, [this](const k8s::ObjectPtr&, const k8s::ObjectPtr&) { ++updates; },
            [this](const k8s::ObjectPtr&) { ++deletes; }};
  }
};

/// Lists `count` pods of namespace `ns` with page size 10 and follows a create and a delete.
void listAndFollow(RealCluster& c, const std::string& ns, int count, bool expectStreamed) {
  auto client = adminClient(c);
  ASSERT_NE(client, nullptr);
  for (int i = 0; i < count; ++i)
    ASSERT_TRUE(client->create(k8s::kPods, ns, idlePod("p" + std::to_string(i))).ok());
  k8s::InformerOptions o;
  o.ns = ns;
  o.pageSize = 10;
  Counts counts;
  k8s::Informer informer(*client, k8s::kPods, o, counts.handlers());
  informer.start();
  ASSERT_TRUE(informer.waitForSync(std::chrono::seconds(30)));
  EXPECT_EQ(informer.size(), static_cast<std::size_t>(count));
  EXPECT_EQ(counts.adds.load(), count);
  ASSERT_TRUE(client->create(k8s::kPods, ns, idlePod("late")).ok());
  ASSERT_TRUE(client->remove(k8s::kPods, ns, "p0").ok());  // graceful: an update, then gone
  EXPECT_TRUE(c.waitFor([&] { return informer.get(ns + "/late") != nullptr; }));
  auto stats = informer.stats();
  EXPECT_EQ(stats.lists, 1u);
  EXPECT_EQ(stats.streamedLists, expectStreamed ? 1u : 0u) << c.kubernetesVersion();
  if (expectStreamed) {
    EXPECT_EQ(stats.watches, 1u) << "the list's stream is the watch";
  }
  EXPECT_EQ(counts.adds.load(), count + 1);
}

TEST_F(RealK8s, InformersStreamTheirListWhereTheApiserverServesIt) {
  ASSERT_TRUE(cluster().createNamespace("startup-stream").ok());
  listAndFollow(cluster(), "startup-stream", 25, true);
}

// The gate off in a control plane of its own (no kube-scheduler: the gate is kube-apiserver's).
TEST_F(RealK8s, InformersListPageByPageWhereTheWatchListGateIsOff) {
  RealCluster off({.release = cluster().release(), .startKubeScheduler = false, .featureGates = "WatchList=false"});
  auto started = off.start();
  ASSERT_TRUE(started.ok()) << started.error().message;
  ASSERT_TRUE(off.createNamespace("startup-pages").ok());
  // What it answers a streaming list: 422 Invalid, naming sendInitialEvents.
  auto refused = off.api().get(
      "/api/v1/namespaces/startup-pages/pods?watch=true&sendInitialEvents=true&allowWatchBookmarks=true"
      "&resourceVersionMatch=NotOlderThan&resourceVersion=0&timeoutSeconds=1");
  record("a streaming list with WatchList=false", refused);
  EXPECT_EQ(refused.status, 422) << refused.describe();
  EXPECT_NE(refused.body.find("sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"),
            std::string::npos)
      << refused.body;
  listAndFollow(off, "startup-pages", 25, false);
}

// vgpu-scheduler's SchedulerService (bin/vgpu_scheduler_memory_bench --child service, a
// process of its own) syncing 1,000 nodes and 10,000 bound pods: its peak (VmHWM) at most
// 1.3 x its RSS once synced. The pods hold no vgpu devices, so the bench's "pods" (the cluster
// cache's records) says 0: they are listed and kept as the pod store's stubs. A control plane of its own, so the suite's vgpu-scheduler does
// not list them too.
TEST_F(RealK8s, SchedulerStartUpMemoryStaysFlatAt1000NodesAnd10000Pods) {
  constexpr int kNodes = 1000, kPods = 10000, kWriters = 4;
  RealCluster big({.release = cluster().release(), .startKubeScheduler = false});
  auto started = big.start();
  ASSERT_TRUE(started.ok()) << started.error().message;
  ASSERT_TRUE(big.createNamespace("startup-memory").ok());
  auto client = adminClient(big);
  ASSERT_NE(client, nullptr);
  const std::string inventory(2000, 'x');  // the size of an agent's inventory annotation
  std::atomic<int> next{0}, failed{0};
  auto writer = [&] {
    for (int i; (i = next++) < kNodes + kPods;) {
      bool ok = false;
      if (i < kNodes) {
        json::object node{{"apiVersion", "v1"},
                          {"kind", "Node"},
                          {"metadata", {{"name", "mem-node-" + std::to_string(i)},
                                        {"annotations", {{"startup-test/inventory", inventory}}}}}};
        ok = client->create(k8s::kNodes, "", node).ok();
      } else {
        const int p = i - kNodes;
        auto made = client->create(k8s::kPods, "startup-memory",
                                   idlePod("pod-" + std::to_string(p), 20, "mem-node-" + std::to_string(p % kNodes)));
        ok = made.ok();
        if (!ok && failed.load() == 0) std::fprintf(stderr, "first failed create: %s\n", made.error().describe().c_str());
      }
      if (!ok) ++failed;
    }
  };
  const auto fillStart = std::chrono::steady_clock::now();
  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w) writers.emplace_back(writer);
  for (auto& t : writers) t.join();
  ASSERT_EQ(failed.load(), 0);
  std::printf("[%s] %d nodes and %d pods created in %.1f s\n", big.kubernetesVersion().c_str(), kNodes, kPods,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - fillStart).count());

  int out[2];
  ASSERT_EQ(pipe(out), 0);
  const std::string kubeconfig = big.adminKubeconfig();
  pid_t child = fork();
  if (child == 0) {
    dup2(out[1], 1);
    execl(VGPU_MEMORY_BENCH_BIN, VGPU_MEMORY_BENCH_BIN, "--child", "service", kubeconfig.c_str(), nullptr);
    _exit(127);
  }
  close(out[1]);
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = read(out[0], buf, sizeof buf)) > 0;) text.append(buf, static_cast<std::size_t>(n));
  close(out[0]);
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << text;
  std::printf("[%s] %s", big.kubernetesVersion().c_str(), text.c_str());
  std::ofstream(cluster().dir() + "/figures.txt", std::ios::app) << "[" << big.kubernetesVersion() << "] " << text;
  // "service  nodes ... sync ... RSS before N MiB  after N MiB  peak N MiB  (malloc: ...)"
  const auto line = text.find("service ");
  ASSERT_NE(line, std::string::npos) << text;
  long after = -1, peak = -1;
  auto field = [&](const char* name, long& v) {
    auto at = text.find(name, line);
    if (at != std::string::npos) v = std::strtol(text.c_str() + at + std::strlen(name), nullptr, 10);
  };
  field(" after ", after);
  field(" peak ", peak);
  ASSERT_GT(after, 0) << text;
  EXPECT_LE(static_cast<double>(peak), 1.3 * static_cast<double>(after)) << "peak over 1.3 x the synced RSS: " << text;
}

}  // namespace
}  // namespace vgpu::realk8s
