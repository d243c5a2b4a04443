# CUDA as a language, for the targets with .cu files (the CUDA example), wherever nvcc
# is found beside NCCL; no GPU is needed to build. Sets DDP_WITH_CUDA_LANGUAGE.
# CMAKE_CUDA_ARCHITECTURES defaults to 90: the H200 the GPU checks run on (FACTS.md).
# CMake 3.25 knows no cuda_std_20: .cu files that include ddp's headers must pass
# $<$<COMPILE_LANGUAGE:CUDA>:-std=c++20> themselves (the example's kernels.cu does not).
set(DDP_WITH_CUDA_LANGUAGE FALSE)
if(TARGET ddp::nccl AND TARGET CUDA::cublas)
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90 CACHE STRING "GPU architectures of the .cu files (90: H100/H200)")
    endif()
    enable_language(CUDA)
    set(DDP_WITH_CUDA_LANGUAGE TRUE)
    message(STATUS "ddp: CUDA ${CMAKE_CUDA_COMPILER_VERSION} (architectures ${CMAKE_CUDA_ARCHITECTURES}): "
                   "building the CUDA example")
  endif()
endif()
