// kubectl-vgpu: the kubectl plugin (`kubectl vgpu ...`); parses the command line, connects
// and hands over to the verb. docs/kubectl-vgpu.md is the user's guide.
#include <iostream>

#include "live_state.h"
#include "verbs.h"
#include "vgpu/version.h"

using namespace vgpu::kubectl;

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  auto inv = parseCommandLine(args);
  if (!inv.ok()) {
    std::cerr << "error: " << inv.error().message << "\nSee 'kubectl vgpu --help' for usage.\n";
    return 1;
  }
  if (inv->verb == "help") {
    const std::string verb = inv->args.empty() ? "" : inv->args.front();
    const std::string text = helpText(verb);
    if (text.empty()) {
      std::cerr << "error: unknown command \"" << verb << "\" for \"kubectl vgpu\"\n";
      return 1;
    }
    std::cout << text;
    return 0;
  }
  if (inv->help || inv->verb.empty()) {
    std::cout << helpText(inv->verb);
    return 0;
  }
  if (inv->verb == "version") {
    std::cout << "kubectl-vgpu " << vgpu::versionString() << "\n";
    return 0;
  }
  if (inv->verb == "completion") return runCompletion(*inv, std::cout, std::cerr);
  if (inv->output == OutputFormat::kWide && (inv->verb == "explain" || inv->verb == "simulate")) {
    std::cerr << "error: unable to match a printer suitable for the output format \"wide\", allowed formats are: json,yaml\n";
    return 1;
  }
  auto client = connect(*inv);
  if (!client.ok()) {
    std::cerr << "error: " << client.error().message << "\n";
    return 1;
  }
  if (inv->verb == "nodes") return runNodes(*inv, **client, std::cout, std::cerr);
  if (inv->verb == "pods") return runPods(*inv, **client, std::cout, std::cerr);
  if (inv->verb == "top") return runTop(*inv, **client, std::cout, std::cerr);
  if (inv->verb == "simulate") return runSimulate(*inv, **client, std::cout, std::cerr);
  return runExplain(*inv, **client, std::cout, std::cerr);
}
