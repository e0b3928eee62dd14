# The git commit Kiln was built from (core/util/build_info.h), as llama.cpp's build-info.cmake
# records it: a run names the commit of the binary that trained it, whatever folder it is started
# from. Git is asked at every build, not only when CMake configures: a commit made after the
# configure (its ref packed, or written where CMake watched no file) left `kiln --version` naming
# an older commit. The generated file is replaced only when the commit changes, so a build with
# no new commit compiles nothing again. Outside a git checkout the commit is "" (unknown).
#
# Included by CMakeLists.txt; run by the build as `cmake -DKILN_BUILD_INFO_OUT=... -P` this file.
if(KILN_BUILD_INFO_OUT)
  find_package(Git QUIET)
  set(KILN_GIT_COMMIT "")
  if(GIT_FOUND AND EXISTS "${KILN_SOURCE_DIR}/.git")
    execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse HEAD
                    WORKING_DIRECTORY ${KILN_SOURCE_DIR}
                    OUTPUT_VARIABLE KILN_GIT_COMMIT OUTPUT_STRIP_TRAILING_WHITESPACE
                    ERROR_QUIET RESULT_VARIABLE git_result)
    if(NOT git_result EQUAL 0)
      set(KILN_GIT_COMMIT "")
    endif()
  endif()
  configure_file(${KILN_SOURCE_DIR}/core/util/build_info.cpp.in ${KILN_BUILD_INFO_OUT}.new @ONLY)
  execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different ${KILN_BUILD_INFO_OUT}.new
                          ${KILN_BUILD_INFO_OUT})
  file(REMOVE ${KILN_BUILD_INFO_OUT}.new)
  return()
endif()

set(KILN_BUILD_INFO_FILE ${CMAKE_BINARY_DIR}/generated/build_info.cpp)
set(KILN_BUILD_INFO_COMMAND ${CMAKE_COMMAND} -DKILN_SOURCE_DIR=${CMAKE_SOURCE_DIR}
                            -DKILN_BUILD_INFO_OUT=${KILN_BUILD_INFO_FILE}
                            -P ${CMAKE_CURRENT_LIST_FILE})
execute_process(COMMAND ${KILN_BUILD_INFO_COMMAND})  # the file exists before the first build
add_custom_target(kiln_build_info COMMAND ${KILN_BUILD_INFO_COMMAND}
                  BYPRODUCTS ${KILN_BUILD_INFO_FILE} VERBATIM)
