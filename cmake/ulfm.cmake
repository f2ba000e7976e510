# The ULFM backend of revive::mpi::Recovery (src/mpi/recovery.cc), for an MPI with working ULFM
# (MPIX_Comm_revoke/shrink/agree, MPIX_ERR_PROC_FAILED). Explicit opt-in as well as a symbol check:
# MPICH 4.0.2 declares every symbol but its ch4 device aborts on an assertion when they are called
# (docs/status.md), so "the header has it" does not mean "it works". Off: the TCP failure mesh backend.
option(REVIVE_WITH_ULFM "revive::mpi::Recovery uses ULFM (MPIX_Comm_shrink...) instead of its own failure detector" OFF)

function(revive_ulfm_setup target)
  if(NOT REVIVE_WITH_ULFM)
    return()
  endif()
  include(CheckSymbolExists)
  set(CMAKE_REQUIRED_INCLUDES ${MPI_C_INCLUDE_DIRS})
  set(CMAKE_REQUIRED_LIBRARIES MPI::MPI_C)
  set(_hdr mpi.h)
  if(EXISTS "${MPI_C_HEADER_DIR}/mpi-ext.h")
    list(APPEND _hdr mpi-ext.h)
  endif()
  check_symbol_exists(MPIX_Comm_shrink "${_hdr}" REVIVE_HAVE_MPIX_COMM_SHRINK)
  check_symbol_exists(MPIX_ERR_PROC_FAILED "${_hdr}" REVIVE_HAVE_MPIX_ERR_PROC_FAILED)
  if(NOT REVIVE_HAVE_MPIX_COMM_SHRINK OR NOT REVIVE_HAVE_MPIX_ERR_PROC_FAILED)
    message(FATAL_ERROR "REVIVE_WITH_ULFM=ON but this MPI (${MPI_C_LIBRARIES}) lacks MPIX_Comm_shrink or "
                        "MPIX_ERR_PROC_FAILED: use an MPI built with ULFM, or turn the option off")
  endif()
  message(STATUS "revive: Recovery uses ULFM (MPIX_Comm_shrink found; opted in with REVIVE_WITH_ULFM)")
  target_compile_definitions(${target} PRIVATE REVIVE_ULFM=1)
endfunction()
