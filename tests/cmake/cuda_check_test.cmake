# cmake -P tests/cmake/cuda_check_test.cmake: checks cmake/cuda.cmake's decision (what LibTorch
# was built for x the toolkit found x KILN_CUDA) case by case, each in its own cmake process
# because a refusal ends the script, and then a real configure of this tree with KILN_CUDA=ON
# against the LibTorch installed here when that one is CPU-only.
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
expect(ON "" 13.0.48 "KILN_CUDA=ON but the LibTorch found is CPU-only: install a CUDA LibTorch")
expect(AUTO 12 13.0.48 "LibTorch was built for CUDA 12 \\(it needs libcudart.so.12\\) but the CUDA toolkit found is '13.0.48'")
expect(ON 12 "" "LibTorch was built for CUDA 12 .* toolkit found is ''")

# The real thing, where it applies: this machine's LibTorch is CPU-only (Debian 12's 1.13).
file(GLOB cpu_only_torch /usr/lib/x86_64-linux-gnu/libtorch_cpu.so)
file(GLOB cuda_torch /usr/lib/x86_64-linux-gnu/libc10_cuda.so)
if(NOT cpu_only_torch OR cuda_torch)
  message("SKIP real configure: the LibTorch here is not a CPU-only one")
  return()
endif()
set(scratch ${CMAKE_CURRENT_BINARY_DIR}/kiln-cuda-check-build)
file(REMOVE_RECURSE ${scratch})
execute_process(COMMAND ${CMAKE_COMMAND} -S ${CMAKE_CURRENT_LIST_DIR}/../.. -B ${scratch}
                        -DKILN_CUDA=ON -DKILN_BUILD_TESTS=OFF
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
file(REMOVE_RECURSE ${scratch})
string(REGEX REPLACE "[ \n]+" " " err "${err}")
if(rc EQUAL 0 OR NOT err MATCHES "KILN_CUDA=ON but (the LibTorch found is CPU-only|no CUDA toolkit was found)")
  message(SEND_ERROR "configure with KILN_CUDA=ON against a CPU-only LibTorch: exit ${rc}\n${err}")
endif()
