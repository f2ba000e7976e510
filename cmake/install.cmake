# Install rules of the application-level library (included by the top-level CMakeLists.txt):
# headers, librevive.so, a CMake package (find_package(revive) -> revive::revive, and revive::revive_mpi
# when src/mpi built it) and pkg-config files (revive.pc, revive-mpi.pc). Everything is in install
# COMPONENT "revive" so `cmake --install B --component revive` works even when other parts of the tree
# are not built. The package and .pc files are relocatable (cmake --install --prefix anywhere).
include(CMakePackageConfigHelpers)

if(NOT TARGET revive)
  return()
endif()

set(REVIVE_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/revive)
set(REVIVE_PC_DIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

install(TARGETS revive EXPORT reviveTargets COMPONENT revive
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/revive DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        COMPONENT revive PATTERN checkpoint_mpi.hpp EXCLUDE)
# The application hooks (src/hooks): revive::revive_hooks, <revive/hooks.h>, hooks.hpp and the Fortran
# module's source revive_hooks.f90 (in the include directory above), revive-hooks.pc.
if(TARGET revive_hooks)
  install(TARGETS revive_hooks EXPORT reviveTargets COMPONENT revive
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()
install(EXPORT reviveTargets NAMESPACE revive:: DESTINATION ${REVIVE_CMAKE_DIR} COMPONENT revive)

set(REVIVE_HAVE_MPI_TARGET OFF)
if(TARGET revive_mpi)
  set(REVIVE_HAVE_MPI_TARGET ON)
  # src/mpi adds the source include directory as a plain path, which cannot be exported; the same
  # directory already comes (BUILD/INSTALL-wrapped) from revive, so keep it for the build tree only.
  get_target_property(_mpi_inc revive_mpi INTERFACE_INCLUDE_DIRECTORIES)
  if(_mpi_inc)
    set(_wrapped "")
    foreach(d IN LISTS _mpi_inc)
      if(d MATCHES "^\\$<")
        list(APPEND _wrapped "${d}")
      else()
        list(APPEND _wrapped "$<BUILD_INTERFACE:${d}>")
      endif()
    endforeach()
    set_property(TARGET revive_mpi PROPERTY INTERFACE_INCLUDE_DIRECTORIES "${_wrapped}")
  endif()
  install(TARGETS revive_mpi EXPORT reviveMpiTargets COMPONENT revive
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
          RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  install(FILES ${PROJECT_SOURCE_DIR}/include/revive/checkpoint_mpi.hpp
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/revive COMPONENT revive)
  install(EXPORT reviveMpiTargets NAMESPACE revive:: DESTINATION ${REVIVE_CMAKE_DIR} COMPONENT revive)
endif()

configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/revive-config.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/revive-config.cmake INSTALL_DESTINATION ${REVIVE_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/revive-config-version.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/revive-config.cmake ${CMAKE_CURRENT_BINARY_DIR}/revive-config-version.cmake
        DESTINATION ${REVIVE_CMAKE_DIR} COMPONENT revive)

# pkg-config: prefix relative to the .pc file's own directory, so any install prefix works.
file(RELATIVE_PATH REVIVE_PC_TO_PREFIX /prefix/${REVIVE_PC_DIR} /prefix)
configure_file(${CMAKE_CURRENT_LIST_DIR}/revive.pc.in ${CMAKE_CURRENT_BINARY_DIR}/revive.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/revive.pc DESTINATION ${REVIVE_PC_DIR} COMPONENT revive)
if(TARGET revive_hooks)
  configure_file(${CMAKE_CURRENT_LIST_DIR}/revive-hooks.pc.in ${CMAKE_CURRENT_BINARY_DIR}/revive-hooks.pc @ONLY)
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/revive-hooks.pc DESTINATION ${REVIVE_PC_DIR} COMPONENT revive)
endif()
if(REVIVE_HAVE_MPI_TARGET)
  configure_file(${CMAKE_CURRENT_LIST_DIR}/revive-mpi.pc.in ${CMAKE_CURRENT_BINARY_DIR}/revive-mpi.pc @ONLY)
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/revive-mpi.pc DESTINATION ${REVIVE_PC_DIR} COMPONENT revive)
endif()
