#pragma once
// The fixture of the real-cluster tests: one cluster per run (per release), started once
// for all the tests (realk8s_test.cpp, scenarios_test.cpp), each of which works in its own
// namespace and on its own nodes (scenario_support.h: kGroupLabel).

#include <gtest/gtest.h>

#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "real_cluster.h"
#include "scenario_support.h"

namespace vgpu::realk8s {

extern std::string gRelease;  // --release

class RealK8s : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cluster_ = new RealCluster({.release = gRelease, .startVgpu = true, .chartValues = suiteChartValues()});
    startStatus_ = new Status(cluster_->start());
  }
  static void TearDownTestSuite() {
    delete cluster_;
    delete startStatus_;
    cluster_ = nullptr;
    startStatus_ = nullptr;
  }
  void SetUp() override {
    ASSERT_TRUE(startStatus_->ok()) << "the " << gRelease << " control plane did not start: "
                                    << startStatus_->error().message;
  }
  RealCluster& cluster() { return *cluster_; }

  /// Records an answer of the real apiserver: in the test's output and in the run's folder.
  void record(const std::string& what, const ApiReply& reply) {
    std::ostringstream line;
    line << "[" << cluster_->kubernetesVersion() << "] " << what << " -> " << reply.describe();
    std::cout << line.str() << std::endl;
    std::ofstream(cluster_->dir() + "/answers.txt", std::ios::app) << line.str() << "\n";
  }

  static RealCluster* cluster_;
  static Status* startStatus_;
};

}  // namespace vgpu::realk8s
