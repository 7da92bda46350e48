# The programs the tests run, found once. A missing one fails configure with what it is for
# and how to get it; only an explicit -DVGPU_WITHOUT_<X>=ON leaves its tests out, and the
# test summary (scripts/test_summary.py) lists every switch that is on.

set(VGPU_INSTALL_HINT "scripts/install-deps.sh installs it on Debian 12")

# vgpu_require_program(<var> SWITCH <VGPU_WITHOUT_X> FOR <what needs it> PACKAGE <deb>
#                      NAMES <name>... [PATHS <dir>...])
# Sets the cache variable <var> to the program's path, or fails unless <switch> is ON.
function(vgpu_require_program var)
  cmake_parse_arguments(ARG "" "SWITCH;FOR;PACKAGE" "NAMES;PATHS" ${ARGN})
  option(${ARG_SWITCH} "Leave out ${ARG_FOR} (they need ${ARG_NAMES})" OFF)
  if(${ARG_SWITCH})
    message(STATUS "vgpu: ${ARG_SWITCH}=ON: ${ARG_FOR} left out")
    set(${var} "" CACHE INTERNAL "")
    return()
  endif()
  if(ARG_PATHS)
    find_program(${var} NAMES ${ARG_NAMES} PATHS ${ARG_PATHS} NO_DEFAULT_PATH)
  endif()
  find_program(${var} NAMES ${ARG_NAMES})
  if(NOT ${var})
    list(JOIN ARG_NAMES " or " names)
    message(FATAL_ERROR "vgpu: ${names} not found: ${ARG_FOR} need it. Install the Debian package "
                        "'${ARG_PACKAGE}' (${VGPU_INSTALL_HINT}), or configure with "
                        "-D${ARG_SWITCH}=ON to leave them out.")
  endif()
endfunction()

if(VGPU_BUILD_TESTS)
  vgpu_require_program(VGPU_PROMTOOL NAMES promtool PACKAGE prometheus SWITCH VGPU_WITHOUT_PROMTOOL
                       FOR "the metrics checks (promtool check metrics) of the metrics, scheduler, agent and chart tests")
  vgpu_require_program(VGPU_OPENSSL NAMES openssl PACKAGE openssl SWITCH VGPU_WITHOUT_TLS_TESTS
                       FOR "the TLS tests of the HTTP server and vgpu-scheduler (they make certificates with it)")
  # Debian's python3 first: it has PyYAML; a python3 earlier on PATH may not.
  vgpu_require_program(VGPU_PYTHON NAMES python3 PATHS /usr/bin PACKAGE "python3 python3-yaml"
                       SWITCH VGPU_WITHOUT_CHART_TESTS FOR "the Helm chart tests (Chart.*)")
  if(VGPU_PYTHON)
    execute_process(COMMAND ${VGPU_PYTHON} -c "import yaml" RESULT_VARIABLE _vgpu_no_yaml OUTPUT_QUIET ERROR_QUIET)
    if(_vgpu_no_yaml)
      message(FATAL_ERROR "vgpu: ${VGPU_PYTHON} cannot import yaml: the Helm chart tests (Chart.*) need "
                          "PyYAML. Install the Debian package 'python3-yaml' (${VGPU_INSTALL_HINT}), or "
                          "configure with -DVGPU_WITHOUT_CHART_TESTS=ON to leave them out.")
    endif()
    vgpu_require_program(VGPU_YAMLLINT NAMES yamllint PACKAGE yamllint SWITCH VGPU_WITHOUT_YAMLLINT
                         FOR "the chart's YAML lint (Chart.Lint)")
  endif()
  # Tools every Debian build machine has with build-essential; checked so a minimal
  # image says what is missing instead of failing a test with "command not found".
  vgpu_require_program(VGPU_NM NAMES nm PACKAGE binutils SWITCH VGPU_WITHOUT_ELF_CHECKS
                       FOR "the checks of libvgpu.so's exported symbols and dependencies")
  vgpu_require_program(VGPU_READELF NAMES readelf PACKAGE binutils SWITCH VGPU_WITHOUT_ELF_CHECKS
                       FOR "the checks of libvgpu.so's exported symbols and dependencies")
endif()
