// A cluster's own controllers, started on demand for a real node, as cluster admin:
// kube-controller-manager (DaemonSets, Deployments, garbage collection, node lifecycle) and
// the default kube-scheduler (`default-scheduler`: the chart's own pods use it).
#include <chrono>
#include <string>
#include <vector>

#include "real_cluster.h"
#include "test_http_client.h"

namespace vgpu::realk8s {

Status RealCluster::startControllerManager() {
  const std::string pki = dir_ + "/pki/";
  const std::string kc = adminKubeconfig();
  // kubeadm's flags where they matter here: the service-account token signer and the
  // root CA it puts in every namespace's kube-root-ca.crt (projected token volumes), the
  // default controllers; one instance, so no leader election. Its own credentials, not a
  // ServiceAccount per controller: the harness's admin token is the one it has.
  const std::vector<std::string> args = {
      "--kubeconfig=" + kc,
      "--authentication-kubeconfig=" + kc,
      "--authorization-kubeconfig=" + kc,
      "--bind-address=127.0.0.1",
      "--secure-port=" + std::to_string(controllerManagerPort_),
      "--service-account-private-key-file=" + pki + "sa.key",
      "--root-ca-file=" + pki + "ca.crt",
      "--use-service-account-credentials=false",
      "--leader-elect=false",
      "--v=2",
  };
  const std::uint16_t port = controllerManagerPort_;
  return startComponent(component("kube-controller-manager"), args, [port] {
    return testing::TestHttpClient(port, true).setTimeout(std::chrono::seconds(2)).get("/healthz").status == 200;
  });
}

Status RealCluster::startDefaultScheduler() {
  // kube-scheduler's defaults (profile default-scheduler, Lease kube-system/kube-scheduler),
  // beside the chart's profile.
  const std::string kc = adminKubeconfig();
  const std::vector<std::string> args = {
      "kube-scheduler",  // the component's name: the binary is the release's multi-call one
      "--kubeconfig=" + kc,
      "--authentication-kubeconfig=" + kc,
      "--authorization-kubeconfig=" + kc,
      "--bind-address=127.0.0.1",
      "--secure-port=" + std::to_string(defaultSchedulerPort_),
      "--v=2",
  };
  const std::uint16_t port = defaultSchedulerPort_;
  return startComponent(
      component("default-scheduler"), args,
      [port] {
        return testing::TestHttpClient(port, true).setTimeout(std::chrono::seconds(2)).get("/healthz").status == 200;
      },
      binary_);
}

void RealCluster::stopControllerManager(bool graceful) { stopComponent(component("kube-controller-manager"), graceful); }

}  // namespace vgpu::realk8s
