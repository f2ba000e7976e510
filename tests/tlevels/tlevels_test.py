#!/usr/bin/env python3
"""Multi-level storage of transparent images of a `--hosts` computation (docs/storage-levels.md,
"Transparent images"): `revive launch --hosts h1,h2,h3 -n 3 --launcher netns` with REVIVE_LEVELS, each host
a network namespace whose node-local storage is <work>/local/<host>/. Checkpointed, SIGKILLed, some hosts'
local storage wiped or damaged, restarted with `revive restart --hosts`; every output is compared byte for
byte with an uninterrupted run and the exit status with its. Cases:
  partner   L1+L2: host 2 wiped; its image comes from its partner over a socket (stderr names it).
  corrupt   L1+L2: host 2 wiped and its partner copy of generation 2 damaged: detected, named, not used;
            generation 1 restores from its partner copy.
  fallback  L1+L2,L4@2: generations 1-3; two hosts wiped (a host and its partner): generation 3 cannot be
            restored (the message names the image and what is missing); generation 2 from L4 and L1."""
import json, os, shutil, signal, subprocess, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "hosts"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *
from tlv import N, Setup


def main():
    ap = hosts_parser()
    ap.add_argument("--worker", required=True)
    ap.add_argument("--case", required=True, choices=["partner", "corrupt", "fallback"])
    a = ap.parse_args()
    with_namespaces(a, "rvt", "10.85", N, lambda rng, seed, prefix, net: test(a, rng, seed, prefix, net))

def job_dir(local, host):
    d = os.path.join(local, host)
    subs = os.listdir(d) if os.path.isdir(d) else []
    if len(subs) != 1:
        fail("%s: want one job directory, found %s" % (d, subs))
    return os.path.join(d, subs[0])

