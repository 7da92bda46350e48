#pragma once
// Helpers of the compile-time cross-checks (cuda_decl_check.cpp, nvml_decl_check.cpp), which
// compare vgpu's CUDA/NVML declarations, included into namespace `ours`, with a real header
// included at global scope. Everything is a static_assert: a mismatch fails the build.

#include <cstddef>
#include <type_traits>
#include <utility>

namespace vgpu::declcheck {

/// The real header's type for one of ours: an explicit specialisation per named type of ours
/// (VGPU_DECLCHECK_MAP), built-in types map to themselves, compound types are mapped part by
/// part, so two function types compare equal when every parameter is the "same" type.
template <class T>
struct Real {
  using type = T;
};
template <class T>
using RealT = typename Real<T>::type;
template <class T>
struct Real<T*> {
  using type = RealT<T>*;
};
template <class T>
struct Real<const T> {
  using type = const RealT<T>;
};
template <class T, std::size_t N>
struct Real<T[N]> {
  using type = RealT<T>[N];
};
template <class R, class... A>
struct Real<R(A...)> {
  using type = RealT<R>(RealT<A>...);
};

}  // namespace vgpu::declcheck

// Our named type `name` is the real header's `name`.
#define VGPU_DECLCHECK_MAP(name)                    \
  template <>                                       \
  struct vgpu::declcheck::Real<ours::name> {        \
    using type = ::name;                            \
  };
// Our opaque handle `name` (a pointer to an incomplete struct) is the real one.
#define VGPU_DECLCHECK_MAP_HANDLE(name)                             \
  template <>                                                       \
  struct vgpu::declcheck::Real<std::remove_pointer_t<ours::name>> { \
    using type = std::remove_pointer_t<::name>;                     \
  };

// An enumerator, a macro value captured before the real header, a function's type.
#define VGPU_DECLCHECK_VALUE(name) \
  static_assert(static_cast<long long>(ours::name) == static_cast<long long>(::name), #name " differs");
#define VGPU_DECLCHECK_FUNCTION(name, params)                                                   \
  static_assert(std::is_same_v<vgpu::declcheck::RealT<decltype(ours::name)>, decltype(::name)>, \
                "the prototype of " #name " differs");
#define VGPU_DECLCHECK_FUNCTION_RET(ret, name, params) VGPU_DECLCHECK_FUNCTION(name, params)

// A type: same size and alignment (and for enums the same signedness).
#define VGPU_DECLCHECK_TYPE(name)                                                      \
  static_assert(sizeof(ours::name) == sizeof(::name), "sizeof(" #name ") differs");    \
  static_assert(alignof(ours::name) == alignof(::name), "alignof(" #name ") differs"); \
  static_assert(std::is_same_v<vgpu::declcheck::RealT<ours::name>, ::name>, #name " maps to another type");
#define VGPU_DECLCHECK_ENUM(name)                                                                        \
  VGPU_DECLCHECK_TYPE(name)                                                                              \
  static_assert(std::is_signed_v<std::underlying_type_t<ours::name>> ==                                  \
                    std::is_signed_v<std::underlying_type_t<::name>>,                                    \
                "the signedness of " #name " differs");

// A field (`path` may reach into a nested unnamed struct or union: allocFlags.usage): same
// offset, same size, and the same type once ours are mapped to the real ones.
#define VGPU_DECLCHECK_MEMBER_TYPE(ns, type, path) std::remove_cvref_t<decltype(std::declval<ns::type&>().path)>
#define VGPU_DECLCHECK_FIELD(type, path)                                                                   \
  static_assert(offsetof(ours::type, path) == offsetof(::type, path), "offsetof(" #type ", " #path ") differs"); \
  static_assert(sizeof(VGPU_DECLCHECK_MEMBER_TYPE(ours, type, path)) ==                                    \
                    sizeof(VGPU_DECLCHECK_MEMBER_TYPE(, type, path)),                                      \
                "the size of " #type "::" #path " differs");
// The same, plus the field's type (not for unnamed struct/union types, which have no mapping).
#define VGPU_DECLCHECK_TYPED_FIELD(type, path)                                                \
  VGPU_DECLCHECK_FIELD(type, path)                                                            \
  static_assert(std::is_same_v<vgpu::declcheck::RealT<VGPU_DECLCHECK_MEMBER_TYPE(ours, type, path)>, \
                               VGPU_DECLCHECK_MEMBER_TYPE(, type, path)>,                     \
                "the type of " #type "::" #path " differs");
