# Shared build settings for vgpu's own targets.

# Warnings are errors in our code, never in third-party headers. -Wrestrict is off: GCC 12
# reports false positives on std::string concatenation at -O2 (GCC bug 105329).
function(vgpu_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Werror
                         $<$<COMPILE_LANGUAGE:CXX>:-Wnon-virtual-dtor -Wno-restrict>)
endfunction()

# A shared library that exports only what it marks with VGPU_EXPORT (or its version script).
function(vgpu_hidden_visibility target)
  set_target_properties(${target} PROPERTIES C_VISIBILITY_PRESET hidden
                        CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
endfunction()

# Folders (relative to the source root) left out of this build tree, e.g. to work on one
# part while another is mid-change: -DVGPU_SKIP_DIRS="tests/unit/k8s;extender".
set(VGPU_SKIP_DIRS "" CACHE STRING "Source folders to leave out of the build")

# add_subdirectory() for a folder that may not exist yet (pieces land one issue at a time).
function(vgpu_add_if_present dir)
  file(RELATIVE_PATH rel ${CMAKE_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR}/${dir})
  if(rel IN_LIST VGPU_SKIP_DIRS)
    message(STATUS "vgpu: skipping ${rel} (VGPU_SKIP_DIRS)")
  elseif(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/${dir}/CMakeLists.txt)
    add_subdirectory(${dir})
  endif()
endfunction()

# add_subdirectory() for every child folder of `parent` that has a CMakeLists.txt, sorted,
# so a new backend, fake or test folder needs no edit of a shared list.
function(vgpu_add_subdirectories parent)
  file(GLOB children LIST_DIRECTORIES true RELATIVE ${CMAKE_CURRENT_SOURCE_DIR}/${parent}
       ${CMAKE_CURRENT_SOURCE_DIR}/${parent}/*)
  list(SORT children)
  foreach(child IN LISTS children)
    vgpu_add_if_present(${parent}/${child})
  endforeach()
endfunction()

# vgpu_add_subdirectories() for test folders: every test in a folder gets the folder's name
# as its first ctest label (its area: `ctest -L k8s`, and the summary scripts/test.sh prints).
function(vgpu_add_test_folders parent)
  vgpu_add_subdirectories(${parent})
  file(GLOB children LIST_DIRECTORIES true RELATIVE ${CMAKE_CURRENT_SOURCE_DIR}/${parent}
       ${CMAKE_CURRENT_SOURCE_DIR}/${parent}/*)
  foreach(child IN LISTS children)
    get_property(added DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR} PROPERTY SUBDIRECTORIES)
    if(${CMAKE_CURRENT_SOURCE_DIR}/${parent}/${child} IN_LIST added)
      # The folder's name first; a folder may have added labels of its own (e.g. hooks: limiter).
      get_property(own DIRECTORY ${parent}/${child} PROPERTY LABELS)
      set_property(DIRECTORY ${parent}/${child} PROPERTY LABELS ${child} ${own})
    endif()
  endforeach()
endfunction()

# A test program's own sources are compiled with -O1: at -O3 GoogleTest's macros cost about
# 40 % more compile time, and what tests measure lives in the (optimised) libraries they link.
function(vgpu_test_optimization target)
  target_compile_options(${target} PRIVATE $<$<NOT:$<CONFIG:Debug>>:-O1>)
endfunction()

# A GoogleTest executable registered with CTest, one ctest entry per test case.
# NO_DISCOVERY: the caller registers the cases itself (vgpu_gtest_cases), e.g. in groups
# with different properties.
function(vgpu_gtest name)
  cmake_parse_arguments(ARG "NO_DISCOVERY" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gmock GTest::gtest_main)
  vgpu_warnings(${name})
  vgpu_test_optimization(${name})
  if(NOT ARG_NO_DISCOVERY)
    vgpu_gtest_cases(${name})
  endif()
endfunction()

# Registers the cases of a GoogleTest executable that match FILTER (a --gtest_filter; all by
# default) as ctest tests named PREFIX<case>, with extra ctest PROPERTIES.
function(vgpu_gtest_cases name)
  cmake_parse_arguments(ARG "" "PREFIX;FILTER" "PROPERTIES" ${ARGN})
  include(GoogleTest)
  set(filter)
  if(ARG_FILTER)
    set(filter TEST_FILTER ${ARG_FILTER})
  endif()
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 TEST_PREFIX "${ARG_PREFIX}" ${filter}
                       PROPERTIES TIMEOUT 300 ${ARG_PROPERTIES})
endfunction()

# A loadable backend: libvgpu-backend-<name>.so in VGPU_BACKEND_OUTPUT_DIR, exporting only
# the entry symbol (hidden visibility, everything else linked statically into it).
function(vgpu_add_backend name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS" ${ARGN})
  set(target vgpu_backend_${name})
  add_library(${target} MODULE ${ARG_SOURCES})
  target_link_libraries(${target} PRIVATE ${ARG_LIBS})
  set_target_properties(${target} PROPERTIES OUTPUT_NAME vgpu-backend-${name} PREFIX lib
                        LIBRARY_OUTPUT_DIRECTORY ${VGPU_BACKEND_OUTPUT_DIR})
  target_link_options(${target} PRIVATE -Wl,--exclude-libs,ALL -Wl,--no-undefined)
  vgpu_warnings(${target})
  vgpu_hidden_visibility(${target})
  install(TARGETS ${target} LIBRARY DESTINATION lib/vgpu/backends)
endfunction()
