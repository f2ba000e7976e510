/* Experiment b: MPICH's ULFM extensions after a SIGKILLed rank. */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
static FILE*LOG; /* own file: the launcher's stdout forwarding dies with the proxy */
#define SAY(...) do{fprintf(LOG,__VA_ARGS__);fflush(LOG);}while(0)
int main(int argc,char**argv){
  MPI_Init(&argc,&argv);
  MPI_Comm c; MPI_Comm_dup(MPI_COMM_WORLD,&c); MPI_Comm_set_errhandler(c,MPI_ERRORS_RETURN);
  int r,n; MPI_Comm_rank(c,&r); MPI_Comm_size(c,&n); int victim=getenv("NOVICTIM")?-1:n-1; char fn[64]; snprintf(fn,sizeof fn,"mpich_rank%d.log",r); LOG=fopen(fn,"w"); signal(SIGPIPE,SIG_IGN); const char*op=argc>1?argv[1]:"shrink";
  MPI_Barrier(c);
  if(r==victim) raise(SIGKILL);
  if(victim<0){victim=(r+1)%n;}
  SAY("rank %d: alive after the kill of %d\n",r,victim); sleep(1); SAY("rank %d: slept\n",r);
  char s[MPI_MAX_ERROR_STRING]; int l, rc, cls;
  int x=r,y; rc=MPI_Sendrecv(&x,1,MPI_INT,victim,0,&y,1,MPI_INT,getenv("NOVICTIM")?(r+n-1)%n:victim,0,c,MPI_STATUS_IGNORE);
  s[0]=0; if(rc){MPI_Error_string(rc,s,&l);} MPI_Error_class(rc,&cls);
  SAY("rank %d: sendrecv with dead -> rc=%d class=%d (MPIX_ERR_PROC_FAILED=%d) %s\n",r,rc,cls,MPIX_ERR_PROC_FAILED,s);
  rc=MPI_Barrier(c); MPI_Error_class(rc,&cls); SAY("rank %d: barrier rc=%d class=%d\n",r,rc,cls);
  if(!strcmp(op,"ack")){ rc=MPIX_Comm_failure_ack(c); SAY("rank %d: failure_ack rc=%d\n",r,rc);
    MPI_Group fg; rc=MPIX_Comm_failure_get_acked(c,&fg); int fs=-1; if(!rc) MPI_Group_size(fg,&fs); SAY("rank %d: get_acked rc=%d size=%d\n",r,rc,fs);}
  if(!strcmp(op,"revoke")){ rc=MPIX_Comm_revoke(c); SAY("rank %d: revoke rc=%d\n",r,rc);}
  if(!strcmp(op,"agree")){ int f=1; rc=MPIX_Comm_agree(c,&f); SAY("rank %d: agree rc=%d f=%d\n",r,rc,f);}
  if(!strcmp(op,"shrink")||!strcmp(op,"ack")){ MPI_Comm nc; rc=MPIX_Comm_shrink(c,&nc); SAY("rank %d: shrink rc=%d\n",r,rc);
    if(!rc){int nn; MPI_Comm_size(nc,&nn); SAY("rank %d: shrunk size %d\n",r,nn);} }
  SAY("rank %d: done\n",r); _exit(0);
}
