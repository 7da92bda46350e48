#pragma once
// The project's container images for the real node (scripts/build-images.sh, docs/images.md):
// found where ctest's Images.Build left them, else built into the cluster's folder (cached).

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "real_cluster.h"
#include "vgpu/result.h"

namespace vgpu::realk8s {

/// One built image: the name in docker/images.toml, its reference and its OCI archive.
struct ProjectImage {
  std::string name, ref, archive;
};

/// The images `names` (docker/images.toml; `kube-scheduler-<release>` for the per-release
/// one): those <build>/images/images.txt lists (the fixture vgpu_images), else
/// build-images.sh run into <cluster folder>/images (seconds when its cache is warm).
Result<std::vector<ProjectImage>> projectImages(const RealCluster& cluster, const std::vector<std::string>& names);

/// Runs a program to its end within `timeout`; its output, or an error quoting it.
Result<std::string> runProgram(const std::string& program, const std::vector<std::string>& args,
                               const std::map<std::string, std::string>& env, const std::string& log,
                               std::chrono::seconds timeout);

}  // namespace vgpu::realk8s
