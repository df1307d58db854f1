# Normalise CMAKE_CUDA_ARCHITECTURES: Hopper and Blackwell need the arch-specific ("a") targets for
# the instructions b12x uses (block-scaled mma, e2m1/ue8m0 cvt on 12x; setmaxnreg), so a plain
# 90/120/121 is rewritten to 90a/120a/121a, and only real cubins are built (no PTX for "a"
# targets: arch-specific PTX is not forward compatible).
function(b12x_normalize_cuda_archs)
  set(out "")
  foreach(arch IN LISTS CMAKE_CUDA_ARCHITECTURES)
    string(REGEX REPLACE "-(real|virtual)$" "" a "${arch}")
    if(a MATCHES "^(90|100|103|120|121)$")
      set(a "${a}a")
    endif()
    if(NOT a MATCHES "^(89|90a|120a|121a)$")
      message(FATAL_ERROR "b12x: CMAKE_CUDA_ARCHITECTURES entry '${arch}' is not supported "
                          "(supported: 89, 90a, 120a, 121a)")
    endif()
    list(APPEND out "${a}-real")
  endforeach()
  list(REMOVE_DUPLICATES out)
  set(CMAKE_CUDA_ARCHITECTURES "${out}" PARENT_SCOPE)
  string(REPLACE "-real" "" plain "${out}")
  set(B12X_CUDA_ARCHITECTURES "${plain}" CACHE INTERNAL "b12x compiled architectures")
  message(STATUS "b12x: CUDA architectures ${plain}")
endfunction()
