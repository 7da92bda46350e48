#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>

#include "nvidia_test_support.h"
#include "smi_xml.h"

namespace vgpu::nvidia {
namespace {

using ::testing::HasSubstr;

// Shaped like driver 550's output (DTD v12), trimmed to what discovery reads plus the traps:
// bar1_memory_usage before fb_memory_usage with the same child names, MIG devices with their
// own fb_memory_usage, N/A everywhere a GPU may say it.
constexpr const char* kTwoGpus = R"(<?xml version="1.0" ?>
<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">
<nvidia_smi_log>
  <driver_version>550.54.15</driver_version>
  <attached_gpus>2</attached_gpus>
  <gpu id="00000000:3B:00.0">
    <product_name>NVIDIA A100-SXM4-80GB</product_name>
    <mig_mode><current_mig>Enabled</current_mig><pending_mig>Enabled</pending_mig></mig_mode>
    <mig_devices>
      <mig_device><index>0</index><fb_memory_usage><total>9984 MiB</total></fb_memory_usage></mig_device>
    </mig_devices>
    <uuid>GPU-3b000000-1111-2222-3333-444444444444</uuid>
    <minor_number>2</minor_number>
    <pci><pci_bus_id>00000000:3B:00.0</pci_bus_id></pci>
    <bar1_memory_usage><total>131072 MiB</total></bar1_memory_usage>
    <fb_memory_usage><total>81920 MiB</total><reserved>569 MiB</reserved><used>N/A</used><free>N/A</free></fb_memory_usage>
  </gpu>
  <gpu id="00000000:86:00.0">
    <product_name>Tesla T4</product_name>
    <mig_mode><current_mig>N/A</current_mig><pending_mig>N/A</pending_mig></mig_mode>
    <mig_devices>None</mig_devices>
    <uuid>GPU-86000000-1111-2222-3333-444444444444</uuid>
    <minor_number>N/A</minor_number>
    <pci><pci_bus_id>N/A</pci_bus_id></pci>
    <fb_memory_usage><total>15360 MiB</total></fb_memory_usage>
  </gpu>
</nvidia_smi_log>
)";

TEST(NvidiaSmiXml, ReadsEveryGpuWithItsFields) {
  auto gpus = parseSmiXml(kTwoGpus);
  ASSERT_TRUE(gpus.ok()) << gpus.error().message;
  ASSERT_EQ(gpus->size(), 2u);
  const GpuInfo& a = (*gpus)[0];
  EXPECT_EQ(a.uuid, "GPU-3b000000-1111-2222-3333-444444444444");
  EXPECT_EQ(a.index, 0);
  EXPECT_EQ(a.name, "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(a.memoryMiB, 81920u);  // not bar1's 131072, not the MIG device's 9984
  EXPECT_EQ(a.minor, 2);
  EXPECT_EQ(a.pciBusId, "00000000:3B:00.0");
  EXPECT_EQ(a.mig, MigMode::kEnabled);
  EXPECT_TRUE(a.error.empty());
  const GpuInfo& t = (*gpus)[1];
  EXPECT_EQ(t.index, 1);
  EXPECT_EQ(t.name, "Tesla T4");
  EXPECT_EQ(t.memoryMiB, 15360u);
  EXPECT_EQ(t.minor, -1);                     // N/A
  EXPECT_EQ(t.pciBusId, "00000000:86:00.0");  // from the id attribute when the element says N/A
  EXPECT_EQ(t.mig, MigMode::kUnknown);
  EXPECT_TRUE(t.error.empty());
}

TEST(NvidiaSmiXml, KeepsAGpuWithMissingOrUnreadableFieldsAsAnError) {
  const struct {
    const char* description;
    const char* gpu;
    const char* mentions;
  } cases[] = {
      {"no uuid element", "<product_name>X</product_name><fb_memory_usage><total>100 MiB</total></fb_memory_usage>",
       "reports no <uuid>"},
      {"uuid N/A", "<uuid>N/A</uuid><fb_memory_usage><total>100 MiB</total></fb_memory_usage>", "reports no <uuid>"},
      {"uuid garbage", "<uuid>not-a-uuid</uuid><fb_memory_usage><total>100 MiB</total></fb_memory_usage>",
       "malformed <uuid>"},
      {"no memory", "<uuid>GPU-1</uuid>", "no memory size"},
      {"memory N/A", "<uuid>GPU-1</uuid><fb_memory_usage><total>N/A</total></fb_memory_usage>", "no memory size"},
      {"memory without unit", "<uuid>GPU-1</uuid><fb_memory_usage><total>100</total></fb_memory_usage>",
       "cannot read memory size \"100\""},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.description);
    const std::string xml = std::string("<nvidia_smi_log><gpu id=\"00000000:01:00.0\">") + c.gpu + "</gpu></nvidia_smi_log>";
    auto gpus = parseSmiXml(xml);
    ASSERT_TRUE(gpus.ok()) << gpus.error().message;
    ASSERT_EQ(gpus->size(), 1u);
    EXPECT_THAT((*gpus)[0].error, HasSubstr(c.mentions));
    EXPECT_THAT((*gpus)[0].error, HasSubstr("nvidia-smi GPU 0"));
    EXPECT_EQ((*gpus)[0].pciBusId, "00000000:01:00.0");
  }
}

TEST(NvidiaSmiXml, RefusesWhatIsNotItsXml) {
  const struct {
    const char* text;
    const char* mentions;
  } cases[] = {
      {"", "nvidia-smi -q -x output"},
      {"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.", "nvidia-smi -q -x output"},
      {"<nvidia_smi_log><gpu><uuid>GPU-1</uuid></gpu>", "not valid XML"},
      {"<nvidia_smi_log><gpu></nvidia_smi_log>", "not valid XML"},
      {"<other/>", "no <nvidia_smi_log>"},
  };
  for (const auto& c : cases) {
    auto gpus = parseSmiXml(c.text);
    ASSERT_FALSE(gpus.ok()) << c.text;
    EXPECT_THAT(gpus.error().message, HasSubstr(c.mentions)) << c.text;
  }
}

TEST(NvidiaSmiXml, SurvivesTruncatedAndCorruptedOutput) {
  // Whatever nvidia-smi prints (a crash mid-write, a driver bug), parsing ends with GPUs or an
  // error; every GPU it returns either has a UUID or says why not.
  const std::string full = kTwoGpus;
  auto check = [](const std::string& text) {
    auto gpus = parseSmiXml(text);
    if (!gpus.ok()) {
      EXPECT_FALSE(gpus.error().message.empty());
      return;
    }
    for (const auto& g : *gpus) EXPECT_TRUE(!g.uuid.empty() || !g.error.empty());
  };
  for (size_t n = 0; n <= full.size(); ++n) check(full.substr(0, n));
  std::mt19937 random(20261202);
  const char junk[] = {'<', '>', '/', '&', '"', '\0', 'N', 'A', ' ', '\xff', '9'};
  for (int i = 0; i < 3000; ++i) {
    std::string text = full;
    for (int k = 0; k < 3; ++k) text[random() % text.size()] = junk[random() % sizeof junk];
    check(text);
  }
}

TEST(NvidiaSmiXml, AcceptsANodeWithoutGpus) {
  auto gpus = parseSmiXml("<nvidia_smi_log><attached_gpus>0</attached_gpus></nvidia_smi_log>");
  ASSERT_TRUE(gpus.ok());
  EXPECT_TRUE(gpus->empty());
}

TEST(NvidiaSmiXml, ParsesMemoryWithUnits) {
  const struct {
    const char* text;
    std::optional<std::uint64_t> mib;
  } cases[] = {{"81920 MiB", 81920}, {" 80 GiB ", 81920}, {"2048 KiB", 2}, {"N/A", std::nullopt},
               {"100", std::nullopt}, {"100 MB", std::nullopt}, {"-5 MiB", std::nullopt}, {"", std::nullopt},
               {"99999999999999999999 MiB", std::nullopt}};
  for (const auto& c : cases) EXPECT_EQ(parseMiB(c.text), c.mib) << c.text;
}

TEST(NvidiaSmiXml, RunProgramReportsFailuresAndTimeouts) {
  auto ok = runProgram("/bin/sh", {"-c", "echo out; echo err >&2"}, std::chrono::seconds(5));
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ(*ok, "out\n");

  auto exit3 = runProgram("/bin/sh", {"-c", "echo broken driver >&2; exit 3"}, std::chrono::seconds(5));
  ASSERT_FALSE(exit3.ok());
  EXPECT_THAT(exit3.error().message, HasSubstr("exited with status 3: broken driver"));

  auto missing = runProgram("/nonexistent/nvidia-smi", {"-q", "-x"}, std::chrono::seconds(5));
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.error().message, HasSubstr("cannot run /nonexistent/nvidia-smi"));

  const auto start = std::chrono::steady_clock::now();
  auto slow = runProgram("/bin/sh", {"-c", "sleep 30"}, std::chrono::milliseconds(200));
  ASSERT_FALSE(slow.ok());
  EXPECT_THAT(slow.error().message, HasSubstr("did not finish within 200 ms"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));

  const auto start2 = std::chrono::steady_clock::now();
  auto silent = runProgram("/bin/sh", {"-c", "exec >/dev/null 2>&1; sleep 30"}, std::chrono::milliseconds(200));
  ASSERT_FALSE(silent.ok());
  EXPECT_THAT(silent.error().message, HasSubstr("did not finish within 200 ms"));
  EXPECT_LT(std::chrono::steady_clock::now() - start2, std::chrono::seconds(5));
}

}  // namespace
}  // namespace vgpu::nvidia
