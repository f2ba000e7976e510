! Fortran: a compute loop with an allocatable array and formatted output at the end.
program fortran_cr
  implicit none
  integer, parameter :: n = 200000
  real(8), allocatable :: a(:)
  integer :: it, i, steps
  character(len=16) :: arg
  real(8) :: s
  steps = 1500
  if (command_argument_count() > 0) then
    call get_command_argument(1, arg)
    read(arg, *) steps
  end if
  allocate(a(n))
  do i = 1, n
    a(i) = dble(i) / dble(n)
  end do
  do it = 1, steps
    do i = 1, n
      a(i) = a(i) * 0.999d0 + 0.001d0 * sin(dble(i + it))
    end do
  end do
  s = sum(a)
  write(*, '(A, I0, A, F20.12)') 'steps=', steps, ' sum=', s
end program fortran_cr
