! hooks_f STEPS [LONG_STEP LONG_MS]: hooks_c.c's program in Fortran through the revive_hooks module
! (include/revive/revive_hooks.f90). Same stdout and events.
module hooks_f_state
  use, intrinsic :: iso_c_binding
  implicit none
  integer, volatile :: n_ckpt = 0, n_cont = 0, n_restart = 0
  interface
    integer(c_int) function c_usleep(us) bind(C, name='usleep')
      import :: c_int
      integer(c_int), value :: us
    end function
    integer(c_int) function c_open(path, flags, mode) bind(C, name='open')
      import :: c_int, c_char
      character(kind=c_char), intent(in) :: path(*)
      integer(c_int), value :: flags, mode
    end function
    integer(c_long) function c_write(fd, buf, n) bind(C, name='write')
      import :: c_int, c_char, c_size_t, c_long
      integer(c_int), value :: fd
      character(kind=c_char), intent(in) :: buf(*)
      integer(c_size_t), value :: n
    end function
    integer(c_int) function c_close(fd) bind(C, name='close')
      import :: c_int
      integer(c_int), value :: fd
    end function
  end interface
contains
  subroutine event(line)
    character(len=*), intent(in) :: line
    character(len=1024) :: path
    integer :: st, plen
    integer(c_int) :: fd, r
    integer(c_long) :: w  ! ssize_t
    character(len=:), allocatable :: rec
    call get_environment_variable('HOOKS_EVENTS', path, plen, st)
    if (st /= 0) return
    ! O_WRONLY|O_CREAT|O_APPEND: one write(2) per line, so the hooks thread's lines and the main thread's
    ! never overwrite each other (a Fortran unit opened with position='append' seeks once, then races).
    fd = c_open(path(1:plen) // c_null_char, 1089_c_int, int(o'644', c_int))
    if (fd < 0) return
    rec = line // c_new_line
    w = c_write(fd, rec, int(len(rec), c_size_t))
    r = c_close(fd)
  end subroutine

  subroutine sleep_ms(ms)
    integer, intent(in) :: ms
    integer(c_int) :: r
    r = c_usleep(int(ms, c_int) * 1000_c_int)
  end subroutine

  subroutine counted(what, n)
    character(len=*), intent(in) :: what
    integer, intent(in) :: n
    character(len=64) :: l
    write(l, '(a,a,i0,a)') what, ' n=', n, ' tag=f'
    call event(trim(l))
  end subroutine

  subroutine on_checkpoint(arg) bind(C)
    type(c_ptr), value :: arg
    n_ckpt = n_ckpt + 1
    call counted('checkpoint', n_ckpt)
  end subroutine

  subroutine on_continue(arg) bind(C)
    type(c_ptr), value :: arg
    n_cont = n_cont + 1
    call counted('continue', n_cont)
  end subroutine

  subroutine on_restart(arg) bind(C)
    type(c_ptr), value :: arg
    character(len=128) :: l
    n_restart = n_restart + 1
    write(l, '(a,i0,a,i0,a,i0,a)') 'restart n=', n_restart, ' checkpoints=', n_ckpt, ' continues=', n_cont, ' tag=f'
    call event(trim(l))
  end subroutine
end module

program hooks_f
  use hooks_f_state
  use revive_hooks
  implicit none
  integer :: steps, long_step, long_ms, i, after, nargs
  integer(c_long) :: a, b
  character(len=32) :: arg, l
  steps = 100
  long_step = -1
  long_ms = 0
  nargs = command_argument_count()
  if (nargs >= 1) then
    call get_command_argument(1, arg)
    read(arg, *) steps
  end if
  if (nargs >= 3) then
    call get_command_argument(2, arg)
    read(arg, *) long_step
    call get_command_argument(3, arg)
    read(arg, *) long_ms
  end if
  write(l, '(a,i0)') 'active=', revive_hooks_active()
  call event(trim(l))
  if (revive_register_callback(REVIVE_HOOK_CHECKPOINT, c_funloc(on_checkpoint), c_null_ptr) <= 0) stop 3
  if (revive_register_callback(REVIVE_HOOK_CONTINUE, c_funloc(on_continue), c_null_ptr) <= 0) stop 3
  if (revive_register_callback(REVIVE_HOOK_RESTART, c_funloc(on_restart), c_null_ptr) <= 0) stop 3
  a = 0
  b = 0
  after = 0
  do i = 0, steps - 1
    call revive_critical_begin()
    call revive_critical_begin()
    a = a + i
    if (i == long_step) then
      call event('long begin')
      call sleep_ms(long_ms)
      call event('long end')
    end if
    b = b + i
    if (revive_critical_end() /= 0) stop 5
    if (revive_critical_end() /= 0) stop 5
    if (revive_critical_depth() /= 0 .or. a /= b) stop 6
    if (long_step >= 0 .and. i > long_step .and. after < 5) then
      after = after + 1
      write(l, '(a,i0)') 'after ', after
      call event(trim(l))
    end if
    write(*, '(a,i0,a,i0,a,i0)') 'step ', i, ' a=', a, ' b=', b
    flush(6)
    call sleep_ms(20)
  end do
  write(*, '(a)') 'done'
end program
