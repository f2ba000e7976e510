#!/usr/bin/env python3
"""A checkpoint taken exactly between a wait4 system call's return and the library's translation of the
pid it returned (progs/waitcut.c): the driver stops the restored program under ptrace at the system call's
exit, asks for a checkpoint, sees the checkpoint signal pending and lets the program go, so the signal is
taken with the kernel's answer in hand. Restarted from there with virtual pids, the program must get the
child's pid as fork() gave it, not the old incarnation's kernel pid read with the new table.

usage: waitcut.py --revive R --inject I --restart RS --workdir W PROG
Root only (ptrace of a restored process, ns_last_pid)."""
import ctypes, errno, os, signal, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cut_harness import Harness, children, fail  # noqa: E402

PTRACE_SYSCALL, PTRACE_GETREGS, PTRACE_DETACH = 24, 12, 17
PTRACE_SEIZE, PTRACE_INTERRUPT = 0x4206, 0x4207
PTRACE_O_TRACESYSGOOD = 1
WALL = 0x40000000
SYS_WAIT4 = 61


class Regs(ctypes.Structure):  # struct user_regs_struct, x86-64
    _fields_ = [(n, ctypes.c_ulonglong) for n in (
        "r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax rcx rdx rsi rdi orig_rax rip cs eflags rsp ss fs_base "
        "gs_base ds es fs gs").split()]


libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.restype = ctypes.c_long
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]


def ptrace(req, pid, addr=0, data=0):
    r = libc.ptrace(req, pid, ctypes.c_void_p(addr), ctypes.c_void_p(data))
    if r < 0:
        e = ctypes.get_errno()
        raise OSError(e, "ptrace(%d, %d): %s" % (req, pid, os.strerror(e)))
    return r


def hold_at_wait4_exit(pid, gate, work, deadline):
    """Attach to `pid`, open the gate, and step system calls until wait4 returns a pid. Stays attached."""
    ptrace(PTRACE_SEIZE, pid, 0, PTRACE_O_TRACESYSGOOD)
    ptrace(PTRACE_INTERRUPT, pid)
    gate_open = False
    sig = 0
    while True:
        if time.time() > deadline:
            fail("the program made no wait4 returning a pid within the time", work)
        _, st = os.waitpid(pid, WALL)
        if not os.WIFSTOPPED(st):
            fail("the traced program ended (status %#x)" % st, work)
        if not gate_open:  # the interrupt's stop: attached, now let it go on
            open(gate, "w").close()
            gate_open = True
        s = os.WSTOPSIG(st)
        if s == (signal.SIGTRAP | 0x80):
            regs = Regs()
            ptrace(PTRACE_GETREGS, pid, 0, ctypes.addressof(regs))
            rax = ctypes.c_longlong(regs.rax).value
            if regs.orig_rax == SYS_WAIT4 and rax != -errno.ENOSYS and rax > 0:
                return rax
            sig = 0
        elif (st >> 16) != 0 or s == signal.SIGTRAP:
            sig = 0  # an event or group stop (the interrupt): nothing to deliver
        else:
            sig = s  # a signal for the program: delivered as it was sent
        ptrace(PTRACE_SYSCALL, pid, 0, sig)


def main():
    h = Harness.from_argv()
    proc, pid = h.to_incarnation_2(b"child has a virtual pid of its own\n")
    got = hold_at_wait4_exit(pid, os.path.join(h.gates, "B"), h.work, time.time() + 60)
    print("held at wait4's return (kernel pid %d in hand)" % got, flush=True)
    ck_proc = h.checkpoint()
    h.wait_pending(pid, ck_proc, ~0, "no signal reached the held program for the checkpoint",
                   lambda: ptrace(PTRACE_DETACH, pid))
    ptrace(PTRACE_DETACH, pid)  # it takes the checkpoint signal on its way back to user space
    h.finish_checkpoint(ck_proc, "cut after wait4")
    h.kill_all(proc, children(proc.pid))
    proc = h.restart(2)  # incarnation 3: the pid in hand is incarnation 2's kernel pid
    h.gate("C")
    # Then a wait blocked across a checkpoint and a restart (incarnation 4).
    h.wait_line(b"second child has a virtual pid of its own\n", proc)
    pid = children(proc.pid)[0]
    deadline = time.time() + 60
    while open("/proc/%d/syscall" % pid).read().split()[0] != str(SYS_WAIT4):
        if time.time() > deadline:
            fail("the program did not block in wait4", h.work)
        time.sleep(0.01)
    h.finish_checkpoint(h.checkpoint(), "blocked in wait4")
    h.kill_all(proc, children(proc.pid))
    proc = h.restart(3)
    h.gate("D")
    h.finish(proc, "started\nchild has a virtual pid of its own\nwaitpid gave the child's pid, exit status 7\n"
             "then waitpid gives -1 (No child processes)\nsecond child has a virtual pid of its own\n"
             "blocked waitpid gave the child's pid, exit status 9\n")
    print("PASS: a pid wait4 returned before the checkpoint was translated with that incarnation's ids, one "
          "it returned after the restart (the call made again) with the new one's", flush=True)


if __name__ == "__main__":
    main()
