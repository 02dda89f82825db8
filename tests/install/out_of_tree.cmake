# cmake -P script: install, configure an example against the install, build, run.
file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}")
  endif()
endfunction()

# CMake reads a ':'-separated CMAKE_PREFIX_PATH from the environment after the
# one given on the command line, so the install is found first.
if(OUTER_PREFIX_PATH)
  set(ENV{CMAKE_PREFIX_PATH} "${OUTER_PREFIX_PATH}")
endif()
run(${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${prefix}")
run(${CMAKE_COMMAND} -S "${SOURCE_DIR}" -B "${WORK_DIR}/build" -G Ninja
    -DCMAKE_BUILD_TYPE=Release "-DCMAKE_PREFIX_PATH=${prefix}")
run(${CMAKE_COMMAND} --build "${WORK_DIR}/build")
# The example's own exit code and its closing line both count (CTest's
# PASS_REGULAR_EXPRESSION would ignore the exit code).
execute_process(COMMAND "${WORK_DIR}/build/example_single_device" --synthetic 3
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "example_single_device exited with ${rc}")
endif()
if(NOT out MATCHES "steps 3, train loss")
  message(FATAL_ERROR "example_single_device did not report 3 steps and a loss")
endif()
