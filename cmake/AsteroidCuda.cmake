# CUDA kernels are built only when both a CUDA toolkit and a CUDA-enabled
# LibTorch are present (as on a Jetson). Debian's LibTorch is CPU-only, so the
# default build never needs nvcc or a GPU.
set(ASTEROID_WITH_CUDA OFF)
include(CheckLanguage)
check_language(CUDA)
if(CMAKE_CUDA_COMPILER AND (TORCH_CUDA_LIBRARIES OR CAFFE2_USE_CUDA))
  if(NOT DEFINED CMAKE_CUDA_STANDARD)
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  endif()
  enable_language(CUDA)
  set(ASTEROID_WITH_CUDA ON)
endif()

# Architectures for the stand-alone kernel compile check (kernels/): Jetson
# Orin (sm_87) by default; override e.g. with -DASTEROID_CUDA_CHECK_FLAGS=-arch=sm_90.
set(ASTEROID_CUDA_CHECK_FLAGS "-arch=sm_87" CACHE STRING
    "nvcc flags for the kernels_cuda_compile_check target")
message(STATUS "Asteroid CUDA kernels: ${ASTEROID_WITH_CUDA}")
