# The C++ runtime first among every program's shared libraries.
#
# LibTorch 2.x from a PyTorch wheel exports a copy of std::filesystem from
# libtorch.so (the wheel's toolchain links parts of a newer libstdc++ into it),
# and that copy's remove_all calls a null pointer. The dynamic linker binds a
# program's calls to the first library in its NEEDED list that defines them;
# libstdc++ normally comes last there, and on the GPU machine, whose g++ links
# libstdc++ statically, it was not there at all, so the calls went to
# libtorch.so: with PyTorch 2.11 every test that removed a scratch folder, and
# `asteroid cluster` removing its log folder, died of a segmentation fault.
# Naming the shared libstdc++ ahead of everything makes its definitions the
# ones found first, whichever way the compiler links the runtime. Harmless
# where LibTorch exports no such symbols (Debian's 1.13), so it is applied
# everywhere and the default build exercises it too.
#
# asteroid_runtime_first(<target>): whoever links <target> (the project's
# programs, and programs built against an installed Asteroid) links that way.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_SYSTEM_NAME STREQUAL "Linux")
  execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=libstdc++.so.6
                  OUTPUT_VARIABLE _asteroid_libstdcxx OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT IS_ABSOLUTE "${_asteroid_libstdcxx}" OR NOT EXISTS "${_asteroid_libstdcxx}")
    # A compiler that ships only the static runtime: the system's shared one,
    # which LibTorch itself loads, is the one to put first.
    find_library(ASTEROID_SYSTEM_LIBSTDCXX NAMES libstdc++.so.6)
    set(_asteroid_libstdcxx "${ASTEROID_SYSTEM_LIBSTDCXX}")
  endif()
  if(_asteroid_libstdcxx)
    get_filename_component(ASTEROID_LIBSTDCXX "${_asteroid_libstdcxx}" REALPATH)
    message(STATUS "C++ runtime linked first: ${ASTEROID_LIBSTDCXX}")
  else()
    message(WARNING "No shared libstdc++ found to link first; with a LibTorch "
                    "from a PyTorch wheel, std::filesystem calls may crash")
  endif()
endif()

function(asteroid_runtime_first target)
  if(ASTEROID_LIBSTDCXX)
    target_link_options(${target} INTERFACE
      "-Wl,--push-state,--no-as-needed,${ASTEROID_LIBSTDCXX},--pop-state")
  endif()
endfunction()
