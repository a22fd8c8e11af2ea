# Warnings for ddpbench's own sources; third-party headers come in as SYSTEM includes.
function(ddpbench_set_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow=local
                                           -Wnon-virtual-dtor -Wold-style-cast)
  if(DDPBENCH_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
