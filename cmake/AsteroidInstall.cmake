# Installs headers, the component libraries and AsteroidConfig.cmake so that a
# user project can `find_package(Asteroid)` and link `asteroid::asteroid`.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS asteroid ${ASTEROID_COMPONENTS} EXPORT AsteroidTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION include)
install(EXPORT AsteroidTargets NAMESPACE asteroid::
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Asteroid)

configure_package_config_file(cmake/AsteroidConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/AsteroidConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Asteroid)
write_basic_package_version_file(
  ${CMAKE_CURRENT_BINARY_DIR}/AsteroidConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES
  ${CMAKE_CURRENT_BINARY_DIR}/AsteroidConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/AsteroidConfigVersion.cmake
  cmake/FindCAF.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Asteroid)
