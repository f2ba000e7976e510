/* Experiment a2: failure detected out of band (here: a timeout on a nonblocking receive from the victim),
   then survivors build a communicator without it (MPI_Comm_create_group), then non-shrinking:
   MPI_Comm_spawn a replacement from the survivor comm, MPI_Intercomm_merge, MPI_Comm_split to restore order. */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
#define SAY(...) do{printf(__VA_ARGS__);fflush(stdout);}while(0)
int main(int argc,char**argv){
  MPI_Init(&argc,&argv);
  MPI_Comm parent; MPI_Comm_get_parent(&parent);
  if(parent!=MPI_COMM_NULL){ /* replacement */
    MPI_Comm m; MPI_Intercomm_merge(parent,1,&m);
    int key=atoi(argv[1]); MPI_Comm fixed; MPI_Comm_split(m,0,key,&fixed);
    int r,n,sum; MPI_Comm_rank(fixed,&r); MPI_Comm_size(fixed,&n);
    MPI_Allreduce(&r,&sum,1,MPI_INT,MPI_SUM,fixed);
    SAY("replacement: rank %d/%d sum=%d\n",r,n,sum);
    MPI_Finalize(); return 0;
  }
  MPI_Comm c; MPI_Comm_dup(MPI_COMM_WORLD,&c);
  MPI_Comm_set_errhandler(c,MPI_ERRORS_RETURN);
  int r,n; MPI_Comm_rank(c,&r); MPI_Comm_size(c,&n);
  int victim = argc>1?atoi(argv[1]):n-1; const char*mode=argc>2?argv[2]:"shrink";
  int fin = argc>3?atoi(argv[3]):1;
  { int *a=calloc(n,sizeof(int)),*b=calloc(n,sizeof(int)); MPI_Alltoall(a,1,MPI_INT,b,1,MPI_INT,c); }
  MPI_Barrier(c);
  if(r==victim) raise(SIGKILL);
  int y=0,done=0; MPI_Request q; MPI_Irecv(&y,1,MPI_INT,victim,0,c,&q);
  double t0=now(); while(!done && now()-t0<3){ MPI_Test(&q,&done,MPI_STATUS_IGNORE); usleep(1000);} 
  SAY("rank %d: recv from %d done=%d after %.2fs (timeout = failure)\n",r,victim,done,now()-t0);
  int crc=MPI_Cancel(&q); SAY("rank %d: cancel rc=%d\n",r,crc);
  MPI_Group g,gs; MPI_Comm_group(c,&g); int ex[1]={victim}; MPI_Group_excl(g,1,ex,&gs);
  MPI_Comm nc; t0=now(); int rc=MPI_Comm_create_group(c,gs,7,&nc);
  int nr,nn; MPI_Comm_rank(nc,&nr); MPI_Comm_size(nc,&nn); int sum=0; int rc2=MPI_Allreduce(&r,&sum,1,MPI_INT,MPI_SUM,nc);
  SAY("rank %d: create_group rc=%d in %.3fs -> %d/%d allreduce rc=%d sum=%d\n",r,rc,now()-t0,nr,nn,rc2,sum);
  if(!strcmp(mode,"spawn")){
    char key[16]; snprintf(key,sizeof key,"%d",victim); char*av[]={key,NULL};
    MPI_Comm ic; int errs[1]; t0=now();
    rc=MPI_Comm_spawn(argv[0],av,1,MPI_INFO_NULL,0,nc,&ic,errs);
    SAY("rank %d: spawn rc=%d %.3fs\n",r,rc,now()-t0);
    MPI_Comm m; MPI_Intercomm_merge(ic,0,&m); MPI_Comm fixed; MPI_Comm_split(m,0,r,&fixed);
    MPI_Comm_rank(fixed,&nr); MPI_Comm_size(fixed,&nn); MPI_Allreduce(&nr,&sum,1,MPI_INT,MPI_SUM,fixed);
    SAY("rank %d: repaired comm %d/%d sum=%d total %.3fs\n",r,nr,nn,sum,now()-t0);
  }
  if(fin){ SAY("rank %d: finalize\n",r); MPI_Finalize(); SAY("rank %d: finalized\n",r);} else _exit(0);
  return 0;
}
