# cmake -P tests/cmake/cuda_check_test.cmake: checks cmake/cuda.cmake's decision (what LibTorch
# was built for x the toolkit found x KILN_CUDA) case by case, each in its own cmake process
# because a refusal ends the script, and then a real configure of this tree with KILN_CUDA=ON
# against the LibTorch the build uses (KILN_TORCH_DIR: its Torch_DIR).
if(DEFINED CASE)
  include(${CMAKE_CURRENT_LIST_DIR}/../../cmake/cuda.cmake)
  kiln_decide_cuda("${MODE}" "${TORCH_MAJOR}" "${TOOLKIT}" decided)
  message("decided=${decided}")
  return()
endif()

set(failures 0)
function(expect mode torch_major toolkit expected)
  execute_process(COMMAND ${CMAKE_COMMAND} -DCASE=1 -DMODE=${mode} -DTORCH_MAJOR=${torch_major}
                          -DTOOLKIT=${toolkit} -P ${CMAKE_CURRENT_LIST_FILE}
                  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  string(CONCAT text "${out}" "${err}")
  string(REGEX REPLACE "[ \n]+" " " text "${text}")  # CMake wraps its messages
  if(NOT text MATCHES "${expected}")
    message(SEND_ERROR "KILN_CUDA=${mode}, LibTorch CUDA '${torch_major}', toolkit '${toolkit}': "
                       "expected /${expected}/, got (exit ${rc}):\n${text}")
  endif()
endfunction()

expect(AUTO "" "" "decided=OFF")
expect(AUTO 12 12.4.131 "decided=ON")
expect(ON 12 12.8.61 "decided=ON")
expect(OFF 12 12.4.131 "decided=OFF")
expect(ON "" 13.0.48 "KILN_CUDA=ON but the LibTorch found is CPU-only: install a CUDA PyTorch wheel .*cmake_prefix_path")
expect(AUTO 12 13.0.48 "LibTorch was built for CUDA 12 \\(it needs libcudart.so.12\\) but the CUDA toolkit found is '13.0.48'")
expect(ON 12 "" "LibTorch was built for CUDA 12 .* toolkit found is ''")

# The real thing: Kiln configured with KILN_CUDA=ON against the build's own LibTorch (Torch_DIR,
# PyPI's CUDA wheel) and this machine's toolkit decides on the CUDA build, naming both.
set(scratch ${CMAKE_CURRENT_BINARY_DIR}/kiln-cuda-check-build)
file(REMOVE_RECURSE ${scratch})
execute_process(COMMAND ${CMAKE_COMMAND} -S ${CMAKE_CURRENT_LIST_DIR}/../.. -B ${scratch}
                        -DKILN_CUDA=ON -DKILN_BUILD_TESTS=OFF -DTorch_DIR=${KILN_TORCH_DIR}
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
file(REMOVE_RECURSE ${scratch})
if(NOT rc EQUAL 0 OR NOT out MATCHES "Kiln: CUDA build \\(LibTorch for CUDA [0-9]+, toolkit [0-9.]+ at ")
  message(SEND_ERROR "configure with KILN_CUDA=ON against ${KILN_TORCH_DIR}: exit ${rc}\n${out}\n${err}")
endif()
