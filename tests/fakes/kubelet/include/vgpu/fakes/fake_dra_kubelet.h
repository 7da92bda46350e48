#pragma once
// A kubelet double for DRA drivers: the plugin watcher (it finds <driver>-reg.sock files in
// the registration folder, asks GetInfo, accepts type DRAPlugin with a version it speaks,
// newest first, and answers NotifyRegistrationStatus) and the DRA manager's client of
// NodePrepareResources / NodeUnprepareResources, in the version it chose, with the
// kubelet's checks on the answer (every claim needs an entry); and, with health versions
// set (the ResourceHealthStatus gate), the DRAResourceHealth watch as pkg/kubelet/cm/dra
// runs it: one NodeWatchResources stream per plugin, opened again 5 s after it ends,
// given up on Unimplemented (1.37), each device read as Unknown once its last report is
// older than the timeout sent with it (30 s when none). A restart forgets every plugin and
// finds them again, as a restarted kubelet does. No gRPC type appears here.

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
  /// The DRAResourceHealth versions this kubelet watches, preferred first; empty: the
  /// ResourceHealthStatus gate is off (alpha until 1.35; 1.37: v1 then v1alpha1).
  std::vector<std::string> healthVersions;
  /// 1.37 watches only a plugin that advertises a health version; 1.34 (false) watches the
  /// first of healthVersions (v1alpha1) on every plugin, advertised or not.
  bool healthNeedsAdvertisement = true;
  /// How long after a stream ends the kubelet opens the next (wait.UntilWithContext, 5 s).
  std::chrono::milliseconds healthRetry{5000};
};

/// A registered DRA plugin as the kubelet recorded it.
struct DraPluginRecord {
  std::string driver;
  std::string endpoint;
  std::string version;  ///< the one chosen ("v1.DRAPlugin")
  std::string healthVersion;  ///< the health service watched ("v1.DRAResourceHealth"); empty: none
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

/// A device's health as the kubelet reads it from its cache.
struct DraDeviceHealth {
  std::string health = "Unknown";  ///< "Healthy", "Unhealthy" or "Unknown" (timed out, or never reported)
  std::string message;
  std::int64_t lastUpdatedTime = 0;  ///< what the plugin sent (Unix seconds)
  std::int64_t timeoutSeconds = 0;   ///< what the plugin sent
};

/// The health watch of one plugin.
struct DraHealthWatch {
  std::size_t streamsOpened = 0;
  std::size_t reports = 0;  ///< NodeWatchResourcesResponse messages received
  std::string lastEnd;      ///< how the last stream ended ("" while open): gRPC code and message
  bool gaveUp = false;      ///< Unimplemented: the kubelet stopped watching
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

  /// The device's health in the kubelet's cache now (Unknown when never reported or timed out).
  DraDeviceHealth deviceHealth(const std::string& driver, const std::string& pool, const std::string& device) const;
  /// Waits until deviceHealth(...).health is `health` or `timeout` passes; the last read.
  DraDeviceHealth waitForHealth(const std::string& driver, const std::string& pool, const std::string& device,
                                const std::string& health, std::chrono::milliseconds timeout) const;
  DraHealthWatch healthWatch(const std::string& driver) const;

  /// Forgets every plugin and finds them again from the registration folder.
  void restart();
  void stop();

  struct Impl;

 private:
  explicit FakeDraKubelet(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace vgpu::fakes
