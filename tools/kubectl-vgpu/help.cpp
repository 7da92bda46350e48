// The man-style help of kubectl-vgpu and of each verb (`kubectl vgpu VERB --help`).
#include <map>

#include "verbs.h"

namespace vgpu::kubectl {

namespace {

constexpr const char* kGlobalOptions = R"(GLOBAL OPTIONS
  --kubeconfig FILE     the kubeconfig to use (default: $KUBECONFIG, else ~/.kube/config)
  --context NAME        the kubeconfig context to use (default: its current-context)
  -n, --namespace NS    the namespace (default: the context's namespace)
  -A, --all-namespaces  every namespace (pods)
  -o, --output FORMAT   wide, json or yaml (default: a table)
  --device-config FILE  the vgpu device config to judge with, instead of the chart's ConfigMap
  --config-map NS/NAME  the ConfigMap holding device-config.yaml (default: the one labelled
                        app.kubernetes.io/name=vgpu)
  --backend-dir DIR     where the vgpu backends are (default: <binary>/../lib/vgpu/backends)
  -f, --filename FILE   the pods to simulate (simulate)
  --metrics-port PORT   the node agents' metrics port (top; default 31992)
  -h, --help            this help

EXIT STATUS
  0 on success, 1 on an error (a message on standard error starting "error:" or
  "Error from server"), as kubectl.
)";

const std::map<std::string, std::string>& texts() {
  static const std::map<std::string, std::string> kTexts{
      {"", R"(NAME
  kubectl vgpu - see and explain the live cluster's vgpu GPU slices

SYNOPSIS
  kubectl vgpu VERB [ARGS] [OPTIONS]

VERBS
  nodes          per node and device: model, health, memory, compute and shares in use
  pods           the pods holding slices, their devices and whether the agent confirmed them
  explain POD    why a pending pod fits no node, in vgpu-scheduler's words; what a placed pod got
  simulate -f F  would the pods of a manifest fit the live cluster now, and where
  top            live memory and compute per device and container, from the node agents
  completion SH  a bash or zsh completion script
  version        the plugin's version

  kubectl vgpu VERB --help shows a verb's manual.

)"},
      {"nodes", R"(NAME
  kubectl vgpu nodes - the devices of every vgpu node and what is taken on each

SYNOPSIS
  kubectl vgpu nodes [-o wide|json|yaml]

DESCRIPTION
  Lists each device the node agents publish (vgpu.io/devices-<backend>) with what the pods'
  vgpu.io/assignment annotations take from it, counted as vgpu-scheduler counts: memory
  (with memory held by processes outside vgpu), compute (percent of the device) and shares
  (containers on it / its split count). STATUS is Ready, or why vgpu-scheduler offers the
  node nothing now (a stale heartbeat, an unreadable inventory). -o wide adds the device's
  id and the pods on it.

EXAMPLES
  kubectl vgpu nodes -o wide

)"},
      {"pods", R"(NAME
  kubectl vgpu pods - the pods holding GPU slices

SYNOPSIS
  kubectl vgpu pods [-n NAMESPACE | -A] [-o wide|json|yaml]

DESCRIPTION
  Lists the running or starting pods with a vgpu.io/assignment: node, devices, memory and
  compute summed over their containers, priority, and CONFIRMED: yes once the node agent has
  handed the devices to the container (vgpu.io/bind-phase=success), else the phase it is in.
  -o wide adds each container's grants (device[slot], memory, compute).

EXAMPLES
  kubectl vgpu pods -A

)"},
      {"explain", R"(NAME
  kubectl vgpu explain - why a pod is pending, or what it was granted

SYNOPSIS
  kubectl vgpu explain POD [-n NAMESPACE] [-o json|yaml]

DESCRIPTION
  For a pending pod, judges every node as vgpu-scheduler would now, on the live cluster's
  nodes and pods (read-only): the summary vgpu-scheduler gives kube-scheduler, each node's
  verdict in the same words as the pod's FailedScheduling event, the numbers behind it, and
  the node closest to fitting. For a placed pod, shows its node, each container's devices
  and slices, and whether the node agent confirmed the handout.

EXAMPLES
  kubectl vgpu explain trainer-0 -n ml

)"},
      {"simulate", R"(NAME
  kubectl vgpu simulate - would these pods fit the live cluster now, and where

SYNOPSIS
  kubectl vgpu simulate -f PODS.yaml [-n NAMESPACE] [-o json|yaml]

DESCRIPTION
  Places the Pods of the manifest (YAML or JSON, several documents or a List) in order on
  the live cluster as it is now, with vgpu-scheduler's placement engine and cache (the
  engine vgpu-sim runs on cluster files); each placed pod's slices count for the next.
  Nothing is created. A pod without a namespace goes to -n or the context's namespace.
  For each pod: the node and devices it would get, or the summary and the node closest to
  fitting as `explain` gives them.

EXAMPLES
  kubectl vgpu simulate -f training-job.yaml

)"},
      {"top", R"(NAME
  kubectl vgpu top - live usage per device and container

SYNOPSIS
  kubectl vgpu top [-n NAMESPACE | -A] [--metrics-port PORT] [-o json|yaml]

DESCRIPTION
  Reads each vgpu node agent's /metrics through the apiserver's node proxy
  (/api/v1/nodes/<node>:<port>/proxy/metrics, as kubectl top reaches the kubelet; it needs
  the right to get nodes/proxy) and shows per device the memory its containers hold, then
  per container its memory used / limit and compute used / limit (used: where the vendor
  library reports it, MLU and DCU; "-" on NVIDIA). SLICE says OVER for a container above its
  slice. A node whose agent cannot be read is named on standard error and skipped.
  --metrics-port is the agents' port (default 31992, the chart's agent.metrics.port).

EXAMPLES
  kubectl vgpu top -A

)"},
      {"completion", R"(NAME
  kubectl vgpu completion - shell completion

SYNOPSIS
  kubectl vgpu completion bash|zsh

DESCRIPTION
  Writes a completion script for kubectl-vgpu (verbs, flags, pod names for explain).

EXAMPLES
  source <(kubectl-vgpu completion bash)
  kubectl-vgpu completion zsh > "${fpath[1]}/_kubectl-vgpu"

)"},
      {"version", "NAME\n  kubectl vgpu version - the plugin's version\n\nSYNOPSIS\n  kubectl vgpu version\n\n"},
      {"help", "NAME\n  kubectl vgpu help - this overview\n\nSYNOPSIS\n  kubectl vgpu help [VERB]\n\n"},
  };
  return kTexts;
}

}  // namespace

std::string helpText(const std::string& verb) {
  auto it = texts().find(verb);
  if (it == texts().end()) return {};
  return it->second + kGlobalOptions;
}

}  // namespace vgpu::kubectl
