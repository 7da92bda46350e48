# Link launcher for vgpu-device-plugin (RULE_LAUNCH_LINK, see CMakeLists.txt beside this):
#   cmake [-DUNSECURE_GRPC=ON] -P static_link.cmake -- <the link command CMake generated>
# CMake writes the third-party libraries of the agent (gRPC, protobuf, abseil, OpenSSL,
# Boost, yaml-cpp...) as full paths to their .so; this swaps each one for the .a beside it
# and runs the command. CMake already orders the list by dependency, so the archives
# resolve in place. The C and C++ runtimes stay shared: the backends the agent dlopens
# need them, and only C types cross that boundary (backend_abi.h), so a backend that
# brings its own libyaml-cpp.so shares no state with the agent's copy.
# All or nothing: if one library has no archive the command runs unchanged (with a
# warning), since mixing an archive with a .so that needs the same library's .so would
# put two copies of its global state (abseil, gRPC) in the process.

cmake_minimum_required(VERSION 3.25)
set(runtime_libs c m dl rt pthread util stdc++ gcc_s atomic)
# Shared by necessity: Debian ships prometheus-cpp's core (/metrics) only as a .so. It
# needs nothing below the C++ runtime and no backend links it, so one copy is certain.
list(APPEND runtime_libs prometheus-cpp-core)

set(command "")
set(started FALSE)
math(EXPR last "${CMAKE_ARGC} - 1")
foreach(i RANGE ${last})
  if(started)
    list(APPEND command "${CMAKE_ARGV${i}}")
  elseif("${CMAKE_ARGV${i}}" STREQUAL "--")
    set(started TRUE)
  endif()
endforeach()
list(LENGTH command argc)
if(argc EQUAL 0)
  message(FATAL_ERROR "static_link.cmake: no link command after --")
endif()

# Folders searched for -l<name>: the -L folders of the command, then the compiler's.
set(search_dirs "")
foreach(arg IN LISTS command)
  if(arg MATCHES "^-L(.+)$")
    list(APPEND search_dirs "${CMAKE_MATCH_1}")
  endif()
endforeach()
list(APPEND search_dirs /usr/lib/x86_64-linux-gnu /usr/lib /usr/local/lib)

set(static_command "")
set(missing "")
foreach(arg IN LISTS command)
  set(name "")
  set(dirs "")
  if(arg MATCHES "^(.*/)lib([^/]+)\\.so(\\.[0-9.]+)?$")
    set(name "${CMAKE_MATCH_2}")
    set(dirs "${CMAKE_MATCH_1}")
  elseif(arg MATCHES "^-l([^:].*)$")
    set(name "${CMAKE_MATCH_1}")
    set(dirs "${search_dirs}")
  endif()
  if(name STREQUAL "" OR name IN_LIST runtime_libs)
    list(APPEND static_command "${arg}")
    continue()
  endif()
  # -DUNSECURE_GRPC=ON: gRPC's archives without TLS, ALTS and xDS, for a program whose
  # channels are all insecure (the kubelet's unix sockets).
  if(UNSECURE_GRPC AND name MATCHES "^grpc(\\+\\+)?$")
    set(name "${name}_unsecure")
  endif()
  set(archive "")
  foreach(dir IN LISTS dirs)
    string(REGEX REPLACE "/$" "" dir "${dir}")
    if(EXISTS "${dir}/lib${name}.a")
      set(archive "${dir}/lib${name}.a")
      break()
    endif()
  endforeach()
  if(NOT archive STREQUAL "")
    list(APPEND static_command "${archive}")
  else()
    list(APPEND missing "${arg}")
    list(APPEND static_command "${arg}")
  endif()
endforeach()

if(NOT missing STREQUAL "")
  message(WARNING "vgpu-device-plugin: linking the shared libraries, no static archive for: ${missing}")
  set(static_command "${command}")
endif()
execute_process(COMMAND ${static_command} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "vgpu-device-plugin: link failed (${rc})")
endif()
