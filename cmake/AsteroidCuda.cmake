# CUDA kernels are built only when both a CUDA toolkit and a CUDA-enabled
# LibTorch are present (as on a Jetson). Debian's LibTorch is CPU-only, so the
# default build never needs nvcc or a GPU.
set(ASTEROID_WITH_CUDA OFF)
include(CheckLanguage)
check_language(CUDA)
if(CMAKE_CUDA_COMPILER AND (TORCH_CUDA_LIBRARIES OR CAFFE2_USE_CUDA))
  enable_language(CUDA)
  set(ASTEROID_WITH_CUDA ON)
endif()
message(STATUS "Asteroid CUDA kernels: ${ASTEROID_WITH_CUDA}")
