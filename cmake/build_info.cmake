# The git commit Kiln was built from, recorded when CMake configures (as llama.cpp's
# build-info.cmake does) instead of asked of git at run time: a run then names the commit of the
# binary that trained it, whatever folder it is started from. CMake configures again when HEAD
# moves, so the commit never goes stale. Outside a git checkout the commit is "" (unknown).
find_package(Git QUIET)
set(KILN_GIT_COMMIT "")
if(GIT_FOUND AND EXISTS "${CMAKE_SOURCE_DIR}/.git")
  execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse HEAD
                  WORKING_DIRECTORY ${CMAKE_SOURCE_DIR}
                  OUTPUT_VARIABLE KILN_GIT_COMMIT OUTPUT_STRIP_TRAILING_WHITESPACE
                  ERROR_QUIET RESULT_VARIABLE git_result)
  if(NOT git_result EQUAL 0)
    set(KILN_GIT_COMMIT "")
  endif()
  execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --git-path HEAD --symbolic-full-name HEAD
                  WORKING_DIRECTORY ${CMAKE_SOURCE_DIR}
                  OUTPUT_VARIABLE git_head_lines OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  string(REPLACE "\n" ";" git_head_lines "${git_head_lines}")
  list(GET git_head_lines 0 git_head_file)
  get_filename_component(git_head_file "${git_head_file}" ABSOLUTE BASE_DIR ${CMAKE_SOURCE_DIR})
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${git_head_file}")
  list(LENGTH git_head_lines git_head_count)
  if(git_head_count GREATER 1)
    list(GET git_head_lines 1 git_ref)
    execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --git-path ${git_ref}
                    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR}
                    OUTPUT_VARIABLE git_ref_file OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    get_filename_component(git_ref_file "${git_ref_file}" ABSOLUTE BASE_DIR ${CMAKE_SOURCE_DIR})
    if(EXISTS "${git_ref_file}")  # absent when the ref is packed
      set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${git_ref_file}")
    endif()
  endif()
endif()
configure_file(${CMAKE_SOURCE_DIR}/core/util/build_info.cpp.in
               ${CMAKE_BINARY_DIR}/generated/build_info.cpp @ONLY)
