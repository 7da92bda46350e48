# vgpu-scheduler: the scheduler extender and admission webhook, with the backends (the
# scheduler loads them for their resource names and fit rules; it opens no vendor library).
#
#   docker build -f docker/scheduler.Dockerfile -t vgpu/vgpu-scheduler:0.1.0 .
#
# Run from the repository root. Generated from docker/images.toml by
# scripts/images/dockerfiles.py: change the list, not this file.

FROM debian:12 AS build
WORKDIR /src
COPY . .
ENV VGPU_CMAKE_ARGS=-DVGPU_BUILD_TESTS=OFF
RUN scripts/install-deps.sh \
 && VGPU_BUILD_DIR=/build scripts/build.sh vgpu-scheduler vgpu-sim vgpu_backend_nvidia \
      vgpu_backend_cambricon vgpu_backend_hygon vgpu_backend_sim \
 && install -D -m 0755 /build/bin/vgpu-scheduler /out/usr/local/bin/vgpu-scheduler \
 && install -D -m 0755 /build/bin/vgpu-sim /out/usr/local/bin/vgpu-sim \
 && mkdir -p /out/usr/local/lib/vgpu/backends \
 && install -m 0644 /build/lib/vgpu/backends/libvgpu-backend-*.so /out/usr/local/lib/vgpu/backends/

FROM debian:12-slim
# The shared libraries the scheduler and the backends link.
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      libyaml-cpp0.7 libpugixml1v5 libboost-json1.81.0 libboost-url1.81.0 \
      libboost-program-options1.81.0 libspdlog1.10 libfmt9 libssl3 libprometheus-cpp-core1.0 \
      ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/ /
# Fail the build, not the node, when a runtime library is missing.
RUN ! ldd /usr/local/bin/vgpu-scheduler /usr/local/bin/vgpu-sim /usr/local/lib/vgpu/backends/*.so | grep "not found"
# Needs no privilege: the chart runs it as this user with a read-only root filesystem.
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/vgpu-scheduler"]
