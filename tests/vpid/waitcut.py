#!/usr/bin/env python3
"""A checkpoint taken exactly between a wait4 system call's return and the library's translation of the
pid it returned (progs/waitcut.c): the driver stops the restored program under ptrace at the system call's
exit, asks for a checkpoint, sees the checkpoint signal pending and lets the program go, so the signal is
taken with the kernel's answer in hand. Restarted from there with virtual pids, the program must get the
child's pid as fork() gave it, not the old incarnation's kernel pid read with the new table.

usage: waitcut.py --revive R --inject I --restart RS --workdir W PROG
Root only (ptrace of a restored process, ns_last_pid)."""
import argparse, ctypes, errno, os, random, shutil, signal, subprocess, sys, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "proctree"))
from tree_driver import children, fail, kill_tree  # noqa: E402
from e2e_driver import coordinator_gone, free_port  # noqa: E402

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


def pending(pid):
    """The signals pending for the process or its main thread (status SigPnd | ShdPnd)."""
    bits = 0
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(("SigPnd:", "ShdPnd:")):
                bits |= int(line.split()[1], 16)
    return bits


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
    ap = argparse.ArgumentParser()
    for o in ("--revive", "--inject", "--restart", "--workdir"):
        ap.add_argument(o, required=True)
    ap.add_argument("prog")
    a = ap.parse_args()
    if os.geteuid() != 0:
        fail("needs root (ptrace of a restored process, /proc/sys/kernel/ns_last_pid)")
    revive = os.path.abspath(a.revive)
    shutil.rmtree(a.workdir, ignore_errors=True)
    work, ck, gates = (os.path.join(a.workdir, d) for d in ("run", "ck", "gates"))
    for d in (work, gates):
        os.makedirs(d)
    port = free_port(random.Random())
    env = dict(os.environ, REVIVE_INJECT_LIB=os.path.abspath(a.inject), REVIVE_RESTART_BIN=os.path.abspath(a.restart),
               REVIVE_LOG="0")
    for k in ("REVIVE_PORT", "REVIVE_CKPT_DIR", "REVIVE_SECRET_FILE", "LD_PRELOAD"):
        env.pop(k, None)
    renv = dict(env, REVIVE_VPID="1")
    out = open(os.path.join(work, "stdout"), "wb")

    def checkpoint():
        return subprocess.Popen([revive, "checkpoint", "--port", str(port), "--ckpt-dir", ck], cwd=work,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)

    def finish_checkpoint(p, what):
        o, e = p.communicate(timeout=120)
        if p.returncode != 0:
            fail("revive checkpoint (%s) exited %d: %s" % (what, p.returncode, e.decode(errors="replace")), work)
        print("checkpoint (%s): %s" % (what, o.decode().strip()), flush=True)

    def restart(n):
        """revive restart with virtual pids, once the program is back (a child of the restart)."""
        with open(os.path.join(work, "restart-stderr-%d" % n), "wb") as err:
            p = subprocess.Popen([revive, "restart", "--port", str(port), ck], cwd=work, stdout=err, stderr=err,
                                 stdin=subprocess.DEVNULL, env=renv)
        deadline = time.time() + 60
        while not children(p.pid):
            if p.poll() is not None or time.time() > deadline:
                fail("restart %d did not bring the program back" % n, work)
            time.sleep(0.02)
        return p

    def kill_all(proc, roots):
        kill_tree(roots, proc.wait)
        if not coordinator_gone(revive, port, ck):
            fail("the coordinator did not exit after the program died", work)

    def wait_line(text, proc):
        deadline = time.time() + 60
        while text not in open(os.path.join(work, "stdout"), "rb").read():
            if proc.poll() is not None:
                fail("the program ended (rc %s) before printing %r" % (proc.returncode, text), work)
            if time.time() > deadline:
                fail("the program did not print %r within 60 s" % text, work)
            time.sleep(0.02)

    with open(os.path.join(work, "launch-stderr"), "wb") as err:
        proc = subprocess.Popen([revive, "launch", "--port", str(port), "--ckpt-dir", ck, "--", os.path.abspath(a.prog),
                                 gates], cwd=work, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env)
    wait_line(b"started\n", proc)
    finish_checkpoint(checkpoint(), "incarnation 1")
    kill_all(proc, [proc.pid])
    proc = restart(1)  # incarnation 2: new kernel pids, the program's seen through the table
    open(os.path.join(gates, "A"), "w").close()
    wait_line(b"child has a virtual pid of its own\n", proc)
    pid = children(proc.pid)[0]
    got = hold_at_wait4_exit(pid, os.path.join(gates, "B"), work, time.time() + 60)
    print("held at wait4's return (kernel pid %d in hand)" % got, flush=True)
    ck_proc = checkpoint()
    deadline = time.time() + 60
    while not pending(pid):
        if ck_proc.poll() is not None or time.time() > deadline:
            ptrace(PTRACE_DETACH, pid)
            fail("no signal reached the held program for the checkpoint", work)
        time.sleep(0.005)
    ptrace(PTRACE_DETACH, pid)  # it takes the checkpoint signal on its way back to user space
    finish_checkpoint(ck_proc, "cut after wait4")
    kill_all(proc, children(proc.pid))
    proc = restart(2)  # incarnation 3: the pid in hand is incarnation 2's kernel pid
    open(os.path.join(gates, "C"), "w").close()
    # Then a wait blocked across a checkpoint and a restart (incarnation 4).
    wait_line(b"second child has a virtual pid of its own\n", proc)
    pid = children(proc.pid)[0]
    deadline = time.time() + 60
    while open("/proc/%d/syscall" % pid).read().split()[0] != str(SYS_WAIT4):
        if time.time() > deadline:
            fail("the program did not block in wait4", work)
        time.sleep(0.01)
    finish_checkpoint(checkpoint(), "blocked in wait4")
    kill_all(proc, children(proc.pid))
    proc = restart(3)
    open(os.path.join(gates, "D"), "w").close()
    try:
        rc = proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        kill_tree([proc.pid])
        fail("the restored program did not finish", work)
    text = open(os.path.join(work, "stdout"), "rb").read().decode(errors="replace")
    print(text, end="", flush=True)
    want = ("started\nchild has a virtual pid of its own\nwaitpid gave the child's pid, exit status 7\n"
            "then waitpid gives -1 (No child processes)\nsecond child has a virtual pid of its own\n"
            "blocked waitpid gave the child's pid, exit status 9\n")
    if rc != 0 or text != want:
        fail("restart exited %d; stdout %r, want %r" % (rc, text, want), work)
    print("PASS: a pid wait4 returned before the checkpoint was translated with that incarnation's ids, one "
          "it returned after the restart (the call made again) with the new one's", flush=True)


if __name__ == "__main__":
    main()