def test(a, rng, seed, prefix, net):
    print("seed %d" % seed, flush=True)
    levels = {"partner": "L1+L2", "corrupt": "L1+L2", "fallback": "L1+L2,L4@2"}[a.case]
    t = Setup(a, rng, prefix, net, levels, "case " + a.case)
    hosts, port, ck, ref, rund, local, revive, env = t.hosts, t.port, t.ck, t.ref, t.rund, t.local, t.revive, t.env
    script = 'exec "$0" $((260 + 13 * REVIVE_LAUNCH_INDEX)) 2 > out-$REVIVE_LAUNCH_INDEX'
    ref_rc = [subprocess.run(["bash", "-c", script, os.path.abspath(a.worker)], cwd=ref, timeout=120,
                             env=dict(os.environ, REVIVE_LAUNCH_INDEX=str(i))).returncode for i in range(N)]

    cmd = [revive, "launch"] + t.placement + ["--ckpt-dir", ck, "-n", str(N), "--", "bash", "-c", script,
                                              os.path.abspath(a.worker)]
    lerr = open(os.path.join(a.workdir, "launch-stderr"), "wb")
    lp = subprocess.Popen(cmd, cwd=rund, stdout=lerr, stderr=lerr, stdin=subprocess.DEVNULL, env=env)
    wait_procs(revive, port, ck, env, N, procs=[lp])
    gens = 3 if a.case == "fallback" else 2
    for g in range(1, gens + 1):
        time.sleep(rng.uniform(0.1, 0.4))
        m, secs = checkpoint(revive, port, ck, env, g, N)
        print("generation %d in %.3f s" % (g, secs), flush=True)
    index = {q["upid"]: int(environ(q["pid"]).get(b"REVIVE_LAUNCH_INDEX", b"-1")) for q in m["processes"]}
    st = m.get("storage")
    if not st or st.get("levels") != "L1+L2":
        fail("MANIFEST.json of generation %d records storage %r, want levels L1+L2" % (gens, st))
    for q in m["processes"]:  # every image on its host, its copy on its partner, none in the checkpoint dir
        if not q.get("local") or q.get("l2") in ("", q["host"]) or len(q.get("xxh3", "")) != 16:
            fail("manifest entry %s: want a local image with a partner on another host and a checksum" % q)
        own = os.path.join(job_dir(local, q["host"]), "ckpt-%d" % gens, q["image"])
        copy = os.path.join(job_dir(local, q["l2"]), "ckpt-%d" % gens, "partner-" + q["host"], q["image"])
        for f in (own, copy):
            if not os.path.isfile(f):
                fail("%s is missing" % f)
        if open(own, "rb").read() != open(copy, "rb").read():
            fail("the partner copy %s differs from %s" % (copy, own))
        if os.path.exists(os.path.join(ck, "ckpt-%d" % gens, q["image"])):
            fail("generation %d's image %s is in the checkpoint directory (L4 not asked for)" % (gens, q["image"]))
    if a.case == "fallback":  # generation 2 also goes to L4, copied by the hosts in the background
        deadline = time.time() + 20
        while len([f for f in os.listdir(os.path.join(ck, "ckpt-2")) if f.endswith(".rimg")]) < N:
            if time.time() > deadline:
                fail("generation 2's images did not reach the checkpoint directory (L4)")
            time.sleep(0.05)
    for q in m["processes"]:
        if lp.poll() is not None:
            fail("the computation ended before it was killed; give the worker more rounds")
    for q in m["processes"]:
        os.kill(q["pid"], signal.SIGKILL)
    lp.wait(timeout=60)
    if not coordinator_gone(revive, port, ck, env):
        fail("coordinator did not exit after its processes died")
    # Older generations are pruned per host once two newer ones are complete there.
    if a.case == "fallback" and os.path.exists(os.path.join(job_dir(local, hosts[0]), "ckpt-1")):
        fail("host %s still keeps generation 1 after generations 2 and 3 completed" % hosts[0])

    by_host = {q["host"]: q for q in m["processes"]}
    victim = by_host[hosts[1]]
    expect = []
    if a.case == "partner":
        shutil.rmtree(os.path.join(local, hosts[1]))
        expect = ["image of process %d (upid %d, host %s): L1 copy missing, using partner copy from %s" %
                  (victim["pid"], victim["upid"], hosts[1], victim["l2"])]
    elif a.case == "corrupt":
        shutil.rmtree(os.path.join(local, hosts[1]))
        copy = os.path.join(job_dir(local, victim["l2"]), "ckpt-2", "partner-" + hosts[1], victim["image"])
        with open(copy, "r+b") as f:
            f.seek(os.path.getsize(copy) // 2)
            b = f.read(1)
            f.seek(-1, 1)
            f.write(bytes([b[0] ^ 0x40]))
        expect = ["partner copy on %s damaged (checksum mismatch), not used" % victim["l2"],
                  "generation 2 cannot be restored from any level",
                  "restarting from generation 1 (newest complete: 2)",
                  "L1 copy missing, using partner copy from %s" % victim["l2"]]
    else:
        lost = hosts[0]
        partner = by_host[lost]["l2"]
        for h in (lost, partner):
            shutil.rmtree(os.path.join(local, h))
        q = by_host[lost]
        expect = ["generation 3 cannot be restored from any level; image of process %d (upid %d, host %s): L1 copy "
                  "missing, partner copy on %s missing, not in the checkpoint directory (L4)" % (q["pid"], q["upid"], lost, partner),
                  "restarting from generation 2 (newest complete: 3)",
                  "using the checkpoint directory (L4)"]
    rcmd = [revive, "restart"] + t.placement + [ck]
    rerr = os.path.join(a.workdir, "restart-stderr")
    t0 = time.time()
    rp = subprocess.run(rcmd, cwd=rund, stdout=subprocess.DEVNULL, stderr=open(rerr, "wb"), stdin=subprocess.DEVNULL,
                        env=env, timeout=120)
    err = open(rerr).read()
    sys.stdout.write(err)
    for e in expect:
        if e not in err:
            fail("restart stderr does not say %r" % e)
    first = next((ref_rc[index[q["upid"]]] for q in m["processes"] if ref_rc[index[q["upid"]]] != 0), 0)
    if rp.returncode != first:
        fail("revive restart exited %d, want %d" % (rp.returncode, first))
    for i in range(N):
        if open(os.path.join(ref, "out-%d" % i), "rb").read() != open(os.path.join(rund, "out-%d" % i), "rb").read():
            fail("copy %d: output differs from the uninterrupted run" % i)
    if not coordinator_gone(revive, port, ck, env):
        fail("restart's coordinator did not exit")
    shutil.rmtree(a.workdir, ignore_errors=True)
    print("OK: case %s, restarted in %.2f s, outputs identical, exit %d" % (a.case, time.time() - t0, rp.returncode),
          flush=True)

if __name__ == "__main__":
    main()
