# Warnings for ddpbench's own sources; third-party headers come in as SYSTEM includes.
# GCC's -Wshadow=local is clang's -Wshadow-uncaptured-local (the sanitizer and fuzz builds use clang).
function(ddpbench_set_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wnon-virtual-dtor -Wold-style-cast)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    target_compile_options(${target} PRIVATE -Wshadow-uncaptured-local)
  else()
    target_compile_options(${target} PRIVATE -Wshadow=local)
  endif()
  if(DDPBENCH_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
