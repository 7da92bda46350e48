// Parses kubectl-vgpu's argv as kubectl does: flags anywhere, `--flag=value` or `--flag value`,
// `-nNS`, `--` ends the flags; an unknown flag or a bad -o value is an error naming it.
#include "cli.h"

#include <algorithm>
#include <cstdlib>

namespace vgpu::kubectl {

const std::vector<std::string>& verbs() {
  static const std::vector<std::string> kVerbs{"nodes", "pods", "explain", "simulate", "top", "completion", "version", "help"};
  return kVerbs;
}

namespace {

Result<OutputFormat> parseOutput(const std::string& value) {
  if (value == "wide") return OutputFormat::kWide;
  if (value == "json") return OutputFormat::kJson;
  if (value == "yaml") return OutputFormat::kYaml;
  return makeError("unable to match a printer suitable for the output format \"" + value +
                   "\", allowed formats are: json,wide,yaml");
}

}  // namespace

Result<Invocation> parseCommandLine(const std::vector<std::string>& argv) {
  Invocation inv;
  std::vector<std::string> positional;
  bool flagsEnded = false;
  for (std::size_t i = 0; i < argv.size(); ++i) {
    const std::string& arg = argv[i];
    if (flagsEnded || arg.empty() || arg[0] != '-' || arg == "-") {
      positional.push_back(arg);
      continue;
    }
    if (arg == "--") {
      flagsEnded = true;
      continue;
    }
    // Split "--flag=value"; short flags may carry their value attached ("-nfoo", "-ojson").
    std::string name = arg, value;
    bool hasValue = false;
    if (arg.rfind("--", 0) == 0) {
      if (auto eq = arg.find('='); eq != std::string::npos) {
        name = arg.substr(0, eq);
        value = arg.substr(eq + 1);
        hasValue = true;
      }
    } else if (arg.size() > 2) {
      name = arg.substr(0, 2);
      value = arg.substr(arg[2] == '=' ? 3 : 2);
      hasValue = true;
    }
    auto takeValue = [&]() -> Result<std::string> {
      if (hasValue) return value;
      if (i + 1 >= argv.size()) return makeError("flag needs an argument: " + name);
      return argv[++i];
    };
    auto boolFlag = [&](bool& target) -> Status {
      if (!hasValue || value == "true") {
        target = true;
        return Status::success();
      }
      if (value == "false") {
        target = false;
        return Status::success();
      }
      return makeError("invalid argument \"" + value + "\" for \"" + name + "\" flag: expected true or false");
    };
    std::string* stringTarget = nullptr;
    if (name == "-h" || name == "--help") {
      if (auto s = boolFlag(inv.help); !s.ok()) return s.error();
      continue;
    }
    if (name == "-A" || name == "--all-namespaces") {
      if (auto s = boolFlag(inv.allNamespaces); !s.ok()) return s.error();
      continue;
    }
    if (name == "-o" || name == "--output") {
      auto v = takeValue();
      if (!v.ok()) return v.error();
      auto format = parseOutput(*v);
      if (!format.ok()) return format.error();
      inv.output = *format;
      continue;
    }
    if (name == "-n" || name == "--namespace") {
      auto v = takeValue();
      if (!v.ok()) return v.error();
      if (v->empty()) return makeError("a namespace must not be empty (-n/--namespace)");
      inv.ns = *v;
      continue;
    }
    if (name == "--metrics-port") {
      auto v = takeValue();
      if (!v.ok()) return v.error();
      char* end = nullptr;
      const long port = std::strtol(v->c_str(), &end, 10);
      if (v->empty() || *end != '\0' || port < 1 || port > 65535)
        return makeError("invalid argument \"" + *v + "\" for \"--metrics-port\" flag: expected a port, 1-65535");
      inv.metricsPort = static_cast<int>(port);
      continue;
    }
    if (name == "-f" || name == "--filename") stringTarget = &inv.filename;
    else if (name == "--kubeconfig") stringTarget = &inv.kubeconfig;
    else if (name == "--context") stringTarget = &inv.context;
    else if (name == "--device-config") stringTarget = &inv.deviceConfig;
    else if (name == "--config-map") stringTarget = &inv.configMap;
    else if (name == "--backend-dir") stringTarget = &inv.backendDir;
    if (!stringTarget) return makeError("unknown flag: " + name);
    auto v = takeValue();
    if (!v.ok()) return v.error();
    *stringTarget = *v;
  }
  if (!positional.empty()) {
    inv.verb = positional.front();
    inv.args.assign(positional.begin() + 1, positional.end());
  }
  if (!inv.verb.empty() && std::find(verbs().begin(), verbs().end(), inv.verb) == verbs().end())
    return makeError("unknown command \"" + inv.verb + "\" for \"kubectl vgpu\"");
  if (!inv.configMap.empty() && inv.configMap.find('/') == std::string::npos)
    return makeError("--config-map " + inv.configMap + ": expected NAMESPACE/NAME");
  return inv;
}

}  // namespace vgpu::kubectl
