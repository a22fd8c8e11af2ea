# Configures, builds and tests the LibTorch-free layers alone: no LibTorch, no CUDA toolkit
# (NVTX off), warnings as errors. Run by ctest as Layering.LibTorchFreeLayersBuildWithoutLibTorch:
#   cmake -DSOURCE_DIR=... -DBUILD_DIR=... [-DGENERATOR=Ninja] -P build_without_libtorch.cmake
if(NOT GENERATOR)
  set(GENERATOR Ninja)
endif()
include(${CMAKE_CURRENT_LIST_DIR}/../support/run_step.cmake)
ddpbench_run_step("configure without LibTorch" out
  ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${BUILD_DIR} -G ${GENERATOR} -DCMAKE_BUILD_TYPE=Release
  -DDDPBENCH_TORCH=OFF -DDDPBENCH_NVTX=OFF -DDDPBENCH_WERROR=ON -DDDPBENCH_BUILD_BENCHMARKS=OFF)
ddpbench_run_step("build" out ${CMAKE_COMMAND} --build ${BUILD_DIR})
ddpbench_run_step("the LibTorch-free tests" out ${CMAKE_CTEST_COMMAND} --test-dir ${BUILD_DIR} -L fast -E "^Layering" --output-on-failure)
