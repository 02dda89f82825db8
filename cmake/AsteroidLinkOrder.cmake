# The C++ runtime comes first among a program's libraries.
#
# LibTorch 2.x from a PyTorch wheel (built with a devtoolset toolchain that
# links parts of a newer libstdc++ statically) exports its own copy of
# std::filesystem from libtorch.so. A program lists LibTorch before
# libstdc++.so, so the dynamic linker binds the program's std::filesystem calls
# to that copy, whose remove_all calls a null pointer: with PyTorch 2.11's
# LibTorch every test that removed a scratch folder, and `asteroid cluster`
# removing its log folder, died of a segmentation fault. Naming libstdc++
# ahead of every other library makes the system's copy the one found first.
# Harmless where LibTorch exports no such symbols (Debian's 1.13), so it is
# applied everywhere and the default build exercises the flag too.
#
# asteroid_runtime_first(<target>): consumers of <target> (the project's own
# programs, and programs built against an installed Asteroid) link that way.
function(asteroid_runtime_first target)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_SYSTEM_NAME STREQUAL "Linux")
    target_link_options(${target} INTERFACE
      "-Wl,--push-state,--no-as-needed,-lstdc++,--pop-state")
  endif()
endfunction()
