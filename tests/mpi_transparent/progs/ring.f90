! ring_f ITERS SLEEP_US N: a Fortran program (mpi_f08) under checkpoint/restart (issue 7). Per
! iteration an integer token array of N elements goes round the ring (blocking MPI_Send/MPI_Recv, each
! rank updating it and holding it for SLEEP_US/size microseconds), then a halo exchange with both
! neighbours (MPI_Sendrecv) and an MPI_Allreduce of integers; rank 0 prints a digest line. Integer
! arithmetic modulo a prime below 2**31 keeps the digest the same on every compiler and MPI.
program ring_f
  use mpi_f08
  use, intrinsic :: iso_c_binding, only: c_int
  use, intrinsic :: iso_fortran_env, only: output_unit, int64
  implicit none
  interface
    integer(c_int) function usleep(us) bind(C, name="usleep")
      import :: c_int
      integer(c_int), value :: us
    end function usleep
  end interface
  integer(int64), parameter :: P = 2147483647_int64
  integer :: rank, nranks, left, right, it, i, iters, sleep_us, n, rc
  integer(int64) :: h, total
  integer(int64), allocatable :: tok(:), halo(:), mine(:)
  integer(int64) :: s(2), rs(2)
  character(len=32) :: a
  type(MPI_Status) :: st

  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks)
  iters = 40; sleep_us = 100000; n = 1000
  if (command_argument_count() >= 1) then
    call get_command_argument(1, a); read(a, *) iters
  end if
  if (command_argument_count() >= 2) then
    call get_command_argument(2, a); read(a, *) sleep_us
  end if
  if (command_argument_count() >= 3) then
    call get_command_argument(3, a); read(a, *) n
  end if
  allocate(tok(n), halo(2), mine(2))
  left = mod(rank + nranks - 1, nranks)
  right = mod(rank + 1, nranks)
  total = 17
  do it = 0, iters - 1
    if (rank == 0) then
      do i = 1, n
        tok(i) = mod(int(it, int64) * 1000003_int64 + i, P)
      end do
    else
      call MPI_Recv(tok, n, MPI_INTEGER8, left, 1, MPI_COMM_WORLD, st)
    end if
    do i = 1, n
      tok(i) = mod(tok(i) * 31_int64 + rank + 1 + mod(i * 7, 13), P)
    end do
    rc = usleep(int(sleep_us / nranks, c_int))
    call MPI_Send(tok, n, MPI_INTEGER8, right, 1, MPI_COMM_WORLD)
    if (rank == 0) call MPI_Recv(tok, n, MPI_INTEGER8, left, 1, MPI_COMM_WORLD, st)
    mine(1) = mod(int(rank + 1, int64) * 65537_int64 + it, P)
    mine(2) = mod(mine(1) * 3_int64, P)
    call MPI_Sendrecv(mine(1), 1, MPI_INTEGER8, right, 2, halo(1), 1, MPI_INTEGER8, left, 2, MPI_COMM_WORLD, st)
    call MPI_Sendrecv(mine(2), 1, MPI_INTEGER8, left, 3, halo(2), 1, MPI_INTEGER8, right, 3, MPI_COMM_WORLD, st)
    s(1) = mod(halo(1) + halo(2), P); s(2) = 1
    call MPI_Allreduce(s, rs, 2, MPI_INTEGER8, MPI_SUM, MPI_COMM_WORLD)
    if (rank == 0) then
      h = 7
      do i = 1, n
        h = mod(h * 31_int64 + tok(i), P)
      end do
      h = mod(h * 31_int64 + mod(rs(1), P), P)
      h = mod(h * 31_int64 + rs(2), P)
      write(output_unit, '(A,I0,A,I0)') 'ring_f it ', it, ' ', h
      flush(output_unit)
      total = mod(total * 131_int64 + h, P)
    end if
  end do
  if (rank == 0) then
    write(output_unit, '(A,I0,A,I0)') 'ring_f done ', iters, ' iterations total ', total
    flush(output_unit)
  end if
  call MPI_Finalize()
end program ring_f
