#!/usr/bin/env python3
"""Files the computation writes come back with the checkpoint (files plugin, docs/plugins.md).

Programs nobody here wrote, each checkpointed at a random moment, left running so that it changes its
files after the checkpoint, killed by SIGKILL at a second random moment, restarted; the final result
must equal an uninterrupted run, byte for byte:
  sqlite    sqlite3 loading 900k rows in 45 transactions (rollback journal), indexing, checking
  make      `make -j2` of a 28-file C project; gcc's temporaries live in a node-local directory
            (TMPDIR, listed in REVIVE_LOCAL_DIRS) that is emptied before the restart, as on another host
  rewrite   python3 appending to a log and rewriting a state file in place through one descriptor
  localdir  a bash script working in a directory under the node-local directory: each line appends to
            out.txt (`>>`) a value derived from its last line, rewrites count.txt (`>`) and replaces
            sorted.txt by a sorted copy of itself plus one line (`sort > tmp && mv tmp sorted.txt`); none
            is open at the checkpoint, all were created since the launch (only the walk saves them), and
            the stopped run changes them after it. On this host they must be put back.
  renamed   a bash script in a directory under the node-local directory renaming out.txt away to a new
            name each line (`mv out.txt old-<ns>.txt`) after counting the directory's files, then writing
            out.txt again: at restart the walked out.txt the stopped run renamed away after the checkpoint
            must not stay under its new name (the restarted run would count one file more). This host only.
  renamed_dir  the same, but out.txt is moved into another subdirectory each line (`mkdir -p
            archive/<i>; mv out.txt archive/<i>/out-<ns>.txt`) after counting every file and directory below
            the job's directory: neither the walked out.txt the stopped run moved into a directory that held
            no walked file at the checkpoint, nor the out.txt files it wrote and moved after, nor the
            directories it made after may stay (the restarted run would count more). This host only.
  renamed_open  bash appending each line through a descriptor kept open on log.txt (`exec 3>>log.txt`)
            and renaming the file away while it is open (`mv log.txt log-<ns>.txt; exec 3>>log.txt`):
            the log.txt open at the checkpoint, which the stopped run renamed after it, must not stay
            under its new name (the restarted run would count one file more). This host only.
  renamed_cwd  renamed_open in the launch's working directory (a project directory, not a node-local
            one, which the restore's walk does not see): the log.txt open at the checkpoint that the stopped
            run renamed after it must not stay under its new name either (the renames log, docs/plugins.md).
  renamed_child  renamed_cwd with the script run by a child of the launch root (`bash count.sh; true`: the
            root holds no descriptor of log.txt): each restored process reads the renames log for itself.
With --netns scripts/netns.sh the last round restarts in a network namespace (another host) whose
node-local directory is a fresh tmpfs (its own /tmp): everything there comes from the image. Needs root;
without namespaces every round restarts on this host, saying so. There make's assembler starts 0.2 s
late, so checkpoints land while gcc's .s temporaries sit closed.
Set REVIVE_LOCAL_DIRS= (empty) or REVIVE_FILES=none to watch the cases fail without the plugin.
Failures print FAIL and exit 1. --rounds N repeats with new random moments; --seed makes them repeatable.
"""
import argparse, hashlib, os, random, shutil, signal, subprocess, sys, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "hosts"))
from harness import descendants, fail, skip, run, free_port, clean_env, with_namespaces  # noqa: E402

NFILES = 28  # 41 until 2026-11-27 (the project); 28 keep the compiler busy enough, in 2/3 of the time


