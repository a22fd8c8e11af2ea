# Configures the LibTorch-free layers with clang under ASan + UBSan and libFuzzer, builds
# them, runs their tests and each fuzz target (DDPBENCH_FUZZ_SECONDS). Run by ctest as
# Sanitizers.LibTorchFreeLayersUnderAsanUbsanAndFuzzing:
#   cmake -DSOURCE_DIR=... -DBUILD_DIR=... [-DGENERATOR=Ninja] [-DFUZZ_SECONDS=30] -P build_with_sanitizers.cmake
# Prints "skipped: <reason>" (ctest reports it skipped) where clang or libFuzzer is missing.
if(NOT GENERATOR)
  set(GENERATOR Ninja)
endif()
if(NOT FUZZ_SECONDS)
  set(FUZZ_SECONDS 30)
endif()
find_program(CLANGXX NAMES clang++ clang++-14)
if(NOT CLANGXX)
  message("skipped: no clang++ (scripts/test installs Debian's clang and libclang-rt-14-dev)")
  return()
endif()
include(${CMAKE_CURRENT_LIST_DIR}/../support/run_step.cmake)
ddpbench_run_step("configure with clang, ASan, UBSan and libFuzzer" out
  ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${BUILD_DIR} -G ${GENERATOR} -DCMAKE_BUILD_TYPE=Debug
  -DCMAKE_CXX_COMPILER=${CLANGXX} -DDDPBENCH_TORCH=OFF -DDDPBENCH_NVTX=OFF -DDDPBENCH_WERROR=ON
  -DDDPBENCH_BUILD_BENCHMARKS=OFF -DDDPBENCH_SANITIZE=ON -DDDPBENCH_FUZZ=ON -DDDPBENCH_FUZZ_SECONDS=${FUZZ_SECONDS})
ddpbench_run_step("build" out ${CMAKE_COMMAND} --build ${BUILD_DIR})
set(ENV{ASAN_OPTIONS} "detect_leaks=1:abort_on_error=1")
set(ENV{UBSAN_OPTIONS} "print_stacktrace=1:halt_on_error=1")
ddpbench_run_step("the LibTorch-free tests under ASan and UBSan" out
  ${CMAKE_CTEST_COMMAND} --test-dir ${BUILD_DIR} -L fast -E "^Layering" --output-on-failure)
ddpbench_run_step("the fuzz targets" out ${CMAKE_CTEST_COMMAND} --test-dir ${BUILD_DIR} -L fuzz -V)
# The fuzzers' final statistics (executions per target), for the log.
string(REGEX MATCHALL "Test +#[0-9]+: Fuzz\\.[a-z_0-9]+|Done [0-9]+ runs in [0-9]+ second\\(s\\)" stats "${out}")
foreach(line IN LISTS stats)
  message(STATUS "  ${line}")
endforeach()
