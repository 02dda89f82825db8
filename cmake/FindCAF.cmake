# Finds the C++ Actor Framework 0.17 (Debian's libcaf-dev ships no CMake config).
#
# Defines the imported targets caf::core, caf::io and (when present) caf::openssl,
# and CAF_FOUND / CAF_VERSION. Only 0.17.x is accepted: its API (atoms,
# add_message_type, INI config) differs from 0.18+ and the project relies on it.
include(FindPackageHandleStandardArgs)
find_package(Threads REQUIRED)

find_path(CAF_INCLUDE_DIR caf/all.hpp)
find_library(CAF_CORE_LIBRARY caf_core)
find_library(CAF_IO_LIBRARY caf_io)
find_library(CAF_OPENSSL_LIBRARY caf_openssl)

if(CAF_INCLUDE_DIR AND EXISTS "${CAF_INCLUDE_DIR}/caf/config.hpp")
  file(STRINGS "${CAF_INCLUDE_DIR}/caf/config.hpp" _caf_version_line
       REGEX "^#define CAF_VERSION [0-9]+")
  if(_caf_version_line)
    string(REGEX REPLACE ".*CAF_VERSION ([0-9]+).*" "\\1" _caf_v "${_caf_version_line}")
    math(EXPR _caf_major "${_caf_v} / 10000")
    math(EXPR _caf_minor "(${_caf_v} / 100) % 100")
    math(EXPR _caf_patch "${_caf_v} % 100")
    set(CAF_VERSION "${_caf_major}.${_caf_minor}.${_caf_patch}")
  endif()
endif()

find_package_handle_standard_args(CAF
  REQUIRED_VARS CAF_INCLUDE_DIR CAF_CORE_LIBRARY CAF_IO_LIBRARY
  VERSION_VAR CAF_VERSION)

if(CAF_FOUND AND CAF_VERSION VERSION_GREATER_EQUAL 0.18)
  message(FATAL_ERROR "Asteroid needs CAF 0.17.x, found ${CAF_VERSION}")
endif()

if(CAF_FOUND AND NOT TARGET caf::core)
  add_library(caf::core INTERFACE IMPORTED)
  set_target_properties(caf::core PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${CAF_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES "${CAF_CORE_LIBRARY};Threads::Threads")
  add_library(caf::io INTERFACE IMPORTED)
  set_target_properties(caf::io PROPERTIES
    INTERFACE_LINK_LIBRARIES "${CAF_IO_LIBRARY};caf::core")
  if(CAF_OPENSSL_LIBRARY)
    add_library(caf::openssl INTERFACE IMPORTED)
    set_target_properties(caf::openssl PROPERTIES
      INTERFACE_LINK_LIBRARIES "${CAF_OPENSSL_LIBRARY};caf::io")
  endif()
endif()
mark_as_advanced(CAF_INCLUDE_DIR CAF_CORE_LIBRARY CAF_IO_LIBRARY CAF_OPENSSL_LIBRARY)
