# LibTorch 2.x ships a {fmt} of its own (12.x) among its headers, and its
# include folder comes with -isystem, ahead of the system's. Debian's spdlog
# (1.10) is built against Debian's {fmt} 9 and does not compile against 10
# or later, so its `#include <fmt/...>` must find the {fmt} it was built
# with. A copy of that {fmt}'s headers goes ahead of every other include
# folder. LibTorch's own public headers (torch/torch.h) do not include {fmt};
# only its profiler internals do, which Asteroid does not use.
set(_torch_fmt "")
foreach(dir IN LISTS TORCH_INCLUDE_DIRS)
  if(EXISTS "${dir}/fmt/core.h")
    set(_torch_fmt "${dir}")
  endif()
endforeach()
if(_torch_fmt AND TARGET fmt::fmt)
  get_target_property(_spdlog_fmt fmt::fmt INTERFACE_INCLUDE_DIRECTORIES)
  list(GET _spdlog_fmt 0 _spdlog_fmt)
  if(NOT _spdlog_fmt STREQUAL _torch_fmt AND EXISTS "${_spdlog_fmt}/fmt/core.h")
    file(COPY "${_spdlog_fmt}/fmt" DESTINATION "${CMAKE_BINARY_DIR}/spdlog_fmt")
    include_directories(BEFORE SYSTEM "${CMAKE_BINARY_DIR}/spdlog_fmt")
    message(STATUS "LibTorch ships its own {fmt} (${_torch_fmt}); spdlog keeps "
                   "the one it was built with (${_spdlog_fmt})")
  endif()
endif()
