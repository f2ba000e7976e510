/* The MPI job of tests/mpich_cr and tests/mpi_cr: a ring exchange plus an allreduce per step; rank 0 prints
 * a digest per step, so a lost, doubled or reordered message changes the output. `ring STEPS`. */
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
int main(int argc,char**argv){
  MPI_Init(&argc,&argv);
  int r,n; MPI_Comm_rank(MPI_COMM_WORLD,&r); MPI_Comm_size(MPI_COMM_WORLD,&n);
  int steps=argc>1?atoi(argv[1]):200;
  long acc=0;
  for(int i=0;i<steps;i++){
    long v=acc+r+i, in;
    MPI_Sendrecv(&v,1,MPI_LONG,(r+1)%n,0,&in,1,MPI_LONG,(r+n-1)%n,0,MPI_COMM_WORLD,MPI_STATUS_IGNORE);
    acc=(acc*31+in)%1000000007;
    long s; MPI_Allreduce(&acc,&s,1,MPI_LONG,MPI_SUM,MPI_COMM_WORLD);
    if(r==0) {printf("step %d %ld\n",i,s); fflush(stdout);}
    usleep(20000);
  }
  MPI_Finalize();
}
