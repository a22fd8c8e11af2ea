# Finds every dependency and wraps the awkward ones in interface targets:
#   ddpbench::torch  LibTorch with its c10d backends switched on where their headers exist
#                    (only with DDPBENCH_TORCH: the LibTorch-free layers build without it)
#   ddpbench::nvtx   NVTX3 (header-only), or nothing when its headers are absent
# None is vendored: LibTorch comes from Torch_DIR / CMAKE_PREFIX_PATH or a Python torch,
# the rest from the system (scripts/setup installs Debian's packages).

find_package(Threads REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED CONFIG)
find_package(CLI11 2.1 REQUIRED CONFIG)

# --- LibTorch -------------------------------------------------------------------------
if(DDPBENCH_TORCH)
set(DDPBENCH_PYTHON "" CACHE STRING "Python whose torch package provides LibTorch (overrides Torch_DIR)")
function(ddpbench_torch_dir_from_python python out)
  execute_process(
    COMMAND ${python} -c "import torch; print(torch.utils.cmake_prefix_path)"
    OUTPUT_VARIABLE prefix OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
  if(rc EQUAL 0 AND prefix)
    set(${out} "${prefix}/Torch" PARENT_SCOPE)
  endif()
endfunction()
if(DDPBENCH_PYTHON AND NOT IS_ABSOLUTE "${DDPBENCH_PYTHON}")
  # Tests start it by path (posix_spawn, no PATH search): a bare "python3" made every test that
  # asks it anything skip or fail on the first GPU run.
  find_program(_ddpbench_python_path "${DDPBENCH_PYTHON}" NO_CACHE)
  if(NOT _ddpbench_python_path)
    message(FATAL_ERROR "DDPBENCH_PYTHON=${DDPBENCH_PYTHON} is not a program on PATH")
  endif()
  set(DDPBENCH_PYTHON "${_ddpbench_python_path}" CACHE STRING "Python whose torch package provides LibTorch" FORCE)
endif()
if(DDPBENCH_PYTHON)
  # Re-derived at every configure, so switching Pythons never leaves a stale Torch_DIR.
  ddpbench_torch_dir_from_python("${DDPBENCH_PYTHON}" _ddpbench_torch_dir)
  if(NOT _ddpbench_torch_dir)
    message(FATAL_ERROR "DDPBENCH_PYTHON=${DDPBENCH_PYTHON} cannot import torch")
  endif()
  set(Torch_DIR "${_ddpbench_torch_dir}" CACHE PATH "LibTorch's CMake folder" FORCE)
elseif(NOT Torch_DIR)
  find_package(Torch CONFIG QUIET)
  if(NOT Torch_FOUND)
    ddpbench_torch_dir_from_python(python3 _ddpbench_torch_dir)
    if(_ddpbench_torch_dir)
      set(Torch_DIR "${_ddpbench_torch_dir}" CACHE PATH "LibTorch's CMake folder" FORCE)
    endif()
  endif()
endif()

# A CUDA build of LibTorch configures CUDA at find time. Point it at the toolkit, pin an
# architecture list so it does not try to run GPU detection (which fails with no GPU and
# with CMake releases that do not know nvcc's C++20 dialect), and supply the NVTX target
# that CUDA 12.9+ no longer defines (pytorch issue 152756).
if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
endif()
if(NOT DEFINED TORCH_CUDA_ARCH_LIST AND NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
  set(TORCH_CUDA_ARCH_LIST "9.0")
endif()
find_package(CUDAToolkit QUIET)
if(TARGET CUDA::nvtx3 AND NOT TARGET CUDA::nvToolsExt)
  add_library(CUDA::nvToolsExt INTERFACE IMPORTED)
  target_link_libraries(CUDA::nvToolsExt INTERFACE CUDA::nvtx3)
endif()

# Torch's cuda.cmake calls enable_language(CUDA) and then warns that it ignores the
# CMAKE_CUDA_ARCHITECTURES which CMP0104 (NEW) makes that call define.
cmake_policy(PUSH)
cmake_policy(SET CMP0104 OLD)
find_package(Torch 2.0 REQUIRED CONFIG)
cmake_policy(POP)
message(STATUS "ddpbench: LibTorch ${Torch_VERSION} from ${TORCH_INSTALL_PREFIX}")

add_library(ddpbench_torch INTERFACE)
add_library(ddpbench::torch ALIAS ddpbench_torch)
# The PyPI libtorch.so exports its own, statically linked copy of std::filesystem, whose
# remove_all crashes when called from our code. Putting libstdc++ ahead of LibTorch in the
# binary's DT_NEEDED list makes the dynamic linker bind those calls to the system library.
target_link_libraries(ddpbench_torch INTERFACE -Wl,--no-as-needed stdc++ -Wl,--as-needed ${TORCH_LIBRARIES})
separate_arguments(_ddpbench_torch_flags UNIX_COMMAND "${TORCH_CXX_FLAGS}")
target_compile_options(ddpbench_torch INTERFACE ${_ddpbench_torch_flags})

if(TARGET torch_cuda)
  set(DDPBENCH_HAVE_CUDA ON)
  target_compile_definitions(ddpbench_torch INTERFACE DDPBENCH_HAVE_CUDA=1)
  # ProcessGroupNCCL.hpp includes nccl.h: from the CUDA toolkit here, from the pip
  # nvidia-nccl package beside torch on machines whose toolkit lacks NCCL.
  find_path(DDPBENCH_NCCL_INCLUDE_DIR nccl.h
            HINTS ${TORCH_INSTALL_PREFIX}/../nvidia/nccl/include ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
  if(DDPBENCH_NCCL_INCLUDE_DIR)
    target_include_directories(ddpbench_torch SYSTEM INTERFACE ${DDPBENCH_NCCL_INCLUDE_DIR})
    target_compile_definitions(ddpbench_torch INTERFACE USE_C10D_NCCL)
  else()
    message(WARNING "ddpbench: nccl.h not found: the NCCL backend is left out (set DDPBENCH_NCCL_INCLUDE_DIR)")
  endif()
endif()
message(STATUS "ddpbench: CUDA code paths ${DDPBENCH_HAVE_CUDA}")

# c10d's ProcessGroupGloo.hpp includes Gloo's own headers, which the torch wheel does not
# ship; Debian's libgloo-dev provides a set it compiles against (see README, "Gloo").
find_path(DDPBENCH_GLOO_INCLUDE_DIR gloo/config.h PATH_SUFFIXES include)
if(DDPBENCH_GLOO_INCLUDE_DIR)
  set(DDPBENCH_HAVE_GLOO ON)
  target_include_directories(ddpbench_torch SYSTEM INTERFACE ${DDPBENCH_GLOO_INCLUDE_DIR})
  target_compile_definitions(ddpbench_torch INTERFACE DDPBENCH_HAVE_GLOO=1 USE_C10D_GLOO)
else()
  message(WARNING "ddpbench: Gloo headers not found: CPU process groups are disabled "
                  "(install libgloo-dev, or set DDPBENCH_GLOO_INCLUDE_DIR)")
endif()

endif()

# --- NVTX3 (header-only) ---------------------------------------------------------------
option(DDPBENCH_NVTX "Compile NVTX ranges in when the NVTX3 headers exist" ON)
add_library(ddpbench_nvtx INTERFACE)
add_library(ddpbench::nvtx ALIAS ddpbench_nvtx)
if(DDPBENCH_NVTX)
  find_path(DDPBENCH_NVTX3_INCLUDE_DIR nvtx3/nvtx3.hpp
            HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
  if(DDPBENCH_NVTX3_INCLUDE_DIR)
    set(DDPBENCH_HAVE_NVTX ON)
    target_include_directories(ddpbench_nvtx SYSTEM INTERFACE ${DDPBENCH_NVTX3_INCLUDE_DIR})
    target_compile_definitions(ddpbench_nvtx INTERFACE DDPBENCH_HAVE_NVTX=1)
    target_link_libraries(ddpbench_nvtx INTERFACE ${CMAKE_DL_LIBS})
  endif()
endif()
message(STATUS "ddpbench: NVTX ranges ${DDPBENCH_HAVE_NVTX}")

# --- Precompiled LibTorch headers ------------------------------------------------------
# One precompiled <torch/torch.h>, made for the lowest LibTorch layer (data) and reused by
# every LibTorch target: parsing it costs ~15 s per translation unit on two cores otherwise.
function(ddpbench_use_torch_pch target)
  if(NOT DDPBENCH_USE_PCH)
    return()
  endif()
  if(target STREQUAL "ddpbench_data")
    target_precompile_headers(${target} PRIVATE <torch/torch.h>)
  else()
    target_precompile_headers(${target} REUSE_FROM ddpbench_data)
  endif()
endfunction()
