// Ports for the components a test starts: each one reserved for the test process's life, so
// two tests running side by side, or a component's own outgoing connections, never take it.
#pragma once

#include <cstdint>

namespace vgpu::realk8s {

/// A TCP port free on every address, chosen below the kernel's ephemeral range (where no
/// outgoing connection's source port lands) and reserved for this process by a lock file in
/// /run/lock that it keeps open until it exits (other test processes skip it). The components
/// keep their ports over restarts, so each is chosen once. 0 when none could be found.
std::uint16_t freePort();

}  // namespace vgpu::realk8s
