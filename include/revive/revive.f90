! Fortran interface to the revive C API (<revive/checkpoint.h>). Compile this file with your program:
!   gfortran revive.f90 app.f90 $(pkg-config --cflags --libs revive)
! Names and keys are passed as Fortran strings (revive_f_str appends the C terminator); data as c_loc(x)
! of a variable with the TARGET attribute. Functions return 0 on success, -1 on error (revive_error()
! then gives the message); restart_if_needed returns 1 when a version was read.
module revive
  use, intrinsic :: iso_c_binding
  implicit none

  interface
    type(c_ptr) function revive_cp_create(name) bind(C, name="revive_cp_create")
      import :: c_ptr, c_char
      character(kind=c_char), intent(in) :: name(*)
    end function
    type(c_ptr) function revive_cp_create_at(name, base) bind(C, name="revive_cp_create_at")
      import :: c_ptr, c_char
      character(kind=c_char), intent(in) :: name(*), base(*)
    end function
    subroutine revive_cp_destroy(cp) bind(C, name="revive_cp_destroy")
      import :: c_ptr
      type(c_ptr), value :: cp
    end subroutine
    integer(c_int) function revive_cp_add_int(cp, key, p, n) bind(C, name="revive_cp_add_int")
      import :: c_ptr, c_char, c_int, c_size_t
      type(c_ptr), value :: cp, p
      character(kind=c_char), intent(in) :: key(*)
      integer(c_size_t), value :: n
    end function
    integer(c_int) function revive_cp_add_int64(cp, key, p, n) bind(C, name="revive_cp_add_int64")
      import :: c_ptr, c_char, c_int, c_size_t
      type(c_ptr), value :: cp, p
      character(kind=c_char), intent(in) :: key(*)
      integer(c_size_t), value :: n
    end function
    integer(c_int) function revive_cp_add_float(cp, key, p, n) bind(C, name="revive_cp_add_float")
      import :: c_ptr, c_char, c_int, c_size_t
      type(c_ptr), value :: cp, p
      character(kind=c_char), intent(in) :: key(*)
      integer(c_size_t), value :: n
    end function
    integer(c_int) function revive_cp_add_double(cp, key, p, n) bind(C, name="revive_cp_add_double")
      import :: c_ptr, c_char, c_int, c_size_t
      type(c_ptr), value :: cp, p
      character(kind=c_char), intent(in) :: key(*)
      integer(c_size_t), value :: n
    end function
    integer(c_int) function revive_cp_add_complex_double(cp, key, p, n) &
        bind(C, name="revive_cp_add_complex_double")
      import :: c_ptr, c_char, c_int, c_size_t
      type(c_ptr), value :: cp, p
      character(kind=c_char), intent(in) :: key(*)
      integer(c_size_t), value :: n
    end function
    integer(c_int) function revive_cp_add_bytes(cp, key, p, nbytes) bind(C, name="revive_cp_add_bytes")
      import :: c_ptr, c_char, c_int, c_size_t
      type(c_ptr), value :: cp, p
      character(kind=c_char), intent(in) :: key(*)
      integer(c_size_t), value :: nbytes
    end function
    integer(c_int) function revive_cp_add_child(parent, child) bind(C, name="revive_cp_add_child")
      import :: c_ptr, c_int
      type(c_ptr), value :: parent, child
    end function
    integer(c_int) function revive_cp_commit(cp) bind(C, name="revive_cp_commit")
      import :: c_ptr, c_int
      type(c_ptr), value :: cp
    end function
    integer(c_int) function revive_cp_restart_if_needed(cp, iteration) bind(C, name="revive_cp_restart_if_needed")
      import :: c_ptr, c_int, c_int64_t
      type(c_ptr), value :: cp
      integer(c_int64_t), intent(inout) :: iteration
    end function
    integer(c_int) function revive_cp_update_and_write(cp, iteration, every) &
        bind(C, name="revive_cp_update_and_write")
      import :: c_ptr, c_int, c_int64_t
      type(c_ptr), value :: cp
      integer(c_int64_t), value :: iteration, every
    end function
    integer(c_int) function revive_cp_write(cp, iteration) bind(C, name="revive_cp_write")
      import :: c_ptr, c_int, c_int64_t
      type(c_ptr), value :: cp
      integer(c_int64_t), value :: iteration
    end function
    integer(c_int) function revive_cp_update(cp) bind(C, name="revive_cp_update")
      import :: c_ptr, c_int
      type(c_ptr), value :: cp
    end function
    integer(c_int) function revive_cp_wait(cp) bind(C, name="revive_cp_wait")
      import :: c_ptr, c_int
      type(c_ptr), value :: cp
    end function
    integer(c_int64_t) function revive_cp_version(cp) bind(C, name="revive_cp_version")
      import :: c_ptr, c_int64_t
      type(c_ptr), value :: cp
    end function
    type(c_ptr) function revive_last_error_c() bind(C, name="revive_last_error")
      import :: c_ptr
    end function
    integer(c_size_t) function revive_strlen_c(s) bind(C, name="strlen")
      import :: c_ptr, c_size_t
      type(c_ptr), value :: s
    end function
  end interface

contains

  ! A Fortran string as a C string (trailing blanks removed, terminator appended).
  function revive_f_str(s) result(c)
    character(len=*), intent(in) :: s
    character(kind=c_char, len=len_trim(s) + 1) :: c
    c = trim(s) // c_null_char
  end function

  ! The message of the last failed call on this thread.
  function revive_error() result(msg)
    character(len=:), allocatable :: msg
    type(c_ptr) :: p
    character(kind=c_char), pointer :: chars(:)
    integer(c_size_t) :: n, i
    p = revive_last_error_c()
    n = revive_strlen_c(p)
    call c_f_pointer(p, chars, [n])
    allocate(character(len=n) :: msg)
    do i = 1, n
      msg(i:i) = chars(i)
    end do
  end function

end module revive
