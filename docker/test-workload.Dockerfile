# vgpu-test-workload: a CUDA application for trying the limiter without a GPU, on the
# project's fake NVIDIA driver (tests/fakes/gpu: libcuda.so.1, libnvidia-ml.so.1 where the
# NVIDIA container toolkit would mount the real ones). libvgpu.so is not in it: the device
# plugin mounts it and /etc/ld.so.preload into the container, as for any workload.
#   vgpu_e2e_cuda_app BYTES   takes BYTES, then one byte more (tests/integration/e2e/cuda_app.cpp)
#   vgpu_limiter_probe ...    the limiter tests' probe, e.g. `nvml` (tests/unit/hooks/limiter_probe.c)
#
#   docker build -f docker/test-workload.Dockerfile -t vgpu/vgpu-test-workload:0.1.0 .
#
# Run from the repository root. Generated from docker/images.toml by
# scripts/images/dockerfiles.py: change the list, not this file.

FROM debian:12 AS build
WORKDIR /src
COPY . .
ENV VGPU_CMAKE_ARGS=-DVGPU_WITHOUT_REALK8S=ON
RUN scripts/install-deps.sh \
 && VGPU_BUILD_DIR=/build scripts/build.sh vgpu_e2e_cuda_app vgpu_limiter_probe vgpu_fake_cuda \
      vgpu_fake_nvml \
 && install -D -m 0755 /build/bin/vgpu_e2e_cuda_app /out/usr/local/bin/vgpu_e2e_cuda_app \
 && install -D -m 0755 /build/bin/vgpu_limiter_probe /out/usr/local/bin/vgpu_limiter_probe \
 && install -D -m 0644 /build/lib/fakegpu/libcuda.so.1 /out/usr/lib/x86_64-linux-gnu/libcuda.so.1 \
 && install -D -m 0644 /build/lib/fakegpu/libnvidia-ml.so.1 /out/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1

FROM debian:12-slim
COPY --from=build /out/ /
# Fail the build, not the node, when a runtime library is missing.
RUN ! ldd /usr/local/bin/vgpu_e2e_cuda_app /usr/local/bin/vgpu_limiter_probe /usr/lib/x86_64-linux-gnu/libcuda.so.1 /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1 | grep "not found"
ENTRYPOINT ["/usr/local/bin/vgpu_e2e_cuda_app"]
