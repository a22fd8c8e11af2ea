# The LibTorch-free layers built alone, once: no LibTorch, no CUDA toolkit (NVTX off), warnings
# as errors, under ASan + UBSan, with the libFuzzer targets; then their tests, and each fuzz
# target for a fixed number of inputs from a fixed seed (the same inputs on every run, so a
# slow machine fuzzes no less). One build proves both that these layers need no LibTorch and
# that they are clean under the sanitizers. -O1, as ASan advises: at -O0 the seeded simulations of
# the gate's tests ran minutes under ASan, seconds at -O1. Run by ctest as
# LibTorchFreeLayers.BuildAloneUnderSanitizersAndFuzz:
#   cmake -DSOURCE_DIR=... -DBUILD_DIR=... [-DGENERATOR=Ninja] [-DFUZZ_RUNS=N] -P build_without_libtorch_under_sanitizers.cmake
# Without clang (scripts/test installs it) it builds with the default compiler under ASan + UBSan
# and says the fuzz targets did not run.
if(NOT GENERATOR)
  set(GENERATOR Ninja)
endif()
if(NOT FUZZ_RUNS)
  set(FUZZ_RUNS 100000)
endif()
find_program(CLANGXX NAMES clang++ clang++-14)
set(compiler "")
set(fuzz OFF)
if(CLANGXX)
  set(compiler -DCMAKE_CXX_COMPILER=${CLANGXX})
  set(fuzz ON)
endif()
include(${CMAKE_CURRENT_LIST_DIR}/../support/run_step.cmake)
ddpbench_run_step("configure without LibTorch, under ASan and UBSan" out
  ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${BUILD_DIR} -G ${GENERATOR} -DCMAKE_BUILD_TYPE=Debug
  "-DCMAKE_CXX_FLAGS_DEBUG=-g -O1" ${compiler}
  -DDDPBENCH_TORCH=OFF -DDDPBENCH_NVTX=OFF -DDDPBENCH_WERROR=ON -DDDPBENCH_BUILD_BENCHMARKS=OFF
  -DDDPBENCH_SANITIZE=ON -DDDPBENCH_FUZZ=${fuzz} -DDDPBENCH_FUZZ_RUNS=${FUZZ_RUNS})
ddpbench_run_step("build" out ${CMAKE_COMMAND} --build ${BUILD_DIR})
set(ENV{ASAN_OPTIONS} "detect_leaks=1:abort_on_error=1")
set(ENV{UBSAN_OPTIONS} "print_stacktrace=1:halt_on_error=1")
ddpbench_run_step("the LibTorch-free tests under ASan and UBSan" out
  ${CMAKE_CTEST_COMMAND} --test-dir ${BUILD_DIR} -L fast -E "^Layering" --output-on-failure)
if(NOT fuzz)
  message(STATUS "the fuzz targets did not run: no clang++ (scripts/test installs Debian's clang and libclang-rt-14-dev)")
  return()
endif()
ddpbench_run_step("the fuzz targets, ${FUZZ_RUNS} inputs each" out ${CMAKE_CTEST_COMMAND} --test-dir ${BUILD_DIR} -L fuzz -V)
# The fuzzers' final statistics (executions per target), for the log.
string(REGEX MATCHALL "Test +#[0-9]+: Fuzz\\.[a-z_0-9]+|Done [0-9]+ runs in [0-9]+ second\\(s\\)" stats "${out}")
foreach(line IN LISTS stats)
  message(STATUS "  ${line}")
endforeach()
