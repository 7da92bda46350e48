#pragma once
// The verbs of kubectl-vgpu, each in its own file (verb_<name>.cpp): each prints to `out`,
// reports problems to `err` and returns the exit code (0, or 1 on an error, as kubectl).

#include <ostream>

#include "cli.h"
#include "vgpu/k8s/client.h"

namespace vgpu::kubectl {

int runNodes(const Invocation& inv, k8s::Client& client, std::ostream& out, std::ostream& err);
int runPods(const Invocation& inv, k8s::Client& client, std::ostream& out, std::ostream& err);
int runSimulate(const Invocation& inv, k8s::Client& client, std::ostream& out, std::ostream& err);
int runTop(const Invocation& inv, k8s::Client& client, std::ostream& out, std::ostream& err);
int runExplain(const Invocation& inv, k8s::Client& client, std::ostream& out, std::ostream& err);
/// `completion bash|zsh`: needs no cluster.
int runCompletion(const Invocation& inv, std::ostream& out, std::ostream& err);

/// The man-style help of `verb` ("" = the plugin's overview), or "" for an unknown verb.
std::string helpText(const std::string& verb);

}  // namespace vgpu::kubectl
