// The kubelet's PodResources List over its unix socket (pod_resources_client.h): which device
// IDs each container holds, with gRPC kept inside this file.

#include "pod_resources_client.h"

#include <grpcpp/grpcpp.h>

#include "vgpu/proto/podresources_v1.grpc.pb.h"

namespace vgpu::deviceplugin {

Result<std::map<std::string, HeldDevices>> listPodResources(const std::string& socketPath,
                                                            std::chrono::milliseconds timeout) {
  auto channel = grpc::CreateChannel("unix://" + socketPath, grpc::InsecureChannelCredentials());
  auto stub = v1::PodResourcesLister::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  v1::ListPodResourcesResponse resp;
  auto s = stub->List(&ctx, v1::ListPodResourcesRequest(), &resp);
  if (!s.ok()) return makeError("reading the kubelet's PodResources API at " + socketPath + ": " + s.error_message());
  std::map<std::string, HeldDevices> out;
  for (const auto& pod : resp.pod_resources()) {
    auto& held = out[pod.namespace_() + "/" + pod.name()];
    for (const auto& c : pod.containers()) {
      auto& container = held[c.name()];  // listed even when it holds nothing (yet)
      for (const auto& d : c.devices()) {
        auto& ids = container[d.resource_name()];
        ids.insert(ids.end(), d.device_ids().begin(), d.device_ids().end());
      }
    }
  }
  return out;
}

}  // namespace vgpu::deviceplugin
