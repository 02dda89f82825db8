# asteroid_component(NAME <name> SOURCES <src...> [DEPS <targets...>] [TORCH])
#
# Declares one layer of the library as a static library `asteroid_<name>` whose
# public headers live in `<name>/asteroid/<name>/`. DEPS lists the only targets
# it may use, which keeps the dependency direction explicit; TORCH marks the
# layers allowed to see LibTorch (they also get the precompiled torch header).
set(ASTEROID_COMPONENTS "" CACHE INTERNAL "")

function(asteroid_component)
  cmake_parse_arguments(arg "TORCH" "NAME" "SOURCES;DEPS" ${ARGN})
  set(target asteroid_${arg_NAME})
  add_library(${target} STATIC ${arg_SOURCES})
  add_library(asteroid::${arg_NAME} ALIAS ${target})
  target_include_directories(${target} PUBLIC
    $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}>
    $<INSTALL_INTERFACE:include>)
  target_link_libraries(${target} PUBLIC ${arg_DEPS})
  if(arg_TORCH)
    target_link_libraries(${target} PUBLIC torch)
    asteroid_torch_pch(${target})
  endif()
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${arg_NAME})
  set(ASTEROID_COMPONENTS ${ASTEROID_COMPONENTS} ${target} CACHE INTERNAL "")
  install(DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/asteroid
          DESTINATION include FILES_MATCHING PATTERN "*.hpp")
endfunction()

# Precompiles <torch/torch.h> once per kind of target and reuses it: a torch
# translation unit costs ~15 s on two cores without it, and one PCH per target
# would cost about as much again per target. Libraries compile with -fPIC and
# executables with -fPIE, and GCC rejects a PCH built with the other flag, so
# there is one carrier for each.
function(asteroid_torch_pch target)
  if(NOT ASTEROID_USE_PCH)
    return()
  endif()
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "EXECUTABLE")
    set(carrier asteroid_torch_pch_exe)
  else()
    set(carrier asteroid_torch_pch)
  endif()
  if(NOT TARGET ${carrier})
    file(WRITE ${PROJECT_BINARY_DIR}/${carrier}.cpp
         "// Carrier of a shared LibTorch precompiled header.\n")
    add_library(${carrier} OBJECT ${PROJECT_BINARY_DIR}/${carrier}.cpp)
    target_link_libraries(${carrier} PRIVATE torch)
    if(type STREQUAL "EXECUTABLE")
      set_target_properties(${carrier} PROPERTIES POSITION_INDEPENDENT_CODE OFF)
      target_compile_options(${carrier} PRIVATE -fPIE)
    endif()
    target_precompile_headers(${carrier} PRIVATE <torch/torch.h>)
  endif()
  target_precompile_headers(${target} REUSE_FROM ${carrier})
endfunction()