def sqlite_script(path):
    lines = ["CREATE TABLE t(a INTEGER, b TEXT);"]
    for k in range(45):
        lo = k * 20000 + 1
        lines.append("WITH RECURSIVE c(x) AS (SELECT %d UNION ALL SELECT x+1 FROM c WHERE x<%d) INSERT INTO t "
                     "SELECT x, printf('%%08x', (x*2654435761) %% 4294967296) FROM c;" % (lo, lo + 19999))
        lines.append("SELECT 'batch %d', count(*) FROM t;" % k)
    lines += ["CREATE INDEX tb ON t(b);", "SELECT count(*), sum(a), min(b), max(b) FROM t;",
              "SELECT a FROM t ORDER BY b LIMIT 5;", "PRAGMA integrity_check;"]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def make_project(d, slow_as=False, nfiles=NFILES, nfuncs=60):
    os.makedirs(d)
    cc = "gcc"
    if slow_as:
        # An assembler that starts 0.2 s late: gcc's .s temporary then sits closed in TMPDIR between cc1
        # and as for long enough that checkpoints land there (only the directory walk can save it).
        os.makedirs(os.path.join(d, "slow"))
        with open(os.path.join(d, "slow", "as"), "w") as f:
            f.write('#!/bin/sh\nsleep 0.2\nexec /usr/bin/as "$@"\n')
        os.chmod(os.path.join(d, "slow", "as"), 0o755)
        cc = "gcc -B%s/" % os.path.join(d, "slow")
    calls = []
    for i in range(nfiles):
        with open(os.path.join(d, "f%02d.c" % i), "w") as f:
            # Enough code per file that the compiler runs long enough to be caught in its middle.
            f.write("static unsigned mix%d(unsigned x) { return x * %du + (x >> %d); }\n" % (i, 2 * i + 3, i % 7 + 1))
            for j in range(nfuncs):
                f.write("unsigned g%d_%d(unsigned x) { for (int k = 0; k < %d; k++) x = mix%d(x) ^ %du; return x; }\n"
                        % (i, j, j + 2, i, i * 97 + j))
            f.write("unsigned f%d(unsigned x) { unsigned s = 0;\n" % i)
            f.write("".join("  s += g%d_%d(x + %d);\n" % (i, j, j) for j in range(nfuncs)))
            f.write("  return s; }\n")
        calls.append(i)
    with open(os.path.join(d, "main.c"), "w") as f:
        f.write("#include <stdio.h>\n")
        f.write("".join("unsigned f%d(unsigned);\n" % i for i in calls))
        f.write("int main(void) { unsigned s = 1;\n")
        f.write("".join('  s = f%d(s); printf("f%d %%u\\n", s);\n' % (i, i) for i in calls))
        f.write("  return 0; }\n")
    objs = " ".join("f%02d.o" % i for i in range(nfiles)) + " main.o"
    with open(os.path.join(d, "Makefile"), "w") as f:
        f.write("prog: %s\n\tgcc -o $@ $^\n%%.o: %%.c\n\t%s -O2 -c -o $@ $<\n" % (objs, cc))


REWRITE = r'''
import os, sys, time, zlib
n = int(sys.argv[1])
log = open("log.txt", "a")
st = os.open("state.bin", os.O_RDWR | os.O_CREAT, 0o644)
h = 0
for i in range(n):
    log.write("step %d %08x\n" % (i, h)); log.flush()
    h = zlib.crc32(b"%d:%d" % (i, h))
    # The same bytes rewritten in place; its length varies so it shrinks and grows.
    rec = (b"%08x" % h) * (1 + i % 7)
    os.pwrite(st, rec + b"\n", 0)
    os.ftruncate(st, len(rec) + 1)
    time.sleep(0.01)
os.lseek(st, 0, 0)
print("final", h, os.read(st, 100).decode().strip()[:8], flush=True)
'''


LOCALDIR = r'''
i=0
while [ $i -lt 120 ]; do
  i=$((i+1))
  echo "$i $(tail -n 1 out.txt 2>/dev/null | cksum)" >> out.txt
  wc -l < out.txt > count.txt
  { cat sorted.txt 2>/dev/null; echo $((i * 7 % 101)); } | sort -n > sorted.tmp && mv sorted.tmp sorted.txt
  sleep 0.01
done
cksum out.txt count.txt sorted.txt
'''

RENAMED = r'''
i=0
while [ $i -lt 80 ]; do
  i=$((i+1))
  n=$(ls | wc -l); s=$(cat old-*.txt 2>/dev/null | cksum)
  [ -e out.txt ] && mv out.txt "old-${EPOCHREALTIME/./}.txt"
  echo "$i $n $s" > out.txt
  sleep 0.03
done
ls | wc -l; cat old-*.txt out.txt | cksum
'''
RENAMED_DIR = r'''
i=0
while [ $i -lt 80 ]; do
  i=$((i+1))
  n=$(ls -R | wc -l); s=$(cat archive/*/*.txt 2>/dev/null | cksum); m=$(find . -mindepth 1 -name '.revive-*' -prune -o -type d -print | wc -l)
  mkdir -p "archive/$i"
  [ -e out.txt ] && mv out.txt "archive/$i/out-${EPOCHREALTIME/./}.txt"
  echo "$i $n $m $s" > out.txt
  sleep 0.03
done
ls -R | wc -l; find . -mindepth 1 -name '.revive-*' -prune -o -type d -print | wc -l; cat archive/*/*.txt out.txt | cksum
'''
# The new name comes from bash itself ($EPOCHREALTIME, no child): a checkpoint that lands while the mv
# runs is the only moment whose restart renames to the same name again (the defect then does not show);
# the sleep keeps that moment a small share of each line.

