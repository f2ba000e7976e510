/* Experiment a: does a survivor get an error (not a hang) from p2p with a SIGKILLed rank,
   and can survivors build a communicator without it (MPI_Comm_create_group over the survivor group)? */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(int argc,char**argv){
  MPI_Init(&argc,&argv);
  MPI_Comm c; MPI_Comm_dup(MPI_COMM_WORLD,&c);
  MPI_Comm_set_errhandler(c,MPI_ERRORS_RETURN);
  int r,n; MPI_Comm_rank(c,&r); MPI_Comm_size(c,&n);
  int victim = argc>1?atoi(argv[1]):n-1;
  const char *mode = argc>2?argv[2]:"p2p";
  { int *a=calloc(n,sizeof(int)),*b=calloc(n,sizeof(int)); MPI_Alltoall(a,1,MPI_INT,b,1,MPI_INT,c); } /* warm-up: every pair connected */
  MPI_Barrier(c);
  if(r==victim){ raise(SIGKILL); }
  sleep(1);
  double t0=now(); int rc; char s[MPI_MAX_ERROR_STRING]; int l;
  if(!strcmp(mode,"p2p")){
    int x=r,y; MPI_Status st;
    rc=MPI_Sendrecv(&x,1,MPI_INT,victim,0,&y,1,MPI_INT,victim,0,c,&st);
  } else {
    rc=MPI_Barrier(c);
  }
  s[0]=0; if(rc) MPI_Error_string(rc,s,&l);
  printf("rank %d: %s with dead %d -> rc=%d (%s) after %.2fs\n",r,mode,victim,rc,s,now()-t0); fflush(stdout);
  /* survivors: group without victim (failure set known out of band here: argv) */
  MPI_Group g,gs; MPI_Comm_group(c,&g); int ex[1]={victim};
  MPI_Group_excl(g,1,ex,&gs);
  MPI_Comm nc=MPI_COMM_NULL; t0=now();
  rc=MPI_Comm_create_group(c,gs,7,&nc);
  s[0]=0; if(rc) MPI_Error_string(rc,s,&l);
  printf("rank %d: create_group rc=%d (%s) %.2fs\n",r,rc,s,now()-t0); fflush(stdout);
  if(rc==MPI_SUCCESS){
    int nr,nn; MPI_Comm_rank(nc,&nr); MPI_Comm_size(nc,&nn);
    int sum=0; rc=MPI_Allreduce(&r,&sum,1,MPI_INT,MPI_SUM,nc);
    printf("rank %d: new comm %d/%d allreduce rc=%d sum=%d\n",r,nr,nn,rc,sum); fflush(stdout);
  }
  MPI_Finalize(); return 0;
}
