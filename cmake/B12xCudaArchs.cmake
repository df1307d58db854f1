# Normalise CMAKE_CUDA_ARCHITECTURES: Hopper and Blackwell need the arch-specific ("a") targets for
# the instructions b12x uses (block-scaled mma, e2m1/ue8m0 cvt on 12x; setmaxnreg), so a plain
# 90/120/121 is rewritten to 90a/120a/121a, and only real cubins are built (no PTX for "a"
# targets: arch-specific PTX is not forward compatible).
#
# sm_120a and sm_121a together are compiled from one family PTX (compute_120f): the device
# front end (cicc, ~60 % of a kernel unit's device compile) runs once for both, ptxas twice. The
# kernels' feature guards accept __CUDA_ARCH_FAMILY_SPECIFIC__ >= 1000 wherever they accept
# __CUDA_ARCH_FEAT_SM120_ALL, so both cubins are the ones the per-arch PTX gives. Set
# B12X_CUDA_FAMILY_PTX=OFF to compile each from its own arch-specific PTX.
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
  string(REPLACE "-real" "" plain "${out}")
  set(B12X_CUDA_ARCHITECTURES "${plain}" CACHE INTERNAL "b12x compiled architectures")
  message(STATUS "b12x: CUDA architectures ${plain}")
  option(B12X_CUDA_FAMILY_PTX "Compile sm_120a and sm_121a from one compute_120f PTX" ON)
  if(B12X_CUDA_FAMILY_PTX AND "120a-real" IN_LIST out AND "121a-real" IN_LIST out)
    list(REMOVE_ITEM out "120a-real" "121a-real")
    set(CMAKE_CUDA_FLAGS "${CMAKE_CUDA_FLAGS} --generate-code=arch=compute_120f,code=[sm_120a,sm_121a]"
        PARENT_SCOPE)
    message(STATUS "b12x: sm_120a + sm_121a from one compute_120f PTX")
  endif()
  if(out STREQUAL "")
    set(out OFF)
  endif()
  set(CMAKE_CUDA_ARCHITECTURES "${out}" PARENT_SCOPE)
endfunction()
