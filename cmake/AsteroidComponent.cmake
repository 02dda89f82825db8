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
    asteroid_runtime_first(${target})
    asteroid_torch_pch(${target})
    asteroid_unity_build(${target})
  endif()
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${arg_NAME})
  set(ASTEROID_COMPONENTS ${ASTEROID_COMPONENTS} ${target} CACHE INTERNAL "")
  install(DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/asteroid
          DESTINATION include FILES_MATCHING PATTERN "*.hpp")
endfunction()

# Compiles a LibTorch layer's sources a few at a time in one translation unit
# (CMake's unity build): each of them otherwise pays on its own for loading
# the precompiled LibTorch header and parsing CAF, spdlog and JSON, which was
# most of a clean build's time on CI's two cores. Batches of a few keep both
# cores busy and a one-file edit's rebuild short. CUDA sources stay apart.
function(asteroid_unity_build target)
  if(NOT ASTEROID_UNITY_BUILD)
    return()
  endif()
  set_target_properties(${target} PROPERTIES
    UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE ${ASTEROID_UNITY_BATCH})
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
  # Loading the 550 MB header is not free: a translation unit that never
  # includes LibTorch took 21 s with it and 9 s without, so only the files
  # that reach LibTorch use it (a wrong guess costs time, never correctness).
  get_target_property(sources ${target} SOURCES)
  get_target_property(source_dir ${target} SOURCE_DIR)
  foreach(source IN LISTS sources)
    get_filename_component(path ${source} ABSOLUTE BASE_DIR ${source_dir})
    _asteroid_reaches_torch(${path} reaches)
    if(NOT reaches)
      set_source_files_properties(${source} TARGET_DIRECTORY ${target}
        PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
    endif()
  endforeach()
endfunction()

# Sets <out> to whether <file> includes LibTorch, directly or through the
# project's own headers (asteroid/<layer>/..., or a path relative to the file).
# Answers are remembered for the whole configure run.
function(_asteroid_reaches_torch file out)
  get_property(known GLOBAL PROPERTY "asteroid_reaches_torch:${file}" SET)
  if(known)
    get_property(answer GLOBAL PROPERTY "asteroid_reaches_torch:${file}")
    set(${out} ${answer} PARENT_SCOPE)
    return()
  endif()
  # Provisional answer breaks include cycles.
  set_property(GLOBAL PROPERTY "asteroid_reaches_torch:${file}" FALSE)
  set(answer FALSE)
  if(EXISTS ${file})
    file(STRINGS ${file} includes REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"]")
    foreach(line IN LISTS includes)
      if(line MATCHES "[<\"](torch|ATen|c10)/")
        set(answer TRUE)
        break()
      endif()
      if(line MATCHES "\"([^\"]+)\"")
        set(name ${CMAKE_MATCH_1})
      elseif(line MATCHES "<(asteroid/[^>]+)>")
        set(name ${CMAKE_MATCH_1})
      else()
        continue()
      endif()
      get_filename_component(dir ${file} DIRECTORY)
      set(candidates ${dir}/${name})
      if(name MATCHES "^asteroid/([a-z_]+)/")
        list(APPEND candidates ${PROJECT_SOURCE_DIR}/${CMAKE_MATCH_1}/${name})
      endif()
      foreach(candidate IN LISTS candidates)
        if(EXISTS ${candidate})
          get_filename_component(candidate ${candidate} REALPATH)
          _asteroid_reaches_torch(${candidate} reaches)
          if(reaches)
            set(answer TRUE)
          endif()
          break()
        endif()
      endforeach()
      if(answer)
        break()
      endif()
    endforeach()
  endif()
  set_property(GLOBAL PROPERTY "asteroid_reaches_torch:${file}" ${answer})
  set(${out} ${answer} PARENT_SCOPE)
endfunction()
