# GpuInstrConfig.cmake: build gpuinstr tools from CMake.
#
#   find_package(GpuInstr REQUIRED PATHS <gpuinstr>/cmake)
#   gpuinstr_add_tool(counter SOURCES tool.hip OFFLOAD_ARCH gfx90a)
#
# gpuinstr_add_tool(<name> SOURCES <hip files>... [HOST <c++ files>...]
#                   [OFFLOAD_ARCH <arch>...] [OPTIONS <hipcc options>...])
#   Compiles the sources with hipcc and the gpuinstr plugin into the shared
#   library lib<name>.so in the current binary directory (the tool's device
#   code object, with its hooks in .llvmbc, is in the library's .hip_fatbin).
#   Defines the target <name> and sets its GPUINSTR_TOOL property to the
#   library's path. OFFLOAD_ARCH defaults to GPUINSTR_OFFLOAD_ARCH (gfx90a).
#   HOST: the tool's host part (ordinary C++ against gpuinstr/host.h),
#   compiled with the host C++ compiler into lib<name>-host.so, the library
#   `gpuinstr-run --tool-host` loads; its path is the GPUINSTR_TOOL_HOST
#   property.
#
# gpuinstr_instrument(<target> TOOL <tool> PLAN <plan.toml> [OUTPUT <file>]
#                     [GPU_TARGET <gfx90a...>] [GROW_REGISTERS] [OPTIONS <gpuinstr-link options>...])
#   A post-build step of <target> (an executable or library with HIP device
#   code): `gpuinstr-link instrument` writes the same file with its device
#   code instrumented to OUTPUT (default: instrumented/<file name> in the
#   current binary directory, so LD_LIBRARY_PATH can pick it). TOOL is a
#   gpuinstr_add_tool() target (built first) or a tool file; the run report
#   is in the build log. The target's GPUINSTR_INSTRUMENTED property lists
#   the outputs.
#
# Cache variables:
#   GPUINSTR_PLUGIN  libembed.so (default: the repository's target/release, then target/debug)
#   GPUINSTR_LINK    gpuinstr-link (default: the repository's target/release, then target/debug)
#   GPUINSTR_HIPCC   hipcc
#   GPUINSTR_HOST_CXX  the C++ compiler of tools' host parts (default c++; not
#                    hipcc: a host part has no device code)
#   GPUINSTR_OFFLOAD_ARCH  default targets

cmake_minimum_required(VERSION 3.20)

