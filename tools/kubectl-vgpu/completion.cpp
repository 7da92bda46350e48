// `kubectl vgpu completion bash|zsh`: completion scripts for the verbs, the flags, and pod
// names after `explain` (asked of kubectl, so they follow the same kubeconfig).
#include "verbs.h"

namespace vgpu::kubectl {

namespace {

constexpr const char* kBash = R"SH(# bash completion for kubectl-vgpu (kubectl vgpu completion bash)
_kubectl_vgpu() {
  local cur prev verb i
  cur="${COMP_WORDS[COMP_CWORD]}"
  prev="${COMP_WORDS[COMP_CWORD-1]}"
  verb=""
  for ((i = 1; i < COMP_CWORD; i++)); do
    case "${COMP_WORDS[i]}" in
      nodes|pods|explain|simulate|top|completion|version|help) verb="${COMP_WORDS[i]}"; break ;;
    esac
  done
  case "$prev" in
    -o|--output) COMPREPLY=($(compgen -W "wide json yaml" -- "$cur")); return ;;
    -f|--filename|--kubeconfig|--device-config|--backend-dir) COMPREPLY=($(compgen -f -- "$cur")); return ;;
    -n|--namespace) COMPREPLY=($(compgen -W "$(kubectl get namespaces -o name 2>/dev/null | sed 's|^namespace/||')" -- "$cur")); return ;;
    --context) COMPREPLY=($(compgen -W "$(kubectl config get-contexts -o name 2>/dev/null)" -- "$cur")); return ;;
  esac
  if [[ "$cur" == -* ]]; then
    COMPREPLY=($(compgen -W "--filename -f --metrics-port --kubeconfig --context --namespace -n --all-namespaces -A --output -o --device-config --config-map --backend-dir --help -h" -- "$cur"))
    return
  fi
  case "$verb" in
    "") COMPREPLY=($(compgen -W "nodes pods explain simulate top completion version help" -- "$cur")) ;;
    explain) COMPREPLY=($(compgen -W "$(kubectl get pods -o name 2>/dev/null | sed 's|^pod/||')" -- "$cur")) ;;
    completion) COMPREPLY=($(compgen -W "bash zsh" -- "$cur")) ;;
    help) COMPREPLY=($(compgen -W "nodes pods explain simulate top completion version" -- "$cur")) ;;
  esac
}
complete -F _kubectl_vgpu kubectl-vgpu
)SH";

constexpr const char* kZsh = R"SH(#compdef kubectl-vgpu
# zsh completion for kubectl-vgpu (kubectl vgpu completion zsh)
_kubectl_vgpu() {
  _arguments \
    '(-f --filename)'{-f,--filename}'[the pods to simulate]:file:_files' \
    '--metrics-port[the agents metrics port]:port:' \
    '--kubeconfig[the kubeconfig to use]:file:_files' \
    '--context[the kubeconfig context]:context:($(kubectl config get-contexts -o name 2>/dev/null))' \
    '(-n --namespace)'{-n,--namespace}'[the namespace]:namespace:($(kubectl get namespaces -o name 2>/dev/null | sed "s|^namespace/||"))' \
    '(-A --all-namespaces)'{-A,--all-namespaces}'[every namespace]' \
    '(-o --output)'{-o,--output}'[output format]:format:(wide json yaml)' \
    '--device-config[a device-config.yaml]:file:_files' \
    '--config-map[the ConfigMap with device-config.yaml]:namespace/name:' \
    '--backend-dir[where the backends are]:directory:_files -/' \
    '(-h --help)'{-h,--help}'[help]' \
    '1:verb:(nodes pods explain simulate top completion version help)' \
    '*::argument:->argument'
  case "$state" in
    argument)
      case "$words[1]" in
        explain) _values 'pod' $(kubectl get pods -o name 2>/dev/null | sed 's|^pod/||') ;;
        completion) _values 'shell' bash zsh ;;
      esac ;;
  esac
}
compdef _kubectl_vgpu kubectl-vgpu
)SH";

}  // namespace

int runCompletion(const Invocation& inv, std::ostream& out, std::ostream& err) {
  if (inv.args.size() != 1 || (inv.args[0] != "bash" && inv.args[0] != "zsh")) {
    err << "error: completion needs one shell: bash or zsh\n";
    return 1;
  }
  out << (inv.args[0] == "bash" ? kBash : kZsh);
  return 0;
}

}  // namespace vgpu::kubectl
