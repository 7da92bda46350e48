// What the fakes take from a newer C++ runtime than the GCC 10 one of a Debian 11 root
// (renamed at link time, see CMakeLists.txt). GCC 12's allocators call this only when asked
// for more elements than memory can hold.

#include <cstdlib>

extern "C" [[noreturn]] void vgpu_fake_bad_array_new_length() { std::abort(); }
