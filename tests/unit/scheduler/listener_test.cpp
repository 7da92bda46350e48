// Issue 27 item 4: /bind and /filter were unauthenticated on 0.0.0.0, and /bind bound any
// pod of any scheduler. The verbs have their own listener (loopback next to kube-scheduler
// by default; off loopback only with client certificates), the webhook keeps its TLS port,
// and /bind refuses pods whose schedulerName is not ours.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "json_body.h"
#include "../http/test_http_client.h"
#include "scheduler_harness.h"
#include "vgpu/k8s/object.h"

namespace vgpu::scheduler {
namespace {

using namespace vgpu::testing;
namespace fs = std::filesystem;

TEST(SchedulerListeners, TheWebhookPortServesNoExtenderVerbs) {
  SchedulerHarness h;
  h.createNode(nodeJson("n", gpus("n", 1)));
  ASSERT_TRUE(h.awaitNodes(1));
  ASSERT_NE(h.service->port(), h.service->extenderPort());
  TestHttpClient webhookPort(h.service->port());
  const auto pod = h.createPod(gpuPod("p", 1000));
  EXPECT_EQ(webhookPort.post("/bind", bindingArgs(pod, "n")).status, 404);
  EXPECT_EQ(webhookPort.post("/filter", extenderArgs(pod, {"n"})).status, 404);
  EXPECT_EQ(webhookPort.post("/prioritize", extenderArgs(pod, {"n"})).status, 404);
  EXPECT_EQ(k8s::nodeName(*h.api->get("pods", "default", "p")), "") << "bound through the webhook's port";
  EXPECT_EQ(webhookPort.get("/readyz").status, 200);

  TestHttpClient verbs(h.service->extenderPort());
  EXPECT_EQ(verbs.post("/webhook", "{}").status, 404);
  EXPECT_EQ(parse(verbs.post("/bind", bindingArgs(pod, "n")).body).at("Error"), "");
  EXPECT_EQ(k8s::nodeName(*h.api->get("pods", "default", "p")), "n");
}

TEST(SchedulerListeners, TheExtenderVerbsListenOnLoopbackByDefault) {
  EXPECT_EQ(ServiceOptions{}.extenderHttp.address, "127.0.0.1");
  SchedulerHarness h;
  EXPECT_EQ(h.service->extenderUrl().rfind("http://127.0.0.1:", 0), 0u) << h.service->extenderUrl();
}

/// A CA, a server certificate and two client certificates (one signed by the CA, one not),
/// made with the openssl command line.
struct Pki {
  fs::path dir = fs::temp_directory_path() / ("vgpu-pki-" + std::to_string(::getpid()));
  bool ok = false;
  Pki() {
    fs::create_directories(dir);
    const std::string d = dir.string();
    const std::string ec = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes ";
    const std::string quiet = " >/dev/null 2>&1";
    const std::string cmds[] = {
        "openssl req -x509" + ec + "-days 1 -subj /CN=vgpu-test-ca -keyout " + d + "/ca.key -out " + d + "/ca.crt" + quiet,
        "openssl req -x509" + ec + "-days 1 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 -keyout " + d +
            "/server.key -out " + d + "/server.crt" + quiet,
        "openssl req" + ec + "-subj /CN=kube-scheduler -keyout " + d + "/client.key -out " + d + "/client.csr" + quiet,
        "openssl x509 -req -days 1 -in " + d + "/client.csr -CA " + d + "/ca.crt -CAkey " + d + "/ca.key -CAcreateserial -out " +
            d + "/client.crt" + quiet,
        "openssl req -x509" + ec + "-days 1 -subj /CN=intruder -keyout " + d + "/rogue.key -out " + d + "/rogue.crt" + quiet,
    };
    for (const auto& c : cmds)
      if (std::system(c.c_str()) != 0) return;
    ok = true;
  }
  ~Pki() { fs::remove_all(dir); }
  std::string file(const char* name) const { return (dir / name).string(); }
};

TEST(SchedulerListeners, SplitFromKubeSchedulerTheVerbsServeOnlyClientsWithATrustedCertificate) {
  Pki pki;
  ASSERT_TRUE(pki.ok) << "openssl could not make the test certificates";
  ServiceOptions options;
  options.extenderHttp.address = "0.0.0.0";
  options.extenderHttp.certFile = pki.file("server.crt");
  options.extenderHttp.keyFile = pki.file("server.key");
  options.extenderHttp.clientCaFile = pki.file("ca.crt");
  SchedulerHarness h(options);
  h.createNode(nodeJson("n", gpus("n", 1)));
  ASSERT_TRUE(h.awaitNodes(1));
  const auto pod = h.createPod(gpuPod("p", 1000));

  TestHttpClient anonymous(h.service->extenderPort(), true);
  auto r = anonymous.setTimeout(std::chrono::seconds(5)).post("/bind", bindingArgs(pod, "n"));
  EXPECT_EQ(r.status, 0) << "served without a client certificate: " << r.body;
  TestHttpClient intruder(h.service->extenderPort(), true);
  intruder.useClientCertificate(pki.file("rogue.crt"), pki.file("rogue.key"));
  r = intruder.setTimeout(std::chrono::seconds(5)).post("/bind", bindingArgs(pod, "n"));
  EXPECT_EQ(r.status, 0) << "served a certificate the CA did not sign: " << r.body;
  EXPECT_EQ(k8s::nodeName(*h.api->get("pods", "default", "p")), "");

  TestHttpClient kubeScheduler(h.service->extenderPort(), true);
  kubeScheduler.useClientCertificate(pki.file("client.crt"), pki.file("client.key"));
  r = kubeScheduler.setTimeout(std::chrono::seconds(5)).post("/bind", bindingArgs(pod, "n"));
  ASSERT_EQ(r.status, 200) << r.error;
  EXPECT_EQ(parse(r.body).at("Error"), "");
  EXPECT_EQ(k8s::nodeName(*h.api->get("pods", "default", "p")), "n");
}

TEST(SchedulerListeners, AClientCaWithoutHttpsIsRefusedAtStart) {
  auto api = std::move(fakes::FakeApiServer::start()).value();
  k8s::ClientConfig cc;
  cc.server = api->url();
  auto client = std::move(k8s::Client::create(cc)).value();
  BackendSet backends = simBackends();
  ServiceOptions options;
  options.extenderHttp.clientCaFile = "/etc/ca.crt";
  auto service = SchedulerService::start(DeviceConfig{}, backends, *client, options);
  ASSERT_FALSE(service.ok());
  EXPECT_NE(service.error().message.find("needs HTTPS"), std::string::npos) << service.error().message;
}

TEST(SchedulerBind, RefusesPodsOfOtherSchedulers) {
  SchedulerHarness h;
  h.createNode(nodeJson("n", gpus("n", 1)));
  ASSERT_TRUE(h.awaitNodes(1));
  TestHttpClient verbs(h.service->extenderPort());
  for (const char* schedulerName : {"default-scheduler", "other-scheduler", ""}) {
    const std::string name = std::string("p-") + (*schedulerName ? schedulerName : "unset");
    json::object pod = podJson("default", name, {{"main", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1000"}}}},
                               schedulerName);
    pod = h.createPod(pod);
    auto out = parse(verbs.post("/bind", bindingArgs(pod, "n")).body);
    const std::string error(out.at("Error").as_string());
    EXPECT_NE(error.find(*schedulerName ? schedulerName : "default-scheduler"), std::string::npos) << error;
    EXPECT_NE(error.find("binds only its own pods"), std::string::npos) << error;
    EXPECT_EQ(k8s::nodeName(*h.api->get("pods", "default", name)), "") << name << " was bound";
    EXPECT_FALSE(k8s::annotation(*h.api->get("pods", "default", name), keys::kPodAssignment).has_value());
  }
  // Ours, also one that asks for none of our resources, is bound.
  auto mine = h.createPod(podJson("default", "plain", {{"main", {}}}));
  EXPECT_EQ(parse(verbs.post("/bind", bindingArgs(mine, "n")).body).at("Error"), "");
  EXPECT_EQ(k8s::nodeName(*h.api->get("pods", "default", "plain")), "n");
  EXPECT_EQ(h.service->cache().stats().reservations, 0u);
}

}  // namespace
}  // namespace vgpu::scheduler