RENAMED_OPEN = r'''
exec 3>>log.txt
i=0
while [ $i -lt 80 ]; do
  i=$((i+1))
  n=$(ls | wc -l); s=$(cat log*.txt | cksum)
  echo "$i $n $s" >&3
  mv log.txt "log-${EPOCHREALTIME/./}.txt"; exec 3>>log.txt
  sleep 0.03
done
ls | wc -l; cat log*.txt | cksum
'''

SCRIPTS = {"localdir": LOCALDIR, "renamed": RENAMED, "renamed_dir": RENAMED_DIR, "renamed_open": RENAMED_OPEN,
           "renamed_cwd": RENAMED_OPEN, "renamed_child": RENAMED_OPEN}


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:16]


def proc_states(d):
    """What every process of the machine that runs in or below d (or is revive's) is doing: a hang's report."""
    lines = []
    for pid in sorted(int(x) for x in os.listdir("/proc") if x.isdigit()):
        try:
            cwd = os.readlink("/proc/%d/cwd" % pid)
            cmd = open("/proc/%d/cmdline" % pid, "rb").read().replace(b"\0", b" ").decode(errors="replace")[:160]
            if not (cwd.startswith(d) or d in cmd):
                continue
            st = open("/proc/%d/stat" % pid).read()
            fields = st[st.rindex(")") + 2:].split()
            wchan = open("/proc/%d/wchan" % pid).read()
            stack = ""
            try:
                stack = open("/proc/%d/syscall" % pid).read().split()[0]
            except (OSError, IndexError):
                pass
            lines.append("pid %d ppid %s state %s wchan %s syscall %s: %s" % (pid, fields[1], fields[0], wchan, stack, cmd))
        except (OSError, ValueError):
            continue
    return "processes:\n" + ("\n".join(lines) or "(none)")


def kill_all(launcher, port):
    """SIGKILL the whole computation at once (the launcher is the program: `revive launch` execs it)."""
    for q in descendants(launcher.pid):
        try:
            os.kill(q, signal.SIGKILL)
        except ProcessLookupError:
            pass
    run(["pkill", "-9", "-f", "(revive|coordinator).*--port %d( |$)" % port])
    launcher.wait()
    time.sleep(0.3)


