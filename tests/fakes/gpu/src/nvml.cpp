extern "C" int vgpuFakeNvmlPlaceholder() { return 0; }
