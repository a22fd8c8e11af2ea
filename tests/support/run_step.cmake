# For the ctest scripts that build a second configuration (tests/layering, tests/sanitizers):
# runs one step, stops the script with its output when it fails, and hands the output back.
#   ddpbench_run_step("what" output_variable command args...)
function(ddpbench_run_step what output_variable)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}")
  endif()
  message(STATUS "${what}: ok")
  set(${output_variable} "${out}" PARENT_SCOPE)
endfunction()
