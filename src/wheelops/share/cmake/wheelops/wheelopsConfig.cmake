# find_package(wheelops): the wheelops libraries for the Torch this project builds against.
#
#   list(APPEND CMAKE_PREFIX_PATH "$(python -c 'import wheelops; print(wheelops.cmake_prefix_path)')")
#   find_package(Torch REQUIRED)
#   find_package(wheelops REQUIRED)
#   target_link_libraries(app PRIVATE "${TORCH_LIBRARIES}" wheelops::wheelops)
#   // main.cpp: #include <wheelops/load_libraries.h>, then wheelops::load_libraries()
#
# The choice is the Python guard's own (wheelops/_compat/policy.py), made over that Torch's
# files: the CPU library, plus the CUDA library of the Torch's CUDA major where its runtime
# minor is not older than the library's. A mismatch fails here, naming both sides.
#
# Sets wheelops_VERSION, wheelops_VARIANT, wheelops_CPU_LIBRARY, wheelops_CUDA_LIBRARY
# (empty for a CPU-only Torch), wheelops_LIBRARIES (the paths to load, in order) and the
# target wheelops::wheelops (the header, and WHEELOPS_LIBRARIES for it).
# WHEELOPS_PYTHON: a Python >= 3.10 to read the build facts with (default: python3 on PATH).

if(NOT TORCH_FOUND OR NOT DEFINED Torch_DIR)
  set(wheelops_FOUND FALSE)
  set(wheelops_NOT_FOUND_MESSAGE
      "call find_package(Torch) before find_package(wheelops): wheelops chooses the library that matches that Torch")
  return()
endif()

get_filename_component(_wheelops_package "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
get_filename_component(_wheelops_torch_root "${Torch_DIR}/../../.." ABSOLUTE)
if(NOT WHEELOPS_PYTHON)
  find_program(WHEELOPS_PYTHON NAMES python3 python DOC "a Python >= 3.10 that reads the wheelops build facts")
endif()
if(NOT WHEELOPS_PYTHON)
  set(wheelops_FOUND FALSE)
  set(wheelops_NOT_FOUND_MESSAGE "wheelops reads its build facts with Python >= 3.10 and found none: pass -DWHEELOPS_PYTHON=/path/to/python3")
  return()
endif()

set(_wheelops_settings "${CMAKE_CURRENT_BINARY_DIR}/wheelops-libraries.cmake")
# The compatibility core, imported as a package of its own (`_compat`, from the wheelops
# folder on PYTHONPATH): importing wheelops would import torch, and this Python may have none.
execute_process(
  COMMAND "${CMAKE_COMMAND}" -E env "PYTHONPATH=${_wheelops_package}"
          "${WHEELOPS_PYTHON}" -m _compat.cmake
          --torch-root "${_wheelops_torch_root}" --out "${_wheelops_settings}"
  RESULT_VARIABLE _wheelops_status
  OUTPUT_VARIABLE _wheelops_refusal
  ERROR_VARIABLE _wheelops_refusal)
if(NOT _wheelops_status EQUAL 0)
  set(wheelops_FOUND FALSE)
  set(wheelops_NOT_FOUND_MESSAGE "${_wheelops_refusal}")
  return()
endif()
include("${_wheelops_settings}")

if(NOT TARGET wheelops::wheelops)
  add_library(wheelops::wheelops INTERFACE IMPORTED)
  string(REPLACE ";" ":" _wheelops_search "${wheelops_LIBRARIES}")
  set_target_properties(wheelops::wheelops PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${_wheelops_package}/include"
    INTERFACE_COMPILE_DEFINITIONS "WHEELOPS_LIBRARIES=\"${_wheelops_search}\""
    INTERFACE_LINK_LIBRARIES "${CMAKE_DL_LIBS}")
endif()
set(wheelops_FOUND TRUE)