class Case:
    def __init__(self, a, name, rng, hosts):
        self.a, self.name, self.rng, self.hosts = a, name, rng, hosts
        self.revive = os.path.abspath(a.revive)
        self.work = os.path.join(os.path.abspath(a.workdir), name)
        shutil.rmtree(self.work, ignore_errors=True)
        os.makedirs(self.work)
        self.env = clean_env({"REVIVE_LOG": os.environ.get("REVIVE_LOG", "1")})

    def prepare(self, d):
        """Creates the program's inputs in d; returns (argv, stdin path or None, files to compare)."""
        if self.name == "sqlite":
            sqlite_script(os.path.join(d, "load.sql"))
            return ["sqlite3", "db.sqlite"], "load.sql", ["db.sqlite"]
        if self.name == "make":
            make_project(os.path.join(d, "proj"), slow_as=self.hosts is not None)
            os.makedirs(os.path.join(d, "nodetmp"))
            return ["make", "-s", "-j2", "-C", "proj"], None, []
        if self.name in SCRIPTS:
            with open(os.path.join(d, "count.sh"), "w") as f:
                f.write(SCRIPTS[self.name])
            if self.name in ("renamed_cwd", "renamed_child"):
                os.makedirs(os.path.join(d, "proj"))
                run = "exec bash ../count.sh" if self.name == "renamed_cwd" else "bash ../count.sh; true"
                return ["bash", "-c", "cd proj && " + run], None, []
            os.makedirs(os.path.join(d, "nodetmp", "job"))
            # The script's last line prints both files' checksums: compared through stdout, since on the
            # other host they live in that host's own tmpfs, gone when its restart ends.
            return ["bash", "-c", "cd nodetmp/job && exec bash ../../count.sh"], None, []
        with open(os.path.join(d, "rewrite.py"), "w") as f:
            f.write(REWRITE)
        return ["/usr/bin/python3", "rewrite.py", "400"], None, ["log.txt", "state.bin"]

    def result(self, d):
        """What must equal the reference: stdout (sqlite, rewrite) or the built program's output (make)."""
        if self.name == "make":
            r = run([os.path.join(d, "proj", "prog")])
            if r.returncode != 0:
                fail("%s: the built program exited %d" % (self.name, r.returncode))
            return r.stdout
        return open(os.path.join(d, "stdout")).read()

    def start(self, d, argv, stdin, port=None, ck=None, env=None):
        cmd = argv if port is None else [self.revive, "launch", "--port", str(port), "--ckpt-dir", ck, "--"] + argv
        e = dict(env or self.env)
        e["TMPDIR"] = os.path.join(d, "nodetmp")
        if "REVIVE_LOCAL_DIRS" not in os.environ:  # set (even empty) to see the test fail without it
            e["REVIVE_LOCAL_DIRS"] = os.path.join(d, "nodetmp")
        return subprocess.Popen(cmd, cwd=d, env=e, stdin=open(os.path.join(d, stdin)) if stdin else subprocess.DEVNULL,
                                stdout=open(os.path.join(d, "stdout"), "wb"), stderr=open(os.path.join(d, "stderr"), "wb"))

    def reference(self):
        d = os.path.join(self.work, "ref")
        os.makedirs(d)
        argv, stdin, files = self.prepare(d)
        os.makedirs(os.path.join(d, "nodetmp"), exist_ok=True)
        t0 = time.time()
        p = self.start(d, argv, stdin)
        if p.wait(timeout=300) != 0:
            fail("%s: uninterrupted run exited %d: %s" % (self.name, p.returncode, open(os.path.join(d, "stderr")).read()[-500:]))
        self.ref_secs = time.time() - t0
        self.ref = (self.result(d), {f: digest(os.path.join(d, f)) for f in files})
        return self.ref_secs

    def round(self, k, port, net=None, hosts=None):
        # The checkpoint moment is a fraction of the uninterrupted run's time; when that run was slowed by
        # a load spike, the program may end before it: start the round again aiming earlier (twice at most).
        frac = self.rng.uniform(0.15, 0.6)
        for attempt in range(3):
            d = os.path.join(self.work, "run%d" % k + ("-again%d" % attempt if attempt else ""))
            os.makedirs(d)
            argv, stdin, files = self.prepare(d)
            os.makedirs(os.path.join(d, "nodetmp"), exist_ok=True)
            ck = os.path.join(d, "ck")
            env = self.env if net is None else dict(self.env, REVIVE_COORD_HOST=net + ".1")
            p = self.start(d, argv, stdin, port, ck, env)
            t_ck = frac * self.ref_secs
            time.sleep(t_ck)
            if p.poll() is None:
                break
            print("%s round %d: ended before the checkpoint at %.1fs; again, earlier" % (self.name, k, t_ck))
            frac /= 3
        else:
            fail("%s round %d: ended before the checkpoint three times (last at %.1fs)" % (self.name, k, t_ck))
        if self.name == "make":
            # Aim at a moment when gcc has temporaries in the node-local directory (they exist for most of
            # a compilation): those are what another host would lack.
            tmp = os.path.join(d, "nodetmp")
            for _ in range(300):
                if os.listdir(tmp):
                    break
                time.sleep(0.01)
        # Bounded below ctest's limit (120 s for the short renamed cases), so that a hang reports what hung.
        limit = min(90, max(30, 10 * self.ref_secs))
        try:
            r = run([self.revive, "checkpoint", "--port", str(port), "--ckpt-dir", ck], env=env, timeout=limit)
        except subprocess.TimeoutExpired:
            st = run([self.revive, "status", "--port", str(port), "--ckpt-dir", ck], env=env, timeout=30)
            log = open(os.path.join(ck, "coordinator.log")).read() if os.path.exists(os.path.join(ck, "coordinator.log")) else ""
            fail("%s round %d: checkpoint at %.2fs did not answer in %ds\nstatus: %s\ncoordinator log: %s\n%s"
                 % (self.name, k, t_ck, limit, st.stdout + st.stderr, log[-3000:], proc_states(d)))
        if r.returncode != 0:
            fail("%s round %d: checkpoint at %.2fs: %s" % (self.name, k, t_ck, r.stderr.strip()))
        # Let the program change its files after the checkpoint, then kill everything at once.
        time.sleep(self.rng.uniform(0.1, 0.35) * self.ref_secs)
        kill_all(p, port)
        other = hosts is not None and k == self.a.rounds - 1
        if self.name == "make" or other:
            shutil.rmtree(os.path.join(d, "nodetmp"))  # another host's node-local directory: empty
            os.makedirs(os.path.join(d, "nodetmp"))
        restart = [self.revive, "restart", "--port", str(port), ck]
        if other:
            # Host 2 with its own node-local directory: a private mount namespace with a fresh tmpfs on it.
            tmpl = ("ip netns exec {host} unshare -m --propagation private sh -c "
                    "'mount -t tmpfs tmpfs %s && exec \"$0\" \"$@\"' {cmd}" % os.path.join(d, "nodetmp"))
            restart = [self.revive, "restart", "--port", str(port), "--hosts", hosts[1], "--launcher", tmpl, ck]
        limit = min(240, max(40, 10 * self.ref_secs))
        rerr = os.path.join(d, "restart.stderr")
        with open(os.path.join(d, "stdout"), "ab") as out, open(rerr, "w") as err:
            rp = subprocess.Popen(restart, cwd=d, env=env, stdout=out, stderr=err)
            try:
                rc = rp.wait(timeout=limit)
            except subprocess.TimeoutExpired:
                states = proc_states(d)
                st = run([self.revive, "status", "--port", str(port), "--ckpt-dir", ck], env=env, timeout=30)
                rp.kill()
                kill_all(rp, port)
                fail("%s round %d (checkpoint at %.2fs): restart not done after %ds\nrestart's stderr: %s\n"
                     "program's stderr: %s\nstatus: %s\n%s"
                     % (self.name, k, t_ck, limit, open(rerr).read()[-3000:], open(os.path.join(d, "stderr")).read()[-1500:],
                        st.stdout + st.stderr, states))
        if rc != 0:
            fail("%s round %d (checkpoint at %.2fs): restart exited %d: %s\nprogram's stderr: %s"
                 % (self.name, k, t_ck, rc, open(rerr).read()[-1500:], open(os.path.join(d, "stderr")).read()[-1500:]))
        got = (self.result(d), {f: digest(os.path.join(d, f)) for f in files})
        if got != self.ref:
            fail("%s round %d (checkpoint at %.2fs): result differs from the uninterrupted run:\n%r\nvs\n%r"
                 % (self.name, k, t_ck, str(got)[:600], str(self.ref)[:600]))
        aside = os.path.join(d, "proj", ".revive-displaced")
        moved = len(os.listdir(aside)) if os.path.isdir(aside) else 0
        print("%s round %d: checkpoint at %.2fs, restart on %s ok (%d files created after the checkpoint moved "
              "aside), result identical" % (self.name, k, t_ck, hosts[1] if other else "this host", moved), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--revive", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--netns", help="scripts/netns.sh: the last round restarts on another host")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("case", choices=["sqlite", "make", "rewrite", "localdir", "renamed", "renamed_dir", "renamed_open",
                                    "renamed_cwd", "renamed_child"])
    a = ap.parse_args()
    for tool in ("sqlite3", "make", "gcc"):
        if shutil.which(tool) is None:
            fail("%s is not installed (scripts/deps.sh installs it)" % tool)
    if a.netns:
        chk = run(["bash", a.netns, "check"])
        if chk.returncode == 0:
            with_namespaces(a, "rvf", "10.81", 2,
                            lambda rng, seed, prefix, net: body(a, rng, seed, net, [prefix + "1", prefix + "2"]))
            return
        print("no network namespaces here (%s): every round restarts on this host" % chk.stdout.strip(), flush=True)
    seed = a.seed if a.seed is not None else random.randrange(1 << 30)
    body(a, random.Random(seed), seed, None, None)


def body(a, rng, seed, net, hosts):
    c = Case(a, a.case, rng, hosts)
    secs = c.reference()
    port = free_port(rng, net + ".1" if net else "127.0.0.1")
    print("seed %d, uninterrupted run %.1fs" % (seed, secs), flush=True)
    for k in range(a.rounds):
        c.round(k, port, net, hosts)
    print("files %s: %d rounds passed" % (a.case, a.rounds))


if __name__ == "__main__":
    main()
