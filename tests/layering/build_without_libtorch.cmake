# Configures, builds and tests the LibTorch-free layers alone: no LibTorch, no CUDA toolkit
# (NVTX off), warnings as errors. Run by ctest as Layering.LibTorchFreeLayersBuildWithoutLibTorch:
#   cmake -DSOURCE_DIR=... -DBUILD_DIR=... [-DGENERATOR=Ninja] -P build_without_libtorch.cmake
if(NOT GENERATOR)
  set(GENERATOR Ninja)
endif()
function(run_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}")
  endif()
  message(STATUS "${what}: ok")
endfunction()
run_step("configure without LibTorch"
  ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${BUILD_DIR} -G ${GENERATOR} -DCMAKE_BUILD_TYPE=Release
  -DDDPBENCH_TORCH=OFF -DDDPBENCH_NVTX=OFF -DDDPBENCH_WERROR=ON -DDDPBENCH_BUILD_BENCHMARKS=OFF)
run_step("build" ${CMAKE_COMMAND} --build ${BUILD_DIR})
run_step("the LibTorch-free tests" ${CMAKE_CTEST_COMMAND} --test-dir ${BUILD_DIR} -L fast -E "^Layering" --output-on-failure)
