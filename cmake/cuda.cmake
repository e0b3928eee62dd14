# Kiln's CUDA build. KILN_CUDA:
#   AUTO (default)  build the CUDA paths (CUDA graphs, the CUDA device checks) when the LibTorch
#                   found was built with CUDA, the CPU build otherwise
#   ON              require a CUDA LibTorch and a CUDA toolkit of the same major version
#   OFF             never build the CUDA paths (a CUDA LibTorch still trains on the CPU)
# Two steps around find_package(Torch): kiln_cuda_before_torch() looks for the toolkit first, so
# that a missing one is Kiln's one-line error rather than LibTorch's; kiln_cuda_after_torch()
# checks what LibTorch was built for and sets KILN_WITH_CUDA.
if(NOT CMAKE_SCRIPT_MODE_FILE)  # tests include this file in script mode, which has no cache
  set(KILN_CUDA AUTO CACHE STRING "Build Kiln's CUDA paths: AUTO, ON or OFF")
  set_property(CACHE KILN_CUDA PROPERTY STRINGS AUTO ON OFF)
endif()

set(KILN_CUDA_INSTALL_HINT
    "install a CUDA PyTorch wheel (tools/setup.sh installs torch 2.15 for CUDA 13 into .venv/) "
    "and NVIDIA's CUDA toolkit of the wheel's major version, then configure with "
    "-DCMAKE_PREFIX_PATH=$(python3 -c 'print(__import__(\"torch\").utils.cmake_prefix_path)') "
    "(set CUDAToolkit_ROOT to the toolkit where it is not /usr/local/cuda)")

# A macro: the toolkit's variables must reach the caller's scope, where find_package(Torch) runs.
macro(kiln_cuda_before_torch)
  if(NOT KILN_CUDA MATCHES "^(AUTO|ON|OFF)$")
    message(FATAL_ERROR "KILN_CUDA = '${KILN_CUDA}': use AUTO, ON or OFF")
  endif()
  if(KILN_CUDA STREQUAL "ON")
    find_package(CUDAToolkit QUIET)
    if(NOT CUDAToolkit_FOUND)
      message(FATAL_ERROR "KILN_CUDA=ON but no CUDA toolkit was found (nvcc, cuda_runtime.h): "
                          ${KILN_CUDA_INSTALL_HINT})
    endif()
  endif()
endmacro()

# The CUDA major version a LibTorch library was linked for, from the libcudart.so.N it needs;
# empty when it needs none. LibTorch records no CUDA version in its CMake files, but this holds
# for Debian's packages and PyTorch's wheels alike.
function(kiln_cudart_major library out)
  set(major "")
  execute_process(COMMAND ${CMAKE_OBJDUMP} -p ${library} OUTPUT_VARIABLE headers
                  ERROR_QUIET RESULT_VARIABLE failed)
  if(NOT failed AND headers MATCHES "NEEDED +libcudart\\.so\\.([0-9]+)")
    set(major ${CMAKE_MATCH_1})
  endif()
  set(${out} "${major}" PARENT_SCOPE)
endfunction()

# The decision, apart from the files it reads so that tests/cmake/cuda_check_test.cmake can
# drive it: torch_cuda_major is what LibTorch was built for ("" = CPU-only), toolkit_version
# the toolkit found ("" = none). Sets `out` to ON or OFF, or stops with what to install.
function(kiln_decide_cuda mode torch_cuda_major toolkit_version out)
  if(torch_cuda_major STREQUAL "")
    if(mode STREQUAL "ON")
      message(FATAL_ERROR "KILN_CUDA=ON but the LibTorch found is CPU-only: "
                          ${KILN_CUDA_INSTALL_HINT})
    endif()
    set(${out} OFF PARENT_SCOPE)
    return()
  endif()
  if(mode STREQUAL "OFF")
    set(${out} OFF PARENT_SCOPE)
    return()
  endif()
  string(REGEX MATCH "^[0-9]+" toolkit_major "${toolkit_version}")
  if(NOT toolkit_major STREQUAL torch_cuda_major)
    message(FATAL_ERROR "LibTorch was built for CUDA ${torch_cuda_major} (it needs "
                        "libcudart.so.${torch_cuda_major}) but the CUDA toolkit found is "
                        "'${toolkit_version}': install CUDA ${torch_cuda_major}.x and point "
                        "CUDAToolkit_ROOT at it, or use a LibTorch built for the toolkit you have")
  endif()
  set(${out} ON PARENT_SCOPE)
endfunction()

# A PyTorch wheel finds its CUDA libraries (runtime, NCCL, cuDNN: PyPI's nvidia-* packages) by its
# own RPATH, $ORIGIN/../../nvidia/...; the toolkit CMake links against (nvcc's, which may be an
# older minor version with an older NCCL) must not take their place. Each of those folders goes
# first on Kiln's binaries' RPATH, and on the linker's path for the libraries LibTorch needs.
function(kiln_use_wheel_cuda_libraries library)
  execute_process(COMMAND ${CMAKE_OBJDUMP} -p ${library} OUTPUT_VARIABLE headers ERROR_QUIET)
  if(NOT headers MATCHES "(RPATH|RUNPATH) +([^\n]*\\$ORIGIN[^\n]*)")
    return()
  endif()
  get_filename_component(origin ${library} DIRECTORY)
  string(REPLACE "$ORIGIN" "${origin}" paths "${CMAKE_MATCH_2}")
  string(REPLACE ":" ";" paths "${paths}")
  foreach(path IN LISTS paths)
    get_filename_component(path ${path} ABSOLUTE)
    if(IS_DIRECTORY ${path} AND NOT path STREQUAL origin)
      add_link_options("LINKER:-rpath,${path}" "LINKER:-rpath-link,${path}")
    endif()
  endforeach()
endfunction()

function(kiln_cuda_after_torch)
  set(torch_major "")
  if(C10_CUDA_LIBRARY)
    kiln_cudart_major(${C10_CUDA_LIBRARY} torch_major)
    if(torch_major STREQUAL "")
      message(FATAL_ERROR "${C10_CUDA_LIBRARY} needs no libcudart.so.N: cannot tell which CUDA "
                          "this LibTorch was built for; set KILN_CUDA=OFF to build without CUDA")
    endif()
  endif()
  kiln_decide_cuda("${KILN_CUDA}" "${torch_major}" "${CUDAToolkit_VERSION}" with_cuda)
  if(C10_CUDA_LIBRARY)
    kiln_use_wheel_cuda_libraries(${C10_CUDA_LIBRARY})
  endif()
  set(KILN_WITH_CUDA ${with_cuda} PARENT_SCOPE)
  if(with_cuda)
    message(STATUS "Kiln: CUDA build (LibTorch for CUDA ${torch_major}, toolkit "
                   "${CUDAToolkit_VERSION} at ${CUDAToolkit_BIN_DIR})")
  endif()
endfunction()
