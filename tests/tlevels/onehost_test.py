#!/usr/bin/env python3
"""Node-local storage for a computation on one host (plain `revive launch`, no --hosts; docs/storage-levels.md,
"Transparent images"): REVIVE_LEVELS=L1,L4@2 keeps each generation in <local>/<host>/<job>/ckpt-G/, the root
coordinator checksums the images and copies every 2nd generation to the checkpoint directory in the
background; old generations are pruned per level. Then the computation is SIGKILLed and restarted: generation 3
exists only on L1, so its outputs prove the node-local images were used; they are compared byte for byte with
an uninterrupted run. A policy with L2 or L3 is refused at launch, naming it, before anything starts.
With --fork the same with `revive launch --fork`: the images come after the program resumed and are
checksummed then; the manifest, the L4 copy and the pruning follow them."""
import argparse, json, os, random, shutil, signal, subprocess, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "hosts"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *
from tlv import check_like_reference, run_reference

N = 2

def main():
    ap = argparse.ArgumentParser()
    for o in ("--revive", "--inject", "--restart", "--worker", "--workdir"):
        ap.add_argument(o, required=True)
    ap.add_argument("--seed", type=int)
    ap.add_argument("--fork", action="store_true", help="checkpoints written by forked children (revive launch --fork)")
    a = ap.parse_args()
    seed = a.seed if a.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    print("seed %d" % seed, flush=True)
    port = free_port(rng)
    shutil.rmtree(a.workdir, ignore_errors=True)
    ck, ref, rund = (os.path.join(a.workdir, d) for d in ("ck", "ref", "run"))
    # The node-local root inside a directory the files plugin walks (REVIVE_LOCAL_DIRS, as /dev/shm is by
    # default): the images kept there must not be saved into the next image as files of the computation.
    shm = "/dev/shm/revive-onehost-test-%d" % os.getpid()
    shutil.rmtree(shm, ignore_errors=True)
    local = os.path.join(shm, "levels")
    for d in (ref, rund):
        os.makedirs(d)
    revive = os.path.abspath(a.revive)
    env = clean_env(dict(REVIVE_INJECT_LIB=os.path.abspath(a.inject), REVIVE_RESTART_BIN=os.path.abspath(a.restart),
                         REVIVE_LOG="0", REVIVE_LOCAL_PATH=local, REVIVE_LOCAL_DIRS=shm))
    base = [revive, "launch", "--port", str(port), "--ckpt-dir", ck]

    for bad in ("L1+L2", "L1,L3@2"):  # refused before anything starts, naming the policy and the reason
        r = run(base + ["--levels", bad, "--", "/bin/true"], env=env, timeout=30)
        if r.returncode != 2 or "REVIVE_LEVELS=" + bad not in r.stderr or "need other hosts" not in r.stderr \
                or status(revive, port, ck, env).returncode == 0:
            fail("launch --levels %s on one host: rc %d %r, want 2 naming the policy and no coordinator" %
                 (bad, r.returncode, r.stderr))

    script = 'exec "$0" $((260 + 13 * REVIVE_LAUNCH_INDEX)) 2 > out-$REVIVE_LAUNCH_INDEX'
    ref_rc = run_reference(a.worker, ref, script, N)
    lerr = open(os.path.join(a.workdir, "launch-stderr"), "wb")
    lp = subprocess.Popen(base + (["--fork"] if a.fork else []) + ["--levels", "L1,L4@2", "-n", str(N), "--", "bash", "-c", script,
                                  os.path.abspath(a.worker)], cwd=rund, stdout=lerr, stderr=lerr,
                          stdin=subprocess.DEVNULL, env=env)
    wait_procs(revive, port, ck, env, N, procs=[lp])
    for g in range(1, 4):
        time.sleep(rng.uniform(0.05, 0.2))
        m, secs = checkpoint(revive, port, ck, env, g, N)
        print("generation %d in %.3f s" % (g, secs), flush=True)
    st = m.get("storage") or {}
    if st.get("levels") != "L1":
        fail("generation 3's MANIFEST.json records storage %r, want levels L1" % st)
    hosts = {q["host"] for q in m["processes"]}
    if len(hosts) != 1:
        fail("one host expected, the manifest names %s" % sorted(hosts))
    hostjob = os.path.join(local, hosts.pop(), st.get("job", "?"))
    for q in m["processes"]:
        own = os.path.join(hostjob, "ckpt-3", q["image"])
        if not q.get("local") or len(q.get("xxh3", "")) != 16 or not os.path.isfile(own):
            fail("manifest entry %s: want a node-local image %s with its checksum" % (q, own))
        if os.path.exists(os.path.join(ck, "ckpt-3", q["image"])):
            fail("generation 3's image %s is in the checkpoint directory (L4 is every 2nd generation)" % q["image"])
    r = run([revive, "inspect", os.path.join(hostjob, "ckpt-3", m["processes"][0]["image"])], env=env, timeout=60)
    saved = [l for l in r.stdout.splitlines() if " bytes " in l and local in l]  # file lines, not the image's own
    if r.returncode != 0 or saved or "files" not in r.stdout:
        fail("generation 3's image holds files of the node-local root %s (rc %d):\n%s%s" % (local, r.returncode,
                                                                                           r.stdout[-3000:], r.stderr))
    # Generation 2 reaches L4 in the background; then each level keeps its 2 newest complete generations:
    # L1 2 and 3; the checkpoint directory 2 (images) and 3 (manifest); generation 1 is gone everywhere.
    deadline = time.time() + 20
    while True:
        dirs = sorted(d for d in os.listdir(ck) if d.startswith("ckpt-"))
        l4 = [f for f in os.listdir(os.path.join(ck, "ckpt-2")) if f.endswith(".rimg")] if "ckpt-2" in dirs else []
        got = (dirs, len(l4), sorted(os.listdir(hostjob)))
        want = (["ckpt-2", "ckpt-3"], N, ["ckpt-2", "ckpt-3"])
        if got == want:
            break
        if time.time() > deadline:
            fail("checkpoint directory generations, L4 images of generation 2, node-local generations: %s, want %s" %
                 (got, want))
        time.sleep(0.05)
    if lp.poll() is not None:
        fail("the computation ended before it was killed; give the worker more rounds")
    index = {q["upid"]: int(environ(q["pid"]).get(b"REVIVE_LAUNCH_INDEX", b"-1")) for q in m["processes"]}
    for q in m["processes"]:
        os.kill(q["pid"], signal.SIGKILL)
    lp.wait(timeout=60)
    if not coordinator_gone(revive, port, ck, env):
        fail("coordinator did not exit after its processes died")
    rerr = os.path.join(a.workdir, "restart-stderr")
    rp = subprocess.run([revive, "restart", "--port", str(port), ck], cwd=rund, stdout=subprocess.DEVNULL,
                        stderr=open(rerr, "wb"), stdin=subprocess.DEVNULL, env=env, timeout=120)
    sys.stdout.write(open(rerr).read())
    check_like_reference(revive, port, ck, env, m, index, ref_rc, rp.returncode, ref, rund, N)
    shutil.rmtree(a.workdir, ignore_errors=True)
    shutil.rmtree(shm, ignore_errors=True)
    print("OK: one host%s, L1 + L4 in the background, pruned per level, restarted from L1, outputs identical" %
          (" (--fork)" if a.fork else ""), flush=True)

if __name__ == "__main__":
    main()
