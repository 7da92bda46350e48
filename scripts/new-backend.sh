#!/usr/bin/env bash
# Creates a new vgpu backend from the template: a compiling skeleton whose discovery and
# limiter answer VGPU_ERROR_UNSUPPORTED, a stub of the vendor library, CMake lines and a test
# that runs vgpu-backend-check's skeleton profile on it.
#
#   scripts/new-backend.sh NAME [OUTPUT_DIR]      (default OUTPUT_DIR: backends/NAME)
#
# The folder is a standalone CMake project (what a vendor outside this tree builds, against
# an installed vgpu: -DVGPU_SDK_DIR=<prefix>), and it also builds in vgpu's own tree when it
# sits in backends/. See docs/writing-a-backend.md.
set -euo pipefail

usage() { echo "usage: $0 NAME [OUTPUT_DIR]  (NAME: lower-case letters, digits, _; starting with a letter)" >&2; exit 2; }
[[ $# -ge 1 && $# -le 2 ]] || usage
name=$1
[[ $name =~ ^[a-z][a-z0-9_]{0,31}$ ]] || { echo "$0: \"$name\" is not a backend name" >&2; usage; }
root=$(cd "$(dirname "$0")/.." && pwd)
out=${2:-$root/backends/$name}
if [[ -e $out && -n $(ls -A "$out" 2>/dev/null) ]]; then
  echo "$0: $out exists and is not empty; choose another OUTPUT_DIR" >&2
  exit 1
fi
mkdir -p "$out/fake"
Name=$(tr '[:lower:]' '[:upper:]' <<<"${name:0:1}")${name:1}
NAME=$(tr '[:lower:]' '[:upper:]' <<<"$name")  # macros and environment variables

# Every template file below uses @name@, @Name@ and @NAME@; nothing else is substituted.
emit() { sed -e "s/@name@/$name/g" -e "s/@Name@/$Name/g" -e "s/@NAME@/$NAME/g" >"$out/$1"; }

emit CMakeLists.txt <<'EOF'
# The @name@ backend: libvgpu-backend-@name@.so, a stub of its vendor library for tests, and
# a test that runs vgpu-backend-check on it. Standalone:
#   cmake -S . -B build -DVGPU_SDK_DIR=/usr/local && cmake --build build && ctest --test-dir build
# (VGPU_SDK_DIR: where vgpu is installed: include/vgpu, lib/libvgpu_core.a, bin/vgpu-backend-check).
cmake_minimum_required(VERSION 3.25)
project(vgpu-backend-@name@ LANGUAGES C CXX)

if(TARGET vgpu_core)  # inside vgpu's own tree (backends/@name@)
  set(vgpu_sdk vgpu_core)
  set(vgpu_check $<TARGET_FILE:vgpu-backend-check>)
else()
  set(CMAKE_CXX_STANDARD 20)
  set(CMAKE_CXX_STANDARD_REQUIRED ON)
  set(CMAKE_POSITION_INDEPENDENT_CODE ON)
  set(VGPU_SDK_DIR "" CACHE PATH "Where vgpu is installed (include/, lib/, bin/)")
  find_path(VGPU_SDK_INCLUDE_DIR vgpu/sdk/backend_adapter.h HINTS ${VGPU_SDK_DIR}/include)
  find_library(VGPU_CORE_LIBRARY NAMES libvgpu_core.a vgpu_core HINTS ${VGPU_SDK_DIR}/lib)
  find_program(VGPU_BACKEND_CHECK vgpu-backend-check HINTS ${VGPU_SDK_DIR}/bin)
  if(NOT VGPU_SDK_INCLUDE_DIR OR NOT VGPU_CORE_LIBRARY)  # found, or given on the command line
    message(FATAL_ERROR "vgpu SDK not found: set VGPU_SDK_DIR to where vgpu is installed, or "
                        "VGPU_SDK_INCLUDE_DIR and VGPU_CORE_LIBRARY")
  endif()
  add_library(vgpu_sdk INTERFACE)
  target_include_directories(vgpu_sdk INTERFACE ${VGPU_SDK_INCLUDE_DIR})
  target_link_libraries(vgpu_sdk INTERFACE ${VGPU_CORE_LIBRARY} ${CMAKE_DL_LIBS})
  set(vgpu_sdk vgpu_sdk)
  set(vgpu_check ${VGPU_BACKEND_CHECK})
endif()

# vgpu's own warnings (errors included), as every backend in its tree builds.
set(vgpu_warnings -Wall -Wextra -Wpedantic -Werror $<$<COMPILE_LANGUAGE:CXX>:-Wnon-virtual-dtor>)

# The backend: only the entry symbol is exported.
add_library(vgpu_backend_@name@ MODULE @name@_backend.cpp)
target_link_libraries(vgpu_backend_@name@ PRIVATE ${vgpu_sdk})
target_compile_options(vgpu_backend_@name@ PRIVATE ${vgpu_warnings})
set_target_properties(vgpu_backend_@name@ PROPERTIES OUTPUT_NAME vgpu-backend-@name@ PREFIX lib
                      CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
if(DEFINED VGPU_BACKEND_OUTPUT_DIR)
  set_target_properties(vgpu_backend_@name@ PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${VGPU_BACKEND_OUTPUT_DIR})
endif()
target_link_options(vgpu_backend_@name@ PRIVATE -Wl,--exclude-libs,ALL -Wl,--no-undefined)
install(TARGETS vgpu_backend_@name@ LIBRARY DESTINATION lib/vgpu/backends)

# The vendor library as the tests see it: same symbols, devices from a config file.
add_library(fake_@name@ SHARED fake/fake_@name@.c)
target_compile_options(fake_@name@ PRIVATE ${vgpu_warnings})
target_include_directories(fake_@name@ PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})  # for @name@_api.h
set_target_properties(fake_@name@ PROPERTIES OUTPUT_NAME @name@ LIBRARY_OUTPUT_DIRECTORY
                      ${CMAKE_CURRENT_BINARY_DIR}/fake)

if(vgpu_check)
  include(CTest)
  file(GENERATE OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/test/device-config.yaml CONTENT
"version: 1
backends:
  @name@:
    enabled: true
    options: {libraryPath: $<TARGET_FILE:fake_@name@>}
")
  # Skeleton profile until discovery and the limiter are written; then the full one below.
  add_test(NAME @name@.conformance
           COMMAND ${vgpu_check} --config ${CMAKE_CURRENT_BINARY_DIR}/test/device-config.yaml
                   --backend @name@ --library $<TARGET_FILE:vgpu_backend_@name@> --profile skeleton
                   --missing-vendor libraryPath=/nonexistent/lib@name@.so)
  set_tests_properties(@name@.conformance PROPERTIES LABELS conformance TIMEOUT 60)

  # The full profile, once discover and the limiter work: replace the test above with this.
  # It copies the fake's device file (fake/node.conf, one you write) first, because
  # --vanish-command edits the copy; VGPU_FAKE_@NAME@_CONFIG names the copy. --allowed-root:
  # where the test's device nodes are (a devRoot option of your own); --missing-vendor: an
  # option value that names no library; --vanish-command: the fake's knob that makes the
  # first device disappear.
  # add_test(NAME @name@.conformance
  #          COMMAND sh -c "cp '${CMAKE_CURRENT_SOURCE_DIR}/fake/node.conf' node.conf && exec \"$@\"" sh
  #                  ${vgpu_check} --config device-config.yaml --backend @name@
  #                  --library $<TARGET_FILE:vgpu_backend_@name@> --allowed-root ${CMAKE_CURRENT_BINARY_DIR}/test/dev
  #                  --missing-vendor libraryPath=/nonexistent/lib@name@.so --vanish-command "sed -i 1d node.conf"
  #          WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/test)
  # set_tests_properties(@name@.conformance PROPERTIES LABELS conformance TIMEOUT 60
  #                      ENVIRONMENT VGPU_FAKE_@NAME@_CONFIG=${CMAKE_CURRENT_BINARY_DIR}/test/node.conf)
endif()
EOF


emit "${name}_api.h" <<'EOF'
#pragma once
// The part of the @name@ vendor library this backend calls, opened with dlopen at run time
// (so the backend loads on nodes without the driver and says so in words).
#ifdef __cplusplus
extern "C" {
#endif

/* Returns 0 and the number of devices, or a negative error code. */
typedef int (*@name@_device_count_fn)(int* count);
#define @NAME@_DEVICE_COUNT_SYMBOL "@name@_device_count"

#ifdef __cplusplus
}
#endif
EOF

emit "fake/fake_${name}.c" <<'EOF'
/* A stub of the @name@ vendor library for tests: the real symbols, devices from the file that
 * VGPU_FAKE_@NAME@_CONFIG names (one line per device; none without it). */
#include <stdio.h>
#include <stdlib.h>

#include "@name@_api.h"

__attribute__((visibility("default"))) int @name@_device_count(int* count) {
  const char* path = getenv("VGPU_FAKE_@NAME@_CONFIG");
  *count = 0;
  if (path == NULL) return 0;
  FILE* f = fopen(path, "r");
  if (f == NULL) return -1;
  for (int c; (c = fgetc(f)) != EOF;)
    if (c == '\n') ++*count;
  fclose(f);
  return 0;
}
EOF

emit "${name}_backend.cpp" <<'EOF'
// The @name@ backend. Allocation uses vgpu's standard rules; discovery and the limiter are
// stubs that answer VGPU_ERROR_UNSUPPORTED until they are written (docs/writing-a-backend.md).
#include <memory>
#include <string>
#include <vector>

#include "@name@_api.h"
#include "vgpu/sdk/backend_adapter.h"
#include "vgpu/sdk/standard_rules.h"

namespace @name@ {

class @Name@Backend {
 public:
  static vgpu::Result<std::unique_ptr<@Name@Backend>> create(const vgpu::BackendParams& params) {
    std::string library = "lib@name@.so";
    for (const auto& [key, value] : params.settings.options) {
      if (key == "libraryPath") library = value;
      else return vgpu::makeError("backends." + params.name + ".options." + key +
                                  ": unknown option (the @name@ backend knows libraryPath)");
    }
    // The standard rules read neither scaling setting: apply them to what discover reports
    // (memory, compute units), or keep refusing them here (docs/writing-a-backend.md,
    // "Settings your backend must honour"). splitCount is also yours: set it in discover.
    if (params.settings.memoryScaling.value_or(1.0) != 1.0 || params.settings.coreScaling.value_or(1.0) != 1.0)
      return vgpu::makeError("backends." + params.name + ": memoryScaling and coreScaling must be 1 (the @name@ "
                             "backend does not scale memory or compute)");
    vgpu::sdk::StandardRequestRules rules;
    rules.backend = params.name;
    rules.names = vgpu::sdk::StandardResourceNames::resolve(
        {"example.com/@name@", "example.com/@name@-memory", "", "example.com/@name@-cores", ""}, params.resources);
    rules = rules.withSettings(params.settings);
    return std::unique_ptr<@Name@Backend>(new @Name@Backend(std::move(rules), std::move(library)));
  }

  // Allocator (scheduler side).
  const std::vector<vgpu::ResourceName>& resources() const { return resources_; }
  vgpu::Result<std::optional<vgpu::DeviceRequest>> parseRequest(const vgpu::ContainerResources& container,
                                                                const vgpu::Annotations& annotations) const {
    return vgpu::sdk::parseStandardRequest(rules_, container, annotations);
  }
  void fit(const vgpu_device_request& request, const vgpu_device& device, const vgpu_device_usage& usage,
           vgpu_fit_result& result) const {
    vgpu::sdk::standardFit(request, device, usage, result);
  }

  // Discovery (node side): open library_ here, not in create, and list its devices.
  vgpu::Result<std::vector<vgpu::Device>> discover() { throw vgpu::sdk::Unsupported("@name@: discover is not written yet"); }
  vgpu::Result<std::vector<vgpu::HealthEvent>> waitForHealthEvents(std::chrono::milliseconds) {
    throw vgpu::sdk::Unsupported("@name@: health checks are not written yet");
  }

  // Limiter (node side): env, mounts and device nodes for a container, and their undoing.
  vgpu::Result<vgpu::ContainerSpec> containerSpec(const vgpu::ContainerGrant&) {
    throw vgpu::sdk::Unsupported("@name@: the limiter is not written yet");
  }
  vgpu::Status release(const vgpu::ContainerRef&) { throw vgpu::sdk::Unsupported("@name@: release is not written yet"); }
  vgpu::Status reconcile(const std::vector<vgpu::ContainerRef>&) {
    throw vgpu::sdk::Unsupported("@name@: reconcile is not written yet");
  }

 private:
  @Name@Backend(vgpu::sdk::StandardRequestRules rules, std::string library)
      : rules_(std::move(rules)), resources_(rules_.names.list()), library_(std::move(library)) {}

  vgpu::sdk::StandardRequestRules rules_;
  std::vector<vgpu::ResourceName> resources_;
  std::string library_;  ///< the vendor library discovery opens
};

}  // namespace @name@

VGPU_DEFINE_BACKEND(@name@::@Name@Backend, "@name@", "@Name@ accelerators")
EOF

echo "created $out: build it with cmake (see $out/CMakeLists.txt), then write discover and the limiter"
