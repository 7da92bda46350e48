# vgpu-device-plugin: the node agent, its backends, and libvgpu.so and vgpu-cdi-hook for the
# init container that installs them on the host (charts/vgpu/templates/device-plugin-daemonset.yaml);
# vgpu-stop-agents for the chart's uninstall hook.
# libvgpu.so is built from the project's own declarations of the CUDA driver API (no CUDA
# toolkit); nothing of CUDA is linked or shipped.
#
#   docker build -f docker/device-plugin.Dockerfile -t vgpu/vgpu-device-plugin:0.1.0 .
#
# Run from the repository root. Generated from docker/images.toml by
# scripts/images/dockerfiles.py: change the list, not this file.

FROM debian:12 AS build
WORKDIR /src
COPY . .
ENV VGPU_CMAKE_ARGS=-DVGPU_BUILD_TESTS=OFF
RUN scripts/install-deps.sh \
 && VGPU_BUILD_DIR=/build scripts/build.sh vgpu-device-plugin vgpu-dra-plugin vgpu-stop-agents \
      vgpu vgpu-backend-check vgpu-cdi-hook vgpu_backend_nvidia vgpu_backend_cambricon \
      vgpu_backend_hygon vgpu_backend_sim \
 && install -D -m 0755 /build/bin/vgpu-device-plugin /out/usr/local/bin/vgpu-device-plugin \
 && install -D -m 0755 /build/bin/vgpu-dra-plugin /out/usr/local/bin/vgpu-dra-plugin \
 && install -D -m 0755 /build/bin/vgpu-stop-agents /out/usr/local/bin/vgpu-stop-agents \
 && install -D -m 0755 /build/bin/vgpu-backend-check /out/usr/local/bin/vgpu-backend-check \
 && install -D -m 0644 /build/hooks/cuda/libvgpu.so /out/usr/local/lib/vgpu/libvgpu.so \
 && install -D -m 0755 /build/bin/vgpu-cdi-hook /out/usr/local/lib/vgpu/vgpu-cdi-hook \
 && mkdir -p /out/usr/local/lib/vgpu/backends \
 && install -m 0644 /build/lib/vgpu/backends/libvgpu-backend-*.so /out/usr/local/lib/vgpu/backends/

FROM debian:12-slim
# The agent links its third-party libraries statically (agent/static_link.cmake) and needs
# only the C and C++ runtimes; these are the shared libraries the backends link (pugixml:
# nvidia, Boost.JSON: cambricon and hygon, yaml-cpp: sim), and prometheus-cpp's core, which
# Debian ships only shared (/metrics). The vendor libraries (NVML, cnDev, ROCm SMI) come
# from the host.
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      libyaml-cpp0.7 libpugixml1v5 libboost-json1.81.0 libprometheus-cpp-core1.0 \
      ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/ /
# Fail the build, not the node, when a runtime library is missing.
RUN ! ldd /usr/local/bin/vgpu-device-plugin /usr/local/bin/vgpu-dra-plugin /usr/local/bin/vgpu-stop-agents /usr/local/bin/vgpu-backend-check /usr/local/lib/vgpu/backends/*.so | grep "not found"
# The agent serves the kubelet's sockets and vendor devices on the host: it runs as root
# (the chart makes it privileged); the backends are found in /usr/local/lib/vgpu/backends.
ENTRYPOINT ["/usr/local/bin/vgpu-device-plugin"]
