! The C API from Fortran through the revive module: write, restart in a new handle, an error message.
program fortran_test
  use revive
  implicit none
  type(c_ptr) :: cp
  real(c_double), target :: x(100)
  integer(c_int), target :: n
  integer(c_int64_t) :: it
  integer :: i, rc
  character(len=256) :: base
  integer :: failures = 0

  call get_command_argument(1, base)
  do i = 1, 100
    x(i) = i * 0.5d0
  end do
  n = 7
  cp = revive_cp_create_at(revive_f_str("fortran"), revive_f_str(base))
  call check(c_associated(cp), "create")
  call check(revive_cp_add_double(cp, revive_f_str("x"), c_loc(x), 100_c_size_t) == 0, "add x")
  call check(revive_cp_add_int(cp, revive_f_str("n"), c_loc(n), 1_c_size_t) == 0, "add n")
  call check(revive_cp_commit(cp) == 0, "commit")
  it = 0
  call check(revive_cp_restart_if_needed(cp, it) == 0, "fresh start")
  do it = 0, 9
    x(1) = x(1) + 1
    rc = revive_cp_update_and_write(cp, it, 4_c_int64_t)
  end do
  call check(revive_cp_wait(cp) == 0, "wait")
  call check(revive_cp_version(cp) == 3, "three versions (0, 4, 8)")
  call revive_cp_destroy(cp)

  x = 0
  n = 0
  cp = revive_cp_create_at(revive_f_str("fortran"), revive_f_str(base))
  call check(revive_cp_add_double(cp, revive_f_str("x"), c_loc(x), 100_c_size_t) == 0, "add x again")
  call check(revive_cp_add_int(cp, revive_f_str("n"), c_loc(n), 1_c_size_t) == 0, "add n again")
  call check(revive_cp_commit(cp) == 0, "commit again")
  it = 0
  call check(revive_cp_restart_if_needed(cp, it) == 1, "restart")
  call check(it == 9, "iteration 8 + 1")
  ! bit-exact: a restored value differs from the written one by nothing
  call check(abs(x(1) - 9.5d0) < tiny(1d0) .and. abs(x(100) - 50d0) < tiny(1d0) .and. n == 7, "data restored")
  call check(revive_cp_add_int(cp, revive_f_str("late"), c_loc(n), 1_c_size_t) == -1, "add after commit fails")
  call check(index(revive_error(), "after commit") > 0, "error message: " // revive_error())
  call revive_cp_destroy(cp)

  if (failures > 0) then
    print *, failures, " check(s) failed"
    stop 1
  end if
  print *, "fortran api: all checks passed"

contains
  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    if (.not. ok) then
      print *, "CHECK failed: ", what
      failures = failures + 1
    end if
  end subroutine
end program
