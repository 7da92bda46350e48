#pragma once
// A node in DRA mode for the end-to-end tests, on one machine:
//
//   apiserver        the apiserver double (resource.k8s.io/v1 ResourceSlices and
//                    ResourceClaims), in this process
//   vgpu-dra-plugin  the real binary, a child process, every backend with devices on the node
//                    in frontEnd: dra, on the fake vendor libraries (fake_nodes.h)
//   kubelet          the kubelet's DRA double (plugin watcher, NodePrepare/Unprepare over the
//                    real protos), in this process
//   kube-scheduler   played by createAllocatedClaim: the claim as its allocator leaves it
//   the runtime      played by startContainer: the CDI ids the kubelet got, applied from the
//                    plugin's CDI folder (cdi_runtime.h), the NVIDIA toolkit as the default
//                    runtime, then a process in its own mount namespace (container_runtime.h)
//
// Everything lives in one temp folder, removed by the destructor (kept with VGPU_E2E_KEEP).

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <boost/json/object.hpp>

#include "child_process.h"
#include "fake_nodes.h"
#include "vgpu/backend_loader.h"
#include "vgpu/container_spec.h"
#include "vgpu/fakes/fake_apiserver.h"
#include "vgpu/fakes/fake_dra_kubelet.h"
#include "vgpu/result.h"

namespace vgpu::e2e {

/// What kube-scheduler's allocator records for one share: the amounts as Quantities.
struct ShareRequest {
  std::string memory;  ///< "3000Mi"
  std::string cores;   ///< "30"
};

class DraNode {
 public:
  DraNode();
  ~DraNode();  ///< the plugin killed and reaped, the doubles stopped
  DraNode(const DraNode&) = delete;
  DraNode& operator=(const DraNode&) = delete;

  /// Writes the fake machine and device-config.yaml, starts the apiserver double with the
  /// Node, the kubelet double and vgpu-dra-plugin, and waits until every driver registered and
  /// published its pool. Errors say which part did not come up, with the plugin's log.
  Status start(NodeSpec spec, int splitCount = 4);

  /// The devices of `driver`'s pool as the apiserver stores them (spec.devices of its slices).
  std::vector<boost::json::object> publishedDevices(const std::string& driver) const;
  /// A ResourceClaim named `name` asking one device of class `driver` with these amounts, and
  /// allocated as kube-scheduler does on a shared device: one result on `device` of this node's
  /// pool with a fresh shareID and the consumed capacity (memory, cores and one share).
  Result<fakes::DraClaim> createAllocatedClaim(const std::string& name, const std::string& driver,
                                               const std::string& device, const ShareRequest& share);
  /// The shareID the claim's allocation recorded.
  std::string shareIdOf(const fakes::DraClaim& claim) const;

  /// The container runtime: the CDI devices applied (errors as a runtime's: an unresolvable id,
  /// an invalid spec) and `program` started with stdin and stdout on pipes.
  Result<std::unique_ptr<ChildProcess>> startContainer(const std::vector<std::string>& cdiIds,
                                                       const std::string& program,
                                                       const std::vector<std::string>& args = {});
  /// What the runtime would apply for these CDI ids, without starting anything.
  Result<ContainerSpec> containerSpec(const std::vector<std::string>& cdiIds) const;
  /// A container with this spec (the NVIDIA toolkit applied as for any container).
  Result<std::unique_ptr<ChildProcess>> startContainer(const ContainerSpec& spec, const std::string& program,
                                                       const std::vector<std::string>& args = {});

  /// What vgpu-device-plugin's Allocate hands a container granted `grant` on this node: the
  /// backend loaded in this process from the node's config over the same fake driver, its
  /// limiter asked for the grant (host folder: a fresh one under the node's folder).
  Result<ContainerSpec> devicePluginSpec(const std::string& backend, ContainerGrant grant);

  fakes::FakeApiServer& api() { return *api_; }
  fakes::FakeDraKubelet& kubelet() { return *kubelet_; }
  ChildProcess* plugin() { return plugin_.get(); }
  std::string pluginLog() const;
  const NodeSpec& spec() const { return spec_; }
  const std::string& name() const { return spec_.name; }
  /// The node's folder (fake drivers' configs and state), device-config.yaml, the plugin's.
  std::filesystem::path dir() const { return dir_; }
  std::filesystem::path configPath() const { return dir_ / "device-config.yaml"; }
  std::filesystem::path cdiDir() const { return dir_ / "run-cdi"; }
  std::filesystem::path stateDir() const { return dir_ / "state"; }

 private:
  Status writeFiles(int splitCount);
  Status startPlugin();

  NodeSpec spec_;
  std::filesystem::path dir_;
  std::unique_ptr<fakes::FakeApiServer> api_;
  std::unique_ptr<fakes::FakeDraKubelet> kubelet_;
  std::unique_ptr<ChildProcess> plugin_;
  std::unique_ptr<BackendLoadOutcome> devicePluginBackends_;
  int containers_ = 0;
  int shares_ = 0;
};

/// The DRA driver of a backend in this suite ("nvidia" -> "nvidia.vgpu.io").
std::string draDriver(const std::string& backend);

}  // namespace vgpu::e2e
