// The C++ adapter's side of ABI growth: what a backend built with this adapter writes into
// a sink depends on the loader's version, so an older node agent's shorter sink is never
// read past its end (ContainerSpec::notices, the sink's `notice` slot, came in 1.2; `hook`
// in 1.8, where an older agent gets a refusal instead: a hook must not be dropped).
#include <gtest/gtest.h>

#include "sim_backend.h"
#include "test_support.h"
#include "vgpu/sdk/backend_adapter.h"

namespace vgpu::sim {
namespace {

using vgpu::testing::TempDir;

/// Whether NotingBackend also asks for an OCI hook.
bool gAddHook = false;

/// The sim backend, plus a note on every container it sets up (and a hook, with gAddHook).
class NotingBackend {
 public:
  static Result<std::unique_ptr<NotingBackend>> create(const BackendParams& params) {
    auto inner = SimBackend::create(params);
    if (!inner.ok()) return std::move(inner).error();
    auto b = std::make_unique<NotingBackend>();
    b->inner_ = std::move(inner).value();
    return b;
  }
  const std::vector<ResourceName>& resources() const { return inner_->resources(); }
  Result<std::optional<DeviceRequest>> parseRequest(const ContainerResources& c, const Annotations& a) const {
    return inner_->parseRequest(c, a);
  }
  void fit(const vgpu_device_request& r, const vgpu_device& d, const vgpu_device_usage& u, vgpu_fit_result& f) const {
    inner_->fit(r, d, u, f);
  }
  Result<ContainerSpec> containerSpec(const ContainerGrant& grant) {
    auto spec = inner_->containerSpec(grant);
    if (spec.ok()) spec->notices.push_back({"SimNote", "set up " + grant.container.containerName});
    if (spec.ok() && gAddHook) spec->hooks.push_back({"createContainer", "/usr/local/vgpu/hook", {"hook", "a"}, {}});
    return spec;
  }
  Status release(const ContainerRef& c) { return inner_->release(c); }
  Status reconcile(const std::vector<ContainerRef>& live) { return inner_->reconcile(live); }

 private:
  std::unique_ptr<SimBackend> inner_;
};

struct Notes {
  std::vector<std::string> seen;
  std::vector<std::string> hooks;
  vgpu_status status = VGPU_OK;
  std::string error;
};

/// Fills the table as a loader of `loaderVersion` would get it, creates the backend, and
/// asks for one container's spec through a sink whose `notice` slot records what it gets.
Notes throughTheAbi(uint32_t loaderVersion) {
  TempDir dir;
  vgpu_backend_table table{};
  table.struct_size = sizeof(table);
  EXPECT_EQ(sdk::fillTable<NotingBackend>(loaderVersion, &table, "sim", "test"), 0);
  const std::string devices = dir.write("devices.yaml", "devices:\n  - {id: SIM-0, model: Sim, memoryMiB: 1000}\n");
  const vgpu_kv options[] = {{"devicesFile", devices.c_str()}};
  vgpu_backend_config config{};
  config.struct_size = sizeof(config);
  config.name = "sim";
  config.options = {options, 1};
  vgpu_backend* backend = nullptr;
  vgpu_error_buf err{};
  char text[256] = "";
  err.text = text;
  err.capacity = sizeof text;
  EXPECT_EQ(table.create(&config, &backend, &err), VGPU_OK) << text;
  const vgpu_grant device{"SIM-0", 0, 500, 10, 0, -1, nullptr};
  vgpu_container_grant grant{};
  grant.struct_size = sizeof(grant);
  grant.holder = "h-1";
  grant.pod_namespace = "default";
  grant.pod_name = "p";
  grant.container_name = "main";
  grant.devices = &device;
  grant.device_count = 1;
  const std::string hostDir = (dir.path() / "c").string();
  grant.host_dir = hostDir.c_str();
  grant.grant_size = sizeof(vgpu_grant);
  Notes notes;
  vgpu_spec_sink sink{};
  sink.ctx = &notes;
  sink.env = [](void*, const char*, const char*) {};
  sink.mount = [](void*, const char*, const char*, uint32_t) {};
  sink.device = [](void*, const char*, const char*, const char*) {};
  sink.annotation = [](void*, const char*, const char*) {};
  sink.notice = [](void* ctx, const char* reason, const char* message) {
    static_cast<Notes*>(ctx)->seen.push_back(std::string(reason) + ": " + message);
  };
  sink.hook = [](void* ctx, const char* name, const char* path, const char* const* args, size_t argCount,
                 const char* const*, size_t) {
    std::string h = std::string(name) + " " + path;
    for (size_t i = 0; i < argCount; ++i) h += std::string(" ") + args[i];
    static_cast<Notes*>(ctx)->hooks.push_back(h);
  };
  notes.status = table.container_spec(backend, &grant, &sink, &err);
  notes.error = text;
  table.destroy(backend);
  return notes;
}

std::vector<std::string> notesThroughTheAbi(uint32_t loaderVersion) {
  Notes n = throughTheAbi(loaderVersion);
  EXPECT_EQ(n.status, VGPU_OK) << n.error;
  return n.seen;
}

TEST(BackendAdapter, WritesNoticesOnlyIntoASinkOfALoaderThatHasTheSlot) {
  EXPECT_EQ(notesThroughTheAbi(VGPU_BACKEND_ABI_VERSION), (std::vector<std::string>{"SimNote: set up main"}));
  // A 1.1 agent's sink ends before `notice`: the slot here holds a recorder, which must stay
  // untouched (in a real 1.1 sink the bytes past its end are not a function at all).
  EXPECT_TRUE(notesThroughTheAbi((VGPU_BACKEND_ABI_MAJOR << 16) | 1u).empty());
}

TEST(BackendAdapter, HandsHooksToA18LoaderAndRefusesTheContainerForAnOlderOne) {
  gAddHook = true;
  Notes now = throughTheAbi(VGPU_BACKEND_ABI_VERSION);
  EXPECT_EQ(now.status, VGPU_OK) << now.error;
  EXPECT_EQ(now.hooks, (std::vector<std::string>{"createContainer /usr/local/vgpu/hook hook a"}));
  Notes older = throughTheAbi((VGPU_BACKEND_ABI_MAJOR << 16) | 7u);
  gAddHook = false;
  EXPECT_EQ(older.status, VGPU_ERROR_UNSUPPORTED);
  EXPECT_NE(older.error.find("cannot declare hooks (it is older than backend ABI 1.8)"), std::string::npos) << older.error;
  EXPECT_TRUE(older.hooks.empty());
}

}  // namespace
}  // namespace vgpu::sim
