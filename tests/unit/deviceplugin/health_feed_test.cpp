// The health feed both front ends follow a backend's device health with: batches handed on
// (empty ones too: the DRA front end counts them as checks), a failing check said once while
// it repeats and again after a success, and a prompt stop also during the back-off.
#include <gmock/gmock.h>

#include <atomic>
#include <deque>

#include "health_feed.h"

namespace vgpu::deviceplugin::testing {
namespace {

using Batch = Result<std::vector<HealthEvent>>;

/// A discovery that answers from a script, then waits quietly.
struct ScriptedDiscovery {
  std::mutex mu;
  std::deque<Batch> script;
  std::vector<std::vector<HealthEvent>> batches;
  std::vector<std::string> errors;
  std::atomic<int> quiet{0};

  HealthFeed::Handlers handlers() {
    return {[this](std::chrono::milliseconds timeout) -> Batch {
              {
                std::lock_guard lock(mu);
                if (!script.empty()) {
                  Batch b = std::move(script.front());
                  script.pop_front();
                  return b;
                }
              }
              ++quiet;
              std::this_thread::sleep_for(std::min(timeout, std::chrono::milliseconds(5)));
              return std::vector<HealthEvent>{};
            },
            [this](const std::vector<HealthEvent>& events) {
              std::lock_guard lock(mu);
              if (!events.empty()) batches.push_back(events);
            },
            [this](const std::string& why) {
              std::lock_guard lock(mu);
              errors.push_back(why);
            }};
  }
};

bool eventually(const std::function<bool()>& cond) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!cond() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  return cond();
}

TEST(HealthFeed, HandsOnBatchesAndSaysARepeatedFailureOnce) {
  ScriptedDiscovery d;
  const HealthEvent bad{"GPU-0", Health::kUnhealthy, "XID 79"};
  d.script = {Batch(std::vector<HealthEvent>{bad}), Batch(makeError("driver gone")), Batch(makeError("driver gone")),
              Batch(std::vector<HealthEvent>{}), Batch(makeError("driver gone"))};
  HealthFeed feed(d.handlers());
  // Two back-offs of 1 s each, then quiet checks.
  ASSERT_TRUE(eventually([&] {
    std::lock_guard lock(d.mu);
    return d.script.empty() && d.quiet > 0;
  }));
  feed.stop();
  std::lock_guard lock(d.mu);
  EXPECT_EQ(d.batches, (std::vector<std::vector<HealthEvent>>{{bad}}));
  EXPECT_EQ(d.errors, (std::vector<std::string>{"driver gone", "driver gone"}));
}

TEST(HealthFeed, StopsPromptlyDuringTheBackOff) {
  ScriptedDiscovery d;
  d.script = {Batch(makeError("no driver"))};
  HealthFeed feed(d.handlers());
  ASSERT_TRUE(eventually([&] {
    std::lock_guard lock(d.mu);
    return !d.errors.empty();
  }));
  const auto start = std::chrono::steady_clock::now();
  feed.stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(500));
  feed.stop();  // twice is fine
}

}  // namespace
}  // namespace vgpu::deviceplugin::testing
