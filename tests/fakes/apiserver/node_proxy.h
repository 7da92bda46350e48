#pragma once
// The apiserver's node proxy (/api/v1/nodes/<node>:<port>/proxy/<path>) in the double: a
// GET forwarded over plain HTTP to the node's address, as `kubectl top` and kubectl-vgpu use it.

#include <string>
#include <vector>

#include "store.h"

namespace vgpu::fakes::detail {

/// `rest`: the path's segments after /api/v1 ("nodes", "<node>:<port>", "proxy", ...).
/// The node's InternalIP (else Hostname) address is asked for the remaining path and
/// `query`; a node without either, or an unreachable one, is a 503 as the apiserver answers.
/// The apiserver also refuses an address that is not global unicast (loopback: 400 "address
/// not allowed"); the double allows it, so that tests on one machine can use the proxy.
Reply proxyToNode(Store& store, const std::vector<std::string>& rest, const std::string& query);

}  // namespace vgpu::fakes::detail
