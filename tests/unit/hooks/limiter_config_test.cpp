#include "vgpu/limiter_config.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <map>
#include <string>

#include "vgpu/limiter_contract.h"

namespace vgpu {
namespace {

// An environment made of a map, so each test states exactly what is set.
struct FakeEnv {
  std::map<std::string, std::string> vars;
  EnvLookup lookup() const {
    return [this](const char* name) -> const char* {
      auto it = vars.find(name);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  }
};

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/vgpu-limiter-config-XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() { std::system(("rm -rf " + path_).c_str()); }
  std::string write(const std::string& name, const std::string& content) const {
    std::string p = path_ + "/" + name;
    std::ofstream(p) << content;
    return p;
  }
  std::string path(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

const char* kNoFixedFile = "/nonexistent/vgpu/limits.env";

TEST(LimiterConfig, ParsesBytesAndBinarySuffixes) {
  EXPECT_EQ(*parseMemorySize("1073741824"), 1073741824u);
  EXPECT_EQ(*parseMemorySize("512k"), 512u << 10);
  EXPECT_EQ(*parseMemorySize("3000m"), 3000ull << 20);
  EXPECT_EQ(*parseMemorySize("3000M"), 3000ull << 20);
  EXPECT_EQ(*parseMemorySize("4g"), 4ull << 30);
  EXPECT_EQ(*parseMemorySize("4G"), 4ull << 30);
  EXPECT_EQ(*parseMemorySize(""), 0u);
  EXPECT_EQ(*parseMemorySize("0"), 0u);
}

TEST(LimiterConfig, RefusesAnythingElseInsteadOfReadingOneByte) {
  for (const char* bad : {"1GB", "1Gi", "1gb", "0x10", "-1", "1.5g", "g", "12 34", "1t", "abc"}) {
    auto r = parseMemorySize(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.error().message.find(bad), std::string::npos) << r.error().message;
  }
  EXPECT_FALSE(parseMemorySize("99999999999999999999").ok());
  EXPECT_FALSE(parseMemorySize("17179869184g").ok());  // 2^34 GiB overflows 64 bits
}

TEST(LimiterConfig, PercentIsZeroToHundred) {
  EXPECT_EQ(*parsePercent("30"), 30u);
  EXPECT_EQ(*parsePercent("100"), 100u);
  EXPECT_FALSE(parsePercent("101").ok());
  EXPECT_FALSE(parsePercent("30%").ok());
  EXPECT_FALSE(parsePercent("-5").ok());
}

TEST(LimiterConfig, IndexedLimitWinsOverTheOneForAllDevices) {
  FakeEnv env{{{"CUDA_DEVICE_MEMORY_LIMIT", "2g"},
               {"CUDA_DEVICE_MEMORY_LIMIT_1", "1024m"},
               {"CUDA_DEVICE_SM_LIMIT", "40"},
               {"CUDA_DEVICE_SM_LIMIT_2", "0"}}};
  auto cfg = loadLimiterConfig(env.lookup(), kNoFixedFile);
  ASSERT_TRUE(cfg.ok()) << cfg.error().message;
  EXPECT_EQ(cfg->devices[0].memoryBytes, 2ull << 30);
  EXPECT_EQ(cfg->devices[1].memoryBytes, 1024ull << 20);
  EXPECT_EQ(cfg->devices[15].memoryBytes, 2ull << 30);
  EXPECT_TRUE(cfg->computeLimited(0));
  EXPECT_FALSE(cfg->computeLimited(2));
  EXPECT_EQ(cfg->regionPath, VGPU_DEFAULT_REGION_PATH);
}

TEST(LimiterConfig, ComputeIsOffAtZeroHundredAndWhenDisabled) {
  FakeEnv env{{{"CUDA_DEVICE_SM_LIMIT_0", "100"}, {"CUDA_DEVICE_SM_LIMIT_1", "50"}}};
  auto cfg = loadLimiterConfig(env.lookup(), kNoFixedFile);
  ASSERT_TRUE(cfg.ok());
  EXPECT_FALSE(cfg->computeLimited(0));
  EXPECT_TRUE(cfg->computeLimited(1));
  EXPECT_FALSE(cfg->computeLimited(3));
  env.vars["GPU_CORE_UTILIZATION_POLICY"] = "DISABLE";
  cfg = loadLimiterConfig(env.lookup(), kNoFixedFile);
  ASSERT_TRUE(cfg.ok());
  EXPECT_FALSE(cfg->computeLimited(1));
}

TEST(LimiterConfig, BadValuesNameTheVariable) {
  struct Case {
    const char* key;
    const char* value;
  } cases[] = {{"CUDA_DEVICE_MEMORY_LIMIT", "1GB"},   {"CUDA_DEVICE_MEMORY_LIMIT_3", "lots"},
               {"CUDA_DEVICE_SM_LIMIT", "150"},       {"CUDA_DEVICE_SM_LIMIT_0", "x"},
               {"CUDA_OVERSUBSCRIBE", "maybe"},       {"CUDA_TASK_PRIORITY", "high"},
               {"GPU_CORE_UTILIZATION_POLICY", "max"}};
  for (const auto& c : cases) {
    FakeEnv env{{{c.key, c.value}}};
    auto cfg = loadLimiterConfig(env.lookup(), kNoFixedFile);
    ASSERT_FALSE(cfg.ok()) << c.key;
    EXPECT_NE(cfg.error().message.find(c.key), std::string::npos) << cfg.error().message;
    EXPECT_NE(cfg.error().message.find(c.value), std::string::npos) << cfg.error().message;
  }
}

TEST(LimiterConfig, LimitsFileWinsOverEnvironment) {
  TempDir dir;
  std::string file = dir.write("limits.env",
                               "# written by the node agent\n"
                               "CUDA_DEVICE_MEMORY_LIMIT_0=1024m\n"
                               "\n"
                               "CUDA_DEVICE_SM_LIMIT=30\n"
                               "CUDA_DEVICE_MEMORY_SHARED_CACHE=/run/vgpu/region\n");
  FakeEnv env{{{"VGPU_LIMITS_FILE", file},
               {"CUDA_DEVICE_MEMORY_LIMIT_0", "64g"},
               {"CUDA_DEVICE_SM_LIMIT", "100"},
               {"CUDA_DEVICE_MEMORY_SHARED_CACHE", "/tmp/mine"},
               {"CUDA_DEVICE_MEMORY_LIMIT_1", "2g"}}};
  auto cfg = loadLimiterConfig(env.lookup(), kNoFixedFile);
  ASSERT_TRUE(cfg.ok()) << cfg.error().message;
  EXPECT_EQ(cfg->devices[0].memoryBytes, 1024ull << 20);
  EXPECT_EQ(cfg->devices[0].smPercent, 30u);
  EXPECT_EQ(cfg->devices[1].memoryBytes, 2ull << 30);  // not in the file: env applies
  EXPECT_EQ(cfg->regionPath, "/run/vgpu/region");
  EXPECT_EQ(cfg->limitsFile, file);
}

// The context overhead libvgpu.so charges comes from the node agent's read-only file, never
// from the environment (nor from the region, which the tenant can write: memory_hooks.cpp).
TEST(LimiterConfigSecurity, ContextOverheadIsTakenFromTheLimitsFileOnly) {
  TempDir dir;
  std::string file = dir.write("limits.env", "VGPU_CONTEXT_OVERHEAD=300m\n");
  FakeEnv env{{{"VGPU_LIMITS_FILE", file}, {"VGPU_CONTEXT_OVERHEAD", "1"}}};
  auto cfg = loadLimiterConfig(env.lookup(), kNoFixedFile);
  ASSERT_TRUE(cfg.ok()) << cfg.error().message;
  EXPECT_EQ(cfg->contextOverhead, 300ull << 20);
  FakeEnv envOnly{{{"VGPU_CONTEXT_OVERHEAD", "1"}}};
  cfg = loadLimiterConfig(envOnly.lookup(), kNoFixedFile);
  ASSERT_TRUE(cfg.ok()) << cfg.error().message;
  EXPECT_EQ(cfg->contextOverhead, 0u);
  std::string bad = dir.write("bad.env", "VGPU_CONTEXT_OVERHEAD=lots\n");
  FakeEnv envBad{{{"VGPU_LIMITS_FILE", bad}}};
  cfg = loadLimiterConfig(envBad.lookup(), kNoFixedFile);
  ASSERT_FALSE(cfg.ok());
  EXPECT_NE(cfg.error().message.find("VGPU_CONTEXT_OVERHEAD"), std::string::npos) << cfg.error().message;
}

TEST(LimiterConfig, FileLimitForAllDevicesBeatsAnIndexedOneFromTheEnvironment) {
  TempDir dir;
  std::string file = dir.write("limits.env", "CUDA_DEVICE_MEMORY_LIMIT=1g\nCUDA_DEVICE_SM_LIMIT=20\n");
  FakeEnv env{{{"VGPU_LIMITS_FILE", file}, {"CUDA_DEVICE_MEMORY_LIMIT_0", "64g"}, {"CUDA_DEVICE_SM_LIMIT_3", "100"}}};
  auto cfg = loadLimiterConfig(env.lookup(), kNoFixedFile);
  ASSERT_TRUE(cfg.ok()) << cfg.error().message;
  EXPECT_EQ(cfg->devices[0].memoryBytes, 1ull << 30);
  EXPECT_EQ(cfg->devices[3].smPercent, 20u);
}

TEST(LimiterConfig, FixedFileWinsOverTheNamedOne) {
  TempDir dir;
  std::string fixed = dir.write("fixed.env", "CUDA_DEVICE_MEMORY_LIMIT=1g\n");
  std::string named = dir.write("named.env", "CUDA_DEVICE_MEMORY_LIMIT=9g\n");
  FakeEnv env{{{"VGPU_LIMITS_FILE", named}}};
  auto cfg = loadLimiterConfig(env.lookup(), fixed.c_str());
  ASSERT_TRUE(cfg.ok()) << cfg.error().message;
  EXPECT_EQ(cfg->devices[0].memoryBytes, 1ull << 30);
}

TEST(LimiterConfig, FileErrorsNameFileAndLine) {
  TempDir dir;
  struct Case {
    const char* content;
    const char* expect;
  } cases[] = {{"CUDA_DEVICE_MEMORY_LIMIT=1g\nnonsense\n", ":2: expected KEY=VALUE"},
               {"CUDA_DEVICE_MEMORY_LIMT=1g\n", ":1: unknown key 'CUDA_DEVICE_MEMORY_LIMT'"},
               {"CUDA_DEVICE_MEMORY_LIMIT_16=1g\n", ":1: unknown key"},
               {"CUDA_DEVICE_SM_LIMIT=1\nCUDA_DEVICE_SM_LIMIT=2\n", ":2: 'CUDA_DEVICE_SM_LIMIT' given twice"},
               {"CUDA_DEVICE_MEMORY_LIMIT_2=1Gi\n", "CUDA_DEVICE_MEMORY_LIMIT_2 in "}};
  for (const auto& c : cases) {
    std::string file = dir.write("bad.env", c.content);
    FakeEnv env{{{"VGPU_LIMITS_FILE", file}}};
    auto cfg = loadLimiterConfig(env.lookup(), kNoFixedFile);
    ASSERT_FALSE(cfg.ok()) << c.content;
    EXPECT_NE(cfg.error().message.find(c.expect), std::string::npos) << cfg.error().message;
    EXPECT_NE(cfg.error().message.find(file), std::string::npos) << cfg.error().message;
  }
}

TEST(LimiterConfig, NamedFileThatIsMissingIsAnError) {
  FakeEnv env{{{"VGPU_LIMITS_FILE", "/nonexistent/limits.env"}}};
  auto cfg = loadLimiterConfig(env.lookup(), kNoFixedFile);
  ASSERT_FALSE(cfg.ok());
  EXPECT_NE(cfg.error().message.find("/nonexistent/limits.env"), std::string::npos);
}

TEST(LimiterConfig, ParsesOversubscribePriorityAndPolicy) {
  FakeEnv env{{{"CUDA_OVERSUBSCRIBE", "TRUE"},
               {"CUDA_TASK_PRIORITY", "-2"},
               {"GPU_CORE_UTILIZATION_POLICY", "force"},
               {"VGPU_ACTIVITY_BOARD", "/var/run/vgpu-node"}}};
  auto cfg = loadLimiterConfig(env.lookup(), kNoFixedFile);
  ASSERT_TRUE(cfg.ok()) << cfg.error().message;
  EXPECT_TRUE(cfg->oversubscribe);
  EXPECT_EQ(cfg->priority, -2);
  EXPECT_TRUE(cfg->prioritySet);
  EXPECT_EQ(cfg->corePolicy, CorePolicy::kForce);
  EXPECT_EQ(cfg->activityBoard, "/var/run/vgpu-node");
}

// HAMi's default: a container that names no priority is a low-priority tenant.
TEST(LimiterConfig, WithoutAPriorityATenantIsLowPriority) {
  FakeEnv env{{}};
  auto cfg = loadLimiterConfig(env.lookup(), kNoFixedFile);
  ASSERT_TRUE(cfg.ok()) << cfg.error().message;
  EXPECT_EQ(cfg->priority, 1);
  EXPECT_FALSE(cfg->prioritySet);
  EXPECT_EQ(cfg->corePolicy, CorePolicy::kDefault);
  EXPECT_EQ(cfg->activityBoard, "");
}

// ---- HAMi-core's variables (issue 28): the same meaning, and never a way out of the file ----

// HAMi-core reads limits with strtoul(..., 0), where a leading 0 means octal ("010m" is 8 MiB
// there): such values are refused, so no value means one thing to HAMi-core and another here.
TEST(LimiterConfig, ValuesHamiCoreReadsAsOctalAreRefused) {
  for (const char* bad : {"010m", "0100", "00"}) {
    auto r = parseMemorySize(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.error().message.find("octal"), std::string::npos) << r.error().message;
  }
  for (const char* bad : {"030", "00"}) EXPECT_FALSE(parsePercent(bad).ok()) << bad;
  EXPECT_EQ(*parseMemorySize("0m"), 0u);
  EXPECT_EQ(*parsePercent("0"), 0u);
}

// With a limits file (the node agent's, read-only in the container), the container's own
// environment may make each limit tighter, never looser: one case per variable.
TEST(LimiterConfigSecurity, WithALimitsFileTheEnvironmentCanOnlyTighten) {
  struct Case {
    const char* what;
    const char* file;
    std::map<std::string, std::string> env;
    std::function<void(const LimiterConfig&)> check;
  } cases[] = {
      {"a smaller memory limit applies", "CUDA_DEVICE_MEMORY_LIMIT_0=1024m\n", {{"CUDA_DEVICE_MEMORY_LIMIT_0", "512m"}},
       [](const LimiterConfig& c) { EXPECT_EQ(c.devices[0].memoryBytes, 512ull << 20); }},
      {"a larger one does not", "CUDA_DEVICE_MEMORY_LIMIT_0=1024m\n", {{"CUDA_DEVICE_MEMORY_LIMIT", "64g"}},
       [](const LimiterConfig& c) { EXPECT_EQ(c.devices[0].memoryBytes, 1024ull << 20); }},
      {"HAMi's order inside the environment: the indexed one wins", "CUDA_DEVICE_MEMORY_LIMIT_0=1024m\n",
       {{"CUDA_DEVICE_MEMORY_LIMIT", "256m"}, {"CUDA_DEVICE_MEMORY_LIMIT_0", "2048m"}},
       [](const LimiterConfig& c) { EXPECT_EQ(c.devices[0].memoryBytes, 1024ull << 20); }},
      {"0 in the environment removes no limit", "CUDA_DEVICE_MEMORY_LIMIT_0=1024m\nCUDA_DEVICE_SM_LIMIT_0=30\n",
       {{"CUDA_DEVICE_MEMORY_LIMIT_0", "0"}, {"CUDA_DEVICE_SM_LIMIT_0", "0"}},
       [](const LimiterConfig& c) {
         EXPECT_EQ(c.devices[0].memoryBytes, 1024ull << 20);
         EXPECT_EQ(c.devices[0].smPercent, 30u);
       }},
      {"a smaller compute limit applies, a larger one does not", "CUDA_DEVICE_SM_LIMIT_0=30\nCUDA_DEVICE_SM_LIMIT_1=30\n",
       {{"CUDA_DEVICE_SM_LIMIT_0", "10"}, {"CUDA_DEVICE_SM_LIMIT_1", "90"}},
       [](const LimiterConfig& c) {
         EXPECT_EQ(c.devices[0].smPercent, 10u);
         EXPECT_EQ(c.devices[1].smPercent, 30u);
       }},
      {"a compute limit where the file has none applies", "CUDA_DEVICE_SM_LIMIT_0=100\n",
       {{"CUDA_DEVICE_SM_LIMIT", "50"}}, [](const LimiterConfig& c) { EXPECT_EQ(c.devices[0].smPercent, 50u); }},
      {"policy disable does not", "GPU_CORE_UTILIZATION_POLICY=default\n", {{"GPU_CORE_UTILIZATION_POLICY", "disable"}},
       [](const LimiterConfig& c) { EXPECT_EQ(c.corePolicy, CorePolicy::kDefault); }},
      {"policy disable does not where the file names none", "CUDA_DEVICE_SM_LIMIT_0=30\n",
       {{"GPU_CORE_UTILIZATION_POLICY", "disable"}}, [](const LimiterConfig& c) {
         EXPECT_EQ(c.corePolicy, CorePolicy::kDefault);
         EXPECT_TRUE(c.computeLimited(0));
       }},
      {"policy force does", "GPU_CORE_UTILIZATION_POLICY=default\n", {{"GPU_CORE_UTILIZATION_POLICY", "FORCE"}},
       [](const LimiterConfig& c) { EXPECT_EQ(c.corePolicy, CorePolicy::kForce); }},
      {"an unset policy leaves the file's disable", "GPU_CORE_UTILIZATION_POLICY=disable\n", {},
       [](const LimiterConfig& c) { EXPECT_EQ(c.corePolicy, CorePolicy::kDisable); }},
      {"oversubscription cannot be turned on", "CUDA_DEVICE_MEMORY_LIMIT_0=1g\n", {{"CUDA_OVERSUBSCRIBE", "true"}},
       [](const LimiterConfig& c) { EXPECT_FALSE(c.oversubscribe); }},
      {"but can be turned off", "CUDA_OVERSUBSCRIBE=true\n", {{"CUDA_OVERSUBSCRIBE", "false"}},
       [](const LimiterConfig& c) { EXPECT_FALSE(c.oversubscribe); }},
      {"high priority cannot be taken", "CUDA_DEVICE_MEMORY_LIMIT_0=1g\n", {{"CUDA_TASK_PRIORITY", "0"}},
       [](const LimiterConfig& c) { EXPECT_NE(c.priority, 0); }},
      {"nor kept against the file's low one", "CUDA_TASK_PRIORITY=1\n", {{"CUDA_TASK_PRIORITY", "0"}},
       [](const LimiterConfig& c) { EXPECT_EQ(c.priority, 1); }},
      {"but can be given up", "CUDA_TASK_PRIORITY=0\n", {{"CUDA_TASK_PRIORITY", "1"}},
       [](const LimiterConfig& c) { EXPECT_EQ(c.priority, 1); }},
      {"CUDA_DISABLE_CONTROL turns nothing off", "CUDA_DEVICE_MEMORY_LIMIT_0=1g\nCUDA_DEVICE_SM_LIMIT_0=30\n",
       {{"CUDA_DISABLE_CONTROL", "true"}}, [](const LimiterConfig& c) {
         EXPECT_FALSE(c.controlDisabled);
         EXPECT_TRUE(c.disableControlIgnored);
         EXPECT_EQ(c.devices[0].memoryBytes, 1ull << 30);
         EXPECT_TRUE(c.computeLimited(0));
       }},
  };
  TempDir dir;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    std::string file = dir.write("limits.env", c.file);
    FakeEnv env{c.env};
    env.vars["VGPU_LIMITS_FILE"] = file;
    auto cfg = loadLimiterConfig(env.lookup(), kNoFixedFile);
    ASSERT_TRUE(cfg.ok()) << cfg.error().message;
    c.check(*cfg);
  }
}

// A malformed value is refused wherever it comes from: with a file, the environment's too.
TEST(LimiterConfigSecurity, WithALimitsFileABadValueInTheEnvironmentIsStillRefused) {
  TempDir dir;
  std::string file = dir.write("limits.env", "CUDA_DEVICE_MEMORY_LIMIT_0=1g\n");
  FakeEnv env{{{"VGPU_LIMITS_FILE", file}, {"CUDA_DEVICE_MEMORY_LIMIT_0", "1GB"}}};
  auto cfg = loadLimiterConfig(env.lookup(), kNoFixedFile);
  ASSERT_FALSE(cfg.ok());
  EXPECT_NE(cfg.error().message.find("CUDA_DEVICE_MEMORY_LIMIT_0='1GB'"), std::string::npos) << cfg.error().message;
}

// Without a limits file (a HAMi-style deployment: HAMi's device plugin sets the environment),
// CUDA_DISABLE_CONTROL=true means what it means in HAMi: the container runs unlimited. Values
// as Go's strconv.ParseBool, which HAMi's plugin uses; anything else is refused, not guessed.
TEST(LimiterConfig, WithoutALimitsFileCudaDisableControlTurnsEveryLimitOff) {
  for (const char* yes : {"true", "TRUE", "True", "t", "1"}) {
    FakeEnv env{{{"CUDA_DISABLE_CONTROL", yes},
                 {"CUDA_DEVICE_MEMORY_LIMIT_0", "1g"},
                 {"CUDA_DEVICE_SM_LIMIT", "30"},
                 {"GPU_CORE_UTILIZATION_POLICY", "force"},
                 {"CUDA_TASK_PRIORITY", "0"}}};
    auto cfg = loadLimiterConfig(env.lookup(), kNoFixedFile);
    ASSERT_TRUE(cfg.ok()) << yes << ": " << cfg.error().message;
    EXPECT_TRUE(cfg->controlDisabled) << yes;
    EXPECT_EQ(cfg->devices[0].memoryBytes, 0u) << yes;
    EXPECT_FALSE(cfg->computeLimited(0)) << yes;
    EXPECT_NE(cfg->priority, 0) << yes;
  }
  for (const char* no : {"false", "0", "f", "False", ""}) {
    FakeEnv env{{{"CUDA_DISABLE_CONTROL", no}, {"CUDA_DEVICE_MEMORY_LIMIT_0", "1g"}}};
    auto cfg = loadLimiterConfig(env.lookup(), kNoFixedFile);
    ASSERT_TRUE(cfg.ok()) << no << ": " << cfg.error().message;
    EXPECT_FALSE(cfg->controlDisabled) << no;
    EXPECT_EQ(cfg->devices[0].memoryBytes, 1ull << 30) << no;
  }
  FakeEnv bad{{{"CUDA_DISABLE_CONTROL", "yes please"}}};
  auto cfg = loadLimiterConfig(bad.lookup(), kNoFixedFile);
  ASSERT_FALSE(cfg.ok());
  EXPECT_NE(cfg.error().message.find("CUDA_DISABLE_CONTROL='yes please'"), std::string::npos) << cfg.error().message;
}

}  // namespace
}  // namespace vgpu
