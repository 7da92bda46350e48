#pragma once
// kubectl-vgpu's command line: the verb, kubectl's global flags (--kubeconfig, --context,
// -n/--namespace, -A, -o) and the plugin's own, parsed the way kubectl parses them.

#include <optional>
#include <string>
#include <vector>

#include "vgpu/result.h"

namespace vgpu::kubectl {

enum class OutputFormat { kTable, kWide, kJson, kYaml };

struct Invocation {
  std::string verb;                ///< nodes, pods, explain, simulate, top, completion, help, version
  std::vector<std::string> args;   ///< positional arguments after the verb
  std::string kubeconfig;          ///< --kubeconfig; empty = $KUBECONFIG, ~/.kube/config
  std::string context;             ///< --context
  std::optional<std::string> ns;   ///< -n/--namespace; unset = the context's namespace
  bool allNamespaces = false;      ///< -A/--all-namespaces
  OutputFormat output = OutputFormat::kTable;
  std::string deviceConfig;        ///< --device-config FILE instead of the chart's ConfigMap
  std::string configMap;           ///< --config-map NAMESPACE/NAME
  std::string backendDir;          ///< --backend-dir
  std::string filename;            ///< -f/--filename (simulate)
  int metricsPort = 31992;         ///< --metrics-port: the agents' metrics (top; the chart's agent.metrics.port)
  bool help = false;               ///< -h/--help anywhere
};

/// The verbs in the order `--help` lists them.
const std::vector<std::string>& verbs();

/// Parses argv (argv[0] excluded). Errors are kubectl's words without the "error: " prefix,
/// e.g. `unknown flag: --foo`, `unable to match a printer suitable for the output format "x"...`.
Result<Invocation> parseCommandLine(const std::vector<std::string>& argv);

}  // namespace vgpu::kubectl
