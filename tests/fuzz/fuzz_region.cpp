// libFuzzer target: the node agent's region reader (vgpu_region_open_readonly) given a file a
// tenant wrote. The input patches a valid region (a 4-byte size selector, then patches of a
// 3-byte offset, a 1-byte run length and a 1-byte value): the reader refuses the file with a
// message or returns a copy whose every field can be read (UUIDs end inside their arrays).
// Against the reader before issue 26 it aborts within seconds (a UUID without an end).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "vgpu/shared_region.h"

namespace {

const std::string& filePath() {
  static const std::string path = [] {
    char tmpl[] = "/tmp/vgpu-fuzz-region-XXXXXX";
    int fd = mkstemp(tmpl);
    if (fd >= 0) close(fd);
    return std::string(tmpl);
  }();
  return path;
}

// A region with a process slot holding memory, as a container's would be.
const std::vector<unsigned char>& validImage() {
  static const std::vector<unsigned char> image = [] {
    const std::string path = filePath() + ".valid";
    unlink(path.c_str());
    vgpu_region* r = nullptr;
    if (vgpu_region_open(path.c_str(), &r, nullptr, 0) != VGPU_REGION_OK) abort();
    int slot = -1;
    if (vgpu_region_attach(r, &slot, nullptr, 0) != VGPU_REGION_OK) abort();
    vgpu_region_publish_device(r, 0, "GPU-1234", 64u << 20, 25);
    (void)vgpu_region_try_add(r, slot, 0, 5u << 20, 64u << 20);
    std::vector<unsigned char> bytes(reinterpret_cast<const unsigned char*>(r),
                                     reinterpret_cast<const unsigned char*>(r) + sizeof(vgpu_region));
    vgpu_region_close(r);
    unlink(path.c_str());
    return bytes;
  }();
  return image;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<unsigned char> bytes = validImage();
  if (size >= 4) {
    std::uint32_t selector;
    memcpy(&selector, data, 4);
    // Mostly the right size (so patches reach the checks behind the size), else any size.
    if (selector % 4 == 0) bytes.resize(selector / 4 % (2 * sizeof(vgpu_region)));
    data += 4;
    size -= 4;
  }
  // Each patch: 3 bytes of offset, 1 byte of run length (1..64), 1 byte of value.
  for (; size >= 5 && !bytes.empty(); data += 5, size -= 5) {
    std::uint32_t offset = static_cast<std::uint32_t>(data[0] | data[1] << 8 | data[2] << 16) % bytes.size();
    std::size_t run = 1 + data[3] % 64;
    for (std::size_t i = offset; i < bytes.size() && i < offset + run; ++i) bytes[i] = data[4];
  }
  FILE* f = fopen(filePath().c_str(), "wb");
  if (f == nullptr) abort();
  if (!bytes.empty() && fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) abort();
  fclose(f);
  const vgpu_region* r = nullptr;
  char err[512] = "";
  if (vgpu_region_open_readonly(filePath().c_str(), &r, err, sizeof err) != VGPU_REGION_OK) {
    if (err[0] == '\0') abort();  // a refusal always says why
    return 0;
  }
  std::uint64_t sum = r->version;
  for (const auto& d : r->devices) {
    if (strnlen(d.uuid, VGPU_REGION_UUID_LEN) >= VGPU_REGION_UUID_LEN) abort();
    sum += d.memory_used + d.memory_limit + d.sm_limit + d.compute_busy_ns + d.unenforced;
  }
  for (const auto& p : r->procs) sum += static_cast<std::uint64_t>(p.pid) + p.memory_used[0];
  vgpu_region_close(r);
  return sum == 1 ? 1 : 0;
}