get_filename_component(GPUINSTR_ROOT "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
set(GPUINSTR_INCLUDE_DIR "${GPUINSTR_ROOT}/hook-sdk/include" CACHE PATH "gpuinstr hook SDK headers")

# Sets <variable>, unless given, to <file> from the repository's cargo build
# (release first, then debug).
function(_gpuinstr_default_to_build variable file)
  if(NOT ${variable})
    foreach(profile release debug)
      if(EXISTS "${GPUINSTR_ROOT}/target/${profile}/${file}")
        set(${variable} "${GPUINSTR_ROOT}/target/${profile}/${file}" PARENT_SCOPE)
        return()
      endif()
    endforeach()
  endif()
endfunction()

_gpuinstr_default_to_build(GPUINSTR_PLUGIN libembed.so)
set(GPUINSTR_PLUGIN "${GPUINSTR_PLUGIN}" CACHE FILEPATH "the gpuinstr pass plugin (libembed.so)")
if(NOT EXISTS "${GPUINSTR_PLUGIN}")
  message(FATAL_ERROR
    "gpuinstr: the pass plugin libembed.so was not found; build it with "
    "`cargo build --release -p gpuinstr-llvm-plugin` in ${GPUINSTR_ROOT} or set GPUINSTR_PLUGIN")
endif()

_gpuinstr_default_to_build(GPUINSTR_LINK gpuinstr-link)
set(GPUINSTR_LINK "${GPUINSTR_LINK}" CACHE FILEPATH "the gpuinstr-link driver")

find_program(GPUINSTR_HIPCC hipcc)
if(NOT GPUINSTR_HIPCC)
  message(FATAL_ERROR "gpuinstr: hipcc was not found; install it (apt-get install hipcc) or set GPUINSTR_HIPCC")
endif()
set(GPUINSTR_OFFLOAD_ARCH "gfx90a" CACHE STRING "default GPU targets of gpuinstr tools")
find_program(GPUINSTR_HOST_CXX NAMES c++ g++ clang++)

set(GpuInstr_FOUND TRUE)

function(gpuinstr_add_tool name)
  cmake_parse_arguments(PARSE_ARGV 1 TOOL "" "" "SOURCES;HOST;OFFLOAD_ARCH;OPTIONS")
  if(NOT TOOL_SOURCES)
    message(FATAL_ERROR "gpuinstr_add_tool(${name}): give the tool's HIP sources with SOURCES")
  endif()
  if(NOT TOOL_OFFLOAD_ARCH)
    set(TOOL_OFFLOAD_ARCH ${GPUINSTR_OFFLOAD_ARCH})
  endif()
  set(sources "")
  foreach(source IN LISTS TOOL_SOURCES)
    get_filename_component(source "${source}" ABSOLUTE)
    list(APPEND sources "${source}")
  endforeach()
  set(arch_flags "")
  foreach(arch IN LISTS TOOL_OFFLOAD_ARCH)
    list(APPEND arch_flags "--offload-arch=${arch}")
  endforeach()
  set(library "${CMAKE_CURRENT_BINARY_DIR}/lib${name}.so")
  add_custom_command(
    OUTPUT "${library}"
    COMMAND "${GPUINSTR_HIPCC}" ${arch_flags} -O3 -shared -fPIC
            "-fpass-plugin=${GPUINSTR_PLUGIN}" "-I${GPUINSTR_INCLUDE_DIR}"
            ${TOOL_OPTIONS} ${sources} -o "${library}"
    DEPENDS ${sources} "${GPUINSTR_PLUGIN}" "${GPUINSTR_INCLUDE_DIR}/gpuinstr/gpuinstr.h"
    COMMENT "gpuinstr: building tool ${name}"
    VERBATIM)
  set(outputs "${library}")
  if(TOOL_HOST)
    if(NOT GPUINSTR_HOST_CXX)
      message(FATAL_ERROR "gpuinstr_add_tool(${name}): no C++ compiler for the host part; install g++ or set GPUINSTR_HOST_CXX")
    endif()
    set(host_sources "")
    foreach(source IN LISTS TOOL_HOST)
      get_filename_component(source "${source}" ABSOLUTE)
      list(APPEND host_sources "${source}")
    endforeach()
    set(host_library "${CMAKE_CURRENT_BINARY_DIR}/lib${name}-host.so")
    add_custom_command(
      OUTPUT "${host_library}"
      COMMAND "${GPUINSTR_HOST_CXX}" -std=c++17 -O2 -shared -fPIC "-I${GPUINSTR_INCLUDE_DIR}"
              ${host_sources} -o "${host_library}"
      DEPENDS ${host_sources} "${GPUINSTR_INCLUDE_DIR}/gpuinstr/host.h"
      COMMENT "gpuinstr: building the host part of tool ${name}"
      VERBATIM)
    list(APPEND outputs "${host_library}")
  endif()
  add_custom_target(${name} ALL DEPENDS ${outputs})
  set_target_properties(${name} PROPERTIES GPUINSTR_TOOL "${library}")
  if(TOOL_HOST)
    set_target_properties(${name} PROPERTIES GPUINSTR_TOOL_HOST "${host_library}")
  endif()
endfunction()

function(gpuinstr_instrument target)
  cmake_parse_arguments(PARSE_ARGV 1 INSTRUMENT "GROW_REGISTERS" "TOOL;PLAN;OUTPUT;GPU_TARGET" "OPTIONS")
  if(NOT TARGET ${target})
    message(FATAL_ERROR "gpuinstr_instrument(${target}): no target named ${target}")
  endif()
  if(NOT INSTRUMENT_TOOL OR NOT INSTRUMENT_PLAN)
    message(FATAL_ERROR "gpuinstr_instrument(${target}): give TOOL (a gpuinstr_add_tool target or file) and PLAN")
  endif()
  if(NOT EXISTS "${GPUINSTR_LINK}")
    message(FATAL_ERROR
      "gpuinstr: gpuinstr-link was not found; build it with "
      "`cargo build --release -p gpuinstr-driver` in ${GPUINSTR_ROOT} or set GPUINSTR_LINK")
  endif()
  if(TARGET ${INSTRUMENT_TOOL})
    get_target_property(tool_file ${INSTRUMENT_TOOL} GPUINSTR_TOOL)
    if(NOT tool_file)
      message(FATAL_ERROR "gpuinstr_instrument(${target}): ${INSTRUMENT_TOOL} is not a gpuinstr_add_tool() target")
    endif()
    add_dependencies(${target} ${INSTRUMENT_TOOL})
  else()
    get_filename_component(tool_file "${INSTRUMENT_TOOL}" ABSOLUTE)
  endif()
  get_filename_component(plan "${INSTRUMENT_PLAN}" ABSOLUTE)
  if(INSTRUMENT_OUTPUT)
    get_filename_component(output "${INSTRUMENT_OUTPUT}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_BINARY_DIR}")
    get_filename_component(output_dir "${output}" DIRECTORY)
  else()
    set(output_dir "${CMAKE_CURRENT_BINARY_DIR}/instrumented")
    set(output "${output_dir}/$<TARGET_FILE_NAME:${target}>")
  endif()
  set(flags ${INSTRUMENT_OPTIONS})
  if(INSTRUMENT_GROW_REGISTERS)
    list(APPEND flags --grow-registers)
  endif()
  if(INSTRUMENT_GPU_TARGET)
    list(APPEND flags --target ${INSTRUMENT_GPU_TARGET})
  endif()
  add_custom_command(TARGET ${target} POST_BUILD
    COMMAND "${CMAKE_COMMAND}" -E make_directory "${output_dir}"
    COMMAND "${GPUINSTR_LINK}" instrument "$<TARGET_FILE:${target}>" --tool "${tool_file}" --plan "${plan}"
            -o "${output}" ${flags}
    COMMENT "gpuinstr: instrumenting ${target} with ${INSTRUMENT_TOOL}"
    VERBATIM)
  set_property(TARGET ${target} APPEND PROPERTY GPUINSTR_INSTRUMENTED "${output}")
endfunction()
