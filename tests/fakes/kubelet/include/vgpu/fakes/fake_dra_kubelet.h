#pragma once
// A kubelet double for DRA drivers: the plugin watcher (it finds <driver>-reg.sock files in
// the registration folder, asks GetInfo, accepts type DRAPlugin with a version it speaks,
// newest first, and answers NotifyRegistrationStatus) and the DRA manager's client of
// NodePrepareResources / NodeUnprepareResources, in the version it chose, with the
// kubelet's checks on the answer (every claim needs an entry). A restart forgets every
// plugin and finds them again, as a restarted kubelet does. No gRPC type appears here.

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "vgpu/result.h"

namespace vgpu::fakes {

struct FakeDraKubeletOptions {
  std::string registrationDir;  ///< the plugin watcher's folder (plugins_registry)
  /// The DRAPlugin versions this kubelet speaks, preferred first (1.34+: v1 then v1beta1).
  std::vector<std::string> versions{"v1.DRAPlugin", "v1beta1.DRAPlugin"};
};

/// A registered DRA plugin as the kubelet recorded it.
struct DraPluginRecord {
  std::string driver;
  std::string endpoint;
  std::string version;  ///< the one chosen ("v1.DRAPlugin")
  std::vector<std::string> supportedVersions;
  bool accepted = false;
  std::string error;  ///< why it was refused
};

struct DraClaim {
  std::string ns = "default";
  std::string uid;
  std::string name;
};

struct DraPreparedDevice {
  std::vector<std::string> requestNames;
  std::string pool;
  std::string device;
  std::vector<std::string> cdiDeviceIds;
  std::optional<std::string> shareId;  ///< v1 only, when the plugin set it
};

/// One claim's answer: devices, or the plugin's per-claim error.
struct DraClaimAnswer {
  std::vector<DraPreparedDevice> devices;
  std::string error;
};

class FakeDraKubelet {
 public:
  static Result<std::unique_ptr<FakeDraKubelet>> start(FakeDraKubeletOptions options);
  ~FakeDraKubelet();  ///< stop()
  FakeDraKubelet(const FakeDraKubelet&) = delete;
  FakeDraKubelet& operator=(const FakeDraKubelet&) = delete;

  /// Waits until `driver` is registered (accepted or refused) or `timeout` passes.
  std::optional<DraPluginRecord> waitForPlugin(const std::string& driver, std::chrono::milliseconds timeout);
  std::optional<DraPluginRecord> plugin(const std::string& driver) const;

  /// NodePrepareResources to an accepted plugin, keyed by claim uid. Errors: no such
  /// plugin, a gRPC error (the kubelet voids the whole answer), a claim missing from it.
  Result<std::map<std::string, DraClaimAnswer>> prepare(const std::string& driver, const std::vector<DraClaim>& claims);
  /// NodeUnprepareResources; per claim uid, its error ("" = done). Errors as for prepare.
  Result<std::map<std::string, std::string>> unprepare(const std::string& driver, const std::vector<DraClaim>& claims);

  /// Forgets every plugin and finds them again from the registration folder.
  void restart();
  void stop();

  struct Impl;

 private:
  explicit FakeDraKubelet(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace vgpu::fakes
