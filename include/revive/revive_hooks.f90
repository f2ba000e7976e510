! revive_hooks: Fortran interface of the application hooks (<revive/hooks.h>, docs/hooks.md).
! Link with -lrevive_hooks. A callback is a bind(C) subroutine taking one type(c_ptr) by value:
!
!   subroutine on_ckpt(arg) bind(C)
!     type(c_ptr), value :: arg
!   end subroutine
!   id = revive_register_callback(REVIVE_HOOK_CHECKPOINT, c_funloc(on_ckpt), c_null_ptr)
!   call revive_critical_begin()  ...  ierr = revive_critical_end()
module revive_hooks
  use, intrinsic :: iso_c_binding
  implicit none
  integer(c_int), parameter :: REVIVE_HOOK_CHECKPOINT = 0
  integer(c_int), parameter :: REVIVE_HOOK_CONTINUE = 1
  integer(c_int), parameter :: REVIVE_HOOK_RESTART = 2

  interface
    integer(c_int) function revive_hooks_active() bind(C, name='revive_hooks_active')
      import :: c_int
    end function
    integer(c_int) function revive_register_callback(kind, fn, arg) bind(C, name='revive_register_callback')
      import :: c_int, c_funptr, c_ptr
      integer(c_int), value :: kind
      type(c_funptr), value :: fn
      type(c_ptr), value :: arg
    end function
    integer(c_int) function revive_unregister_callback(id) bind(C, name='revive_unregister_callback')
      import :: c_int
      integer(c_int), value :: id
    end function
    subroutine revive_critical_begin() bind(C, name='revive_critical_begin')
    end subroutine
    integer(c_int) function revive_critical_end() bind(C, name='revive_critical_end')
      import :: c_int
    end function
    integer(c_int) function revive_critical_depth() bind(C, name='revive_critical_depth')
      import :: c_int
    end function
    integer(c_int) function revive_set_critical_timeout(seconds) bind(C, name='revive_set_critical_timeout')
      import :: c_int, c_double
      real(c_double), value :: seconds
    end function
    real(c_double) function revive_critical_timeout() bind(C, name='revive_critical_timeout')
      import :: c_double
    end function
  end interface
end module revive_hooks
