// main() of the real-cluster test programs (vgpu_realk8s_test, vgpu_realnode_test): gtest's
// flags and --release=<1.34|1.37>, the Kubernetes release whose binaries the run starts.
#include <gtest/gtest.h>

#include <cstring>
#include <iostream>
#include <string>

namespace vgpu::realk8s {
std::string gRelease;  // --release
}  // namespace vgpu::realk8s

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], "--release=", 10) == 0) vgpu::realk8s::gRelease = argv[i] + 10;
  if (vgpu::realk8s::gRelease.empty()) {
    std::cerr << "usage: " << argv[0] << " --release=<1.34|1.37> [gtest flags]\n";
    return 2;
  }
  return RUN_ALL_TESTS();
}
