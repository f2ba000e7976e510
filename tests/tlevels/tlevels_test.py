#!/usr/bin/env python3
"""Multi-level storage of transparent images of a `--hosts` computation (docs/storage-levels.md,
"Transparent images"): `revive launch --hosts h1,h2,h3 -n 3 --launcher netns` with REVIVE_LEVELS, each host
a network namespace whose node-local storage is <work>/local/<host>/. Checkpointed, SIGKILLed, some hosts'
local storage wiped or damaged, restarted with `revive restart --hosts`; every output is compared byte for
byte with an uninterrupted run and the exit status with its. Cases:
  partner   L1+L2: host 2 wiped; its image comes from its partner over a socket (stderr names it). Before,
            `revive verify` seeing only host 1's storage says the others' pieces are not checked (exit 3).
  corrupt   L1+L2: host 2 wiped and its partner copy of generation 2 damaged: detected, named, not used;
            generation 1 restores from its partner copy.
  fallback  L1+L2,L4@2: generations 1-3; two hosts wiped (a host and its partner): generation 3 cannot be
            restored (the message names the image and what is missing); generation 2 from L4 and L1.
  prune     L1+L2,L4@2 with REVIVE_KEEP=3, generations 1-9: each level keeps its 3 newest complete
            generations (hosts: 7-9; checkpoint directory: L4 copies of 4, 6, 8; manifests of 4 and 6-9, the
            rest removed); then every host wiped: generation 9 cannot be restored, 8 comes from L4.
  both      L1+L2+L3 (a partner copy and XOR parity in one generation): host 2 wiped; its image comes from
            its partner copy.
  both_parity  L1+L2+L3: host 2 wiped and its partner copy of generation 2 damaged: named, not used; the
            image is rebuilt from the group's parity (generation 2 still restores).
  fork      L1+L2 with `revive launch --fork` (the images become durable after the program resumed; the
            partner exchange happens in phase durable, before the manifest): host 2 wiped; its image comes
            from its partner.
  fork_xor  L1+L3 (XOR) with --fork: host 2 wiped; its image is rebuilt from the group's parity.
  fork_prune  prune with --fork: the L4 copies and the pruning start once the root says a forked
            generation's manifest is written; each level keeps the same as without --fork.
  again     L1+L2: host 2 wiped, restarted (its image from its partner; the partner copy host 2 kept for
            another host is written again), everything killed before any new checkpoint, then that other
            host wiped too: the second restart still comes back from generation 2 (its image from the copy
            written again).
  again_xor L1+L3 (XOR): the same with host 2 rebuilt from parity (its parity written again), then host 3
            wiped: rebuilt from host 1's parity and host 2's new one.
  again_both  L1+L2+L3: host 2 wiped, its image from its partner copy and its parity encoded again from
            the group's images; killed; then host 2's partner wiped and that host's own partner copy
            damaged: rebuilt from the group's parity, host 2's new one included.
  (xor, xor_parity, xor_two, rs_two, here: see the CMakeLists.)"""
import json, os, shutil, signal, subprocess, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "hosts"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *
from tlv import N, Setup, check_like_reference, run_reference


def main():
    ap = hosts_parser()
    ap.add_argument("--worker", required=True)
    ap.add_argument("--case", required=True, choices=["partner", "corrupt", "fallback", "prune", "both", "both_parity", "xor", "xor_parity", "xor_two", "rs_two", "here",
                                                "fork", "fork_xor", "again", "again_xor",
                                                "again_both", "fork_prune", "migrate", "migrate_xor"])
    a = ap.parse_args()
    # migrate: one more network namespace, a spare host the computation did not run on
    with_namespaces(a, "rvt", "10.85", N + a.case.startswith("migrate"), lambda rng, seed, prefix, net: test(a, rng, seed, prefix, net))

def job_dir(local, host):
    d = os.path.join(local, host)
    subs = os.listdir(d) if os.path.isdir(d) else []
    if len(subs) != 1:
        fail("%s: want one job directory, found %s" % (d, subs))
    return os.path.join(d, subs[0])

def damage(path):
    """Flips one bit in the middle of a file (bit rot): its size stays, its checksum does not."""
    data = bytearray(open(path, "rb").read())
    data[len(data) // 2] ^= 0x40
    open(path, "r+b").write(bytes(data))

def check_pruned(ck, local, hosts, job_dir):
    """REVIVE_KEEP=3, L1+L2,L4@2, generations 1-9 (L4: 2 4 6 8): each level keeps its 3 newest complete
    generations. The hosts' last pruning runs in the background after the L4 copy: waited for."""
    want_dirs, want_l4 = [4, 6, 7, 8, 9], [4, 6, 8]
    deadline = time.time() + 20
    while True:
        dirs = sorted(int(d[5:]) for d in os.listdir(ck) if d.startswith("ckpt-"))
        l4 = [g for g in dirs if len([f for f in os.listdir(os.path.join(ck, "ckpt-%d" % g)) if f.endswith(".rimg")]) == N]
        partial = [g for g in dirs if g not in l4 and [f for f in os.listdir(os.path.join(ck, "ckpt-%d" % g)) if f.endswith(".rimg")]]
        manifests = [g for g in dirs if os.path.isfile(os.path.join(ck, "ckpt-%d" % g, "MANIFEST.json"))]
        on_hosts = {h: sorted(os.listdir(job_dir(local, h))) for h in hosts}
        got = (dirs, l4, partial, manifests, on_hosts)
        want = (want_dirs, want_l4, [], want_dirs, {h: ["ckpt-7", "ckpt-8", "ckpt-9"] for h in hosts})
        if got == want:
            return
        if time.time() > deadline:
            fail("after generations 1-9 with REVIVE_KEEP=3: checkpoint directory generations %s, complete L4 copies in %s, "
                 "partial ones in %s, manifests in %s, hosts keep %s; want %s" % (got + (want,)))
        time.sleep(0.1)

def check_unseen(revive, ck, local, hosts, env, gens, workdir):
    """revive verify where only this machine's own host's storage is visible (REVIVE_HOST_ID=hosts[0], a
    local root holding only its directory): the other hosts' pieces are "not checked", named per host, never
    "missing"; the exit status (3) says the newest generation cannot be checked from here."""
    view = os.path.join(workdir, "view")
    os.makedirs(view)
    os.symlink(os.path.join(local, hosts[0]), os.path.join(view, hosts[0]))
    r = run([revive, "verify", ck, "--local", view], env=dict(env, REVIVE_HOST_ID=hosts[0]), timeout=60)
    row = next((l.split() for l in r.stdout.splitlines() if l.split()[:1] == [str(gens)]), [])
    said = ["L1 not checked: host(s) %s, %s: their node-local storage (%s/<host>) is not visible" % (hosts[1], hosts[2], view),
            "L2 not checked: host(s) "]
    if r.returncode != 3 or row[3:5] != ["unchecked", "unchecked"] or "missing or damaged" in r.stdout \
            or [x for x in said if x not in r.stdout] or "cannot be checked from here" not in r.stderr:
        fail("revive verify with only %s's storage visible: rc %d (want 3), generation %d row %s (want L1 and L2 "
             "unchecked, nothing missing):\n%s%s" % (hosts[0], r.returncode, gens, row, r.stdout, r.stderr))
    # The same view, asking the hosts (each one's `revive tlevels-scan` through the launcher): all complete.
    r = run(asking_hosts([revive, "verify", ck, "--local", view], hosts), env=dict(env, REVIVE_HOST_ID=hosts[0]),
            timeout=60)
    row = next((l.split() for l in r.stdout.splitlines() if l.split()[:1] == [str(gens)]), [])
    if r.returncode != 0 or row[3:5] != ["complete", "complete"] or "not checked" in r.stdout:
        fail("revive verify --hosts with only %s's storage visible here: rc %d (want 0), generation %d row %s (want "
             "L1 and L2 complete, as the hosts see them):\n%s%s" % (hosts[0], r.returncode, gens, row, r.stdout, r.stderr))

def asking_hosts(cmd, hosts):
    return cmd + ["--hosts", ",".join(hosts), "--launcher", "netns"]

def lose_again(a, t, m, victim, by_host, l2, xor, rcmd, rerr, expect, who, rebuilt):
    """The restart after the first host (victim's) was wiped, killed once its processes are back and before
    any new checkpoint; then a second host wiped: the one whose partner copy the victim kept (L2), or
    another member of the group (XOR), or (both) the victim's partner, whose own partner copy is damaged
    too. Returns what the second restart must say."""
    from crash_test import kill_all
    hosts, local = t.hosts, t.local
    rp = subprocess.Popen(rcmd, cwd=t.rund, stdout=subprocess.DEVNULL, stderr=open(rerr, "wb"),
                          stdin=subprocess.DEVNULL, env=t.env)
    wait_procs(t.revive, t.port, t.ck, t.env, N, procs=[rp])
    kill_all(t.ck)
    rp.wait(timeout=60)
    if not coordinator_gone(t.revive, t.port, t.ck, t.env):
        fail("the first restart's coordinator did not exit after its processes died")
    err = open(rerr).read()
    sys.stdout.write(err)
    owner = next(q for q in m["processes"] if q.get("l2") == victim["host"]) if l2 else None
    second = by_host[victim["l2"]] if l2 and xor else owner if l2 else by_host[hosts[2]]
    if l2:
        expect = expect + ["the partner copies of host %s's images (generation 2) on host %s written again" %
                           (owner["host"], victim["host"])]
    if l2 and xor:
        expect = expect + ["the parity of host %s (generation 2) written again" % victim["host"],
                           "revive tlevels-encode: parity of host %s encoded again from its group's streamed blocks"
                           % victim["host"]]
    for e in expect:
        if e not in err:
            fail("first restart's stderr does not say %r" % e)
    if not l2 and not os.path.isfile(os.path.join(job_dir(local, victim["host"]), "ckpt-2", "parity")):
        fail("host %s's parity of generation 2 was not written again after its rebuild" % victim["host"])
    shutil.rmtree(os.path.join(local, second["host"]))
    if l2 and xor:
        damage(os.path.join(job_dir(local, second["l2"]), "ckpt-2", "partner-%s" % second["host"], second["image"]))
        return [who(second, "partner copy on %s damaged (checksum mismatch), not used, rebuilt from its group's "
                            "parity (hosts %s)" % (second["l2"], second["l3"]))]
    if l2:
        return [who(second, "using partner copy from " + victim["host"])]
    return [rebuilt(second)]

def test(a, rng, seed, prefix, net):
    print("seed %d" % seed, flush=True)
    levels = {"partner": "L1+L2", "migrate": "L1+L2", "migrate_xor": "L1+L3", "corrupt": "L1+L2", "fallback": "L1+L2,L4@2", "prune": "L1+L2,L4@2", "xor": "L1+L3",
              "here": "L1+L2", "both": "L1+L2+L3", "both_parity": "L1+L2+L3",
              "xor_parity": "L1+L3", "xor_two": "L1+L3,L4", "rs_two": "L1+L3", "fork": "L1+L2", "fork_xor": "L1+L3",
              "again": "L1+L2", "again_xor": "L1+L3", "again_both": "L1+L2+L3", "fork_prune": "L1+L2,L4@2"}[a.case]
    prune = a.case in ("prune", "fork_prune")
    xor, l2 = "L3" in levels, "L2" in levels
    parity = 2 if a.case == "rs_two" else 1
    extra = {"REVIVE_KEEP": "3"} if prune else {}
    if a.case.startswith("again"):  # every process of the computation carries it: crash_test.kill_all finds them
        extra["REVIVE_CKPT_DIR"] = os.path.join(a.workdir, "ck")
    t = Setup(a, rng, prefix, net, levels, "case " + a.case, REVIVE_GROUP_SIZE="3", REVIVE_PARITY=str(parity), **extra)
    hosts, port, ck, ref, rund, local, revive, env = t.hosts, t.port, t.ck, t.ref, t.rund, t.local, t.revive, t.env
    rounds = 600 if prune else 260  # prune: nine checkpoints before the kill
    script = 'exec "$0" $((%d + 13 * REVIVE_LAUNCH_INDEX)) 2 > out-$REVIVE_LAUNCH_INDEX' % rounds
    ref_rc = run_reference(a.worker, ref, script, N)

    opts = ["--fork"] if a.case.startswith("fork") else []
    if a.case == "xor":  # the policy from --levels instead of the environment; bad ones refused first
        env.pop("REVIVE_LEVELS")
        opts = ["--levels", levels]
        for bad, why in (("L1+L5", "'L5' is not a level"), ("L1+L2@2", "no rule applies to every version")):
            r = run([revive, "launch", "--levels", bad] + t.placement + ["--ckpt-dir", ck, "--", "/bin/true"],
                    env=env, timeout=30)
            if r.returncode != 2 or why not in r.stderr or status(revive, port, ck, env).returncode == 0:
                fail("launch --levels %s: rc %d %r, want 2 naming %r and no coordinator" % (bad, r.returncode, r.stderr, why))
    cmd = [revive, "launch"] + opts + t.placement + ["--ckpt-dir", ck, "-n", str(N), "--", "bash", "-c", script,
                                                     os.path.abspath(a.worker)]
    lerr = open(os.path.join(a.workdir, "launch-stderr"), "wb")
    lp = subprocess.Popen(cmd, cwd=rund, stdout=lerr, stderr=lerr, stdin=subprocess.DEVNULL, env=env)
    wait_procs(revive, port, ck, env, N, procs=[lp])
    gens = 9 if prune else {"fallback": 3}.get(a.case, 2)
    for g in range(1, gens + 1):
        time.sleep(rng.uniform(0.02, 0.1) if prune else rng.uniform(0.1, 0.4))
        m, secs = checkpoint(revive, port, ck, env, g, N)
        print("generation %d in %.3f s" % (g, secs), flush=True)
    index = {q["upid"]: int(environ(q["pid"]).get(b"REVIVE_LAUNCH_INDEX", b"-1")) for q in m["processes"]}
    st = m.get("storage")
    want = levels.split(",")[0] + ("+L4" if a.case == "xor_two" else "")  # the newest generation's
    if not st or st.get("levels") != want:
        fail("MANIFEST.json of generation %d records storage %r, want levels %s" % (gens, st, want))
    for q in m["processes"]:  # every image on its host, its copy or parity on the others, none in the ckpt dir
        if not q.get("local") or len(q.get("xxh3", "")) != 16:
            fail("manifest entry %s: want a local image and a checksum" % q)
        gdir = os.path.join(job_dir(local, q["host"]), "ckpt-%d" % gens)
        own = os.path.join(gdir, q["image"])
        if not os.path.isfile(own):
            fail("%s is missing" % own)
        if xor:
            if sorted(q.get("l3", "").split(",")) != sorted(hosts) or st.get("parity") != parity:
                fail("manifest entry %s, storage %s: want a group of all three hosts, parity %d" % (q, st, parity))
            for f in ("parity", "parity.meta"):
                if not os.path.isfile(os.path.join(gdir, f)):
                    fail("%s/%s is missing" % (gdir, f))
            if [d for d in os.listdir(gdir) if d.startswith(".l3") or (d.startswith("partner-") and not l2)]:
                fail("%s keeps other hosts' images: %s" % (gdir, os.listdir(gdir)))
        if l2:
            if q.get("l2") in ("", q["host"]):
                fail("manifest entry %s: want a partner on another host" % q)
            copy = os.path.join(job_dir(local, q["l2"]), "ckpt-%d" % gens, "partner-" + q["host"], q["image"])
            if not os.path.isfile(copy) or open(own, "rb").read() != open(copy, "rb").read():
                fail("the partner copy %s is missing or differs from %s" % (copy, own))
        if os.path.exists(os.path.join(ck, "ckpt-%d" % gens, q["image"])) and "L4" not in levels:
            fail("generation %d's image %s is in the checkpoint directory (L4 not asked for)" % (gens, q["image"]))
    # revive ls: the newest generation complete at L1 and at its redundancy level (this machine sees every
    # host's directory, like the library's tools).
    r = run([revive, "ls", ck], env=env, timeout=60)
    row = next((l.split() for l in r.stdout.splitlines() if l.split()[:1] == [str(gens)]), [])
    cols = [3] + ([4] if l2 else []) + ([5] if xor else [])
    if r.returncode != 0 or [row[c] if c < len(row) else "" for c in cols] != ["complete"] * len(cols):
        fail("revive ls %s: rc %d, generation %d row %s, want %s complete:\n%s%s" %
             (ck, r.returncode, gens, row, want, r.stdout, r.stderr))
    if "L4" in levels:  # copied by the hosts in the background
        l4 = gens - gens % 2 if "L4@2" in levels else gens
        deadline = time.time() + 20
        while len([f for f in os.listdir(os.path.join(ck, "ckpt-%d" % l4)) if f.endswith(".rimg")]) < N:
            if time.time() > deadline:
                fail("generation %d's images did not reach the checkpoint directory (L4)" % l4)
            time.sleep(0.05)
    if prune:
        check_pruned(ck, local, hosts, job_dir)
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

    if a.case == "partner":
        check_unseen(revive, ck, local, hosts, env, gens, a.workdir)
    by_host = {q["host"]: q for q in m["processes"]}
    victim = by_host[hosts[1]]
    def who(q, how):
        return "image of process %d (upid %d, host %s): L1 copy missing, %s" % (q["pid"], q["upid"], q["host"], how)
    older = ["generation 2 cannot be restored from any level", "restarting from generation 1 (newest complete: 2)"]
    rebuilt = lambda q: who(q, "rebuilt from its group's parity (hosts %s)" % q["l3"])
    def streamed(exp):  # every rebuild goes through the streamed path (trebuild.h): its rebuilder says so
        return exp + ["revive tlevels-rebuild: host %s rebuilt from " % q["host"] for q in m["processes"]
                      if any(e.startswith(who(q, "")) and "rebuilt from its group's parity" in e for e in exp)]
    # case -> (hosts wiped, file damaged, what stderr must say)
    plan = {
        "partner": ([hosts[1]], None, [who(victim, "using partner copy from " + victim.get("l2", ""))]),
        "corrupt": ([hosts[1]], (victim.get("l2"), "partner-%s/%s" % (hosts[1], victim["image"])),
                    ["partner copy on %s damaged (checksum mismatch), not used" % victim.get("l2")] + older +
                    [who(victim, "using partner copy from %s" % victim.get("l2"))]),
        "xor": ([hosts[1]], None, [rebuilt(victim)]),
        "fork": ([hosts[1]], None, [who(victim, "using partner copy from " + victim.get("l2", ""))]),
        "fork_xor": ([hosts[1]], None, [rebuilt(victim)]),
        "again": ([hosts[1]], None, [who(victim, "using partner copy from " + victim.get("l2", ""))]),
        "again_xor": ([hosts[1]], None, [rebuilt(victim)]),
        "again_both": ([hosts[1]], None, [who(victim, "using partner copy from " + victim.get("l2", ""))]),
        "xor_parity": ([hosts[1]], (hosts[2], "parity"),
                       ["%s: parity damaged (checksum mismatch), not used" % hosts[2]] + older + [rebuilt(victim)]),
        "xor_two": (hosts[:2], None, ["lost 2 members (%s: parity missing, %s: parity missing), parity tolerates 1, "
                                      "using the checkpoint directory (L4)" % (hosts[0], hosts[1])] +
                    ["revive restart: the node-local copies of host %s's images taken from L4 (generation %d) written"
                     % (h, gens) for h in hosts[:2]] +
                    ["revive tlevels-encode: parity of host %s encoded again from its group's streamed blocks" % h
                     for h in hosts[:2]]),
        "rs_two": (hosts[:2], None, [rebuilt(by_host[hosts[0]]), rebuilt(victim)]),
        "here": ([], None, []),
        "both": ([hosts[1]], None, [who(victim, "using partner copy from " + victim.get("l2", ""))]),
        "both_parity": ([hosts[1]], (victim.get("l2"), "partner-%s/%s" % (hosts[1], victim["image"])),
                        [who(victim, "partner copy on %s damaged (checksum mismatch), not used, rebuilt from its "
                                     "group's parity (hosts %s)" % (victim.get("l2"), victim.get("l3")))]),
    }
    spare = prefix + str(N + 1)
    plan["migrate"] = ([hosts[1]], None, ["host %s is not in the host list: its processes restart on %s" % (hosts[1], spare),
                                          who(victim, "using partner copy from " + victim.get("l2", ""))])
    plan["migrate_xor"] = ([hosts[1]], None, ["host %s is not in the host list: its processes restart on %s" % (hosts[1], spare),
                                              rebuilt(victim)])
    plan["prune"] = plan["fork_prune"] = (hosts, None, ["generation 9 cannot be restored from any level",
                                   "restarting from generation 8 (newest complete: 9)", "using the checkpoint directory (L4)"])
    if a.case in plan:
        wiped, damaged, expect = plan[a.case]
        for h in wiped:
            shutil.rmtree(os.path.join(local, h))
        if damaged:
            damage(os.path.join(job_dir(local, damaged[0]), "ckpt-2", damaged[1]))
        expect = streamed(expect)
    else:
        lost = hosts[0]
        partner = by_host[lost]["l2"]
        for h in (lost, partner):
            shutil.rmtree(os.path.join(local, h))
        q = by_host[lost]
        expect = ["generation 3 cannot be restored from any level; image of process %d (upid %d, host %s): L1 copy "
                  "missing, partner copy on %s missing, not in the checkpoint directory (L4)" % (q["pid"], q["upid"], lost, partner),
                  "restarting from generation 2 (newest complete: 3)",
                  "using the checkpoint directory (L4)",
                  # its image back in its L1 directory, so its partner copy is written again from there
                  "the node-local copies of host %s's images taken from L4 (generation 2) written" % lost,
                  "the partner copies of host %s's images (generation 2) on host %s written again" % (lost, partner)]
    # revive verify: the lost L1 copies named; exit 1 only when no level holds an image of the newest generation.
    r = run([revive, "verify", ck], env=env, timeout=60)
    want_rc = 1 if a.case in ("fallback", "corrupt", "xor_parity") else 0  # the newest generation is lost
    if prune:  # no host's directory left: lost or on other machines, verify cannot tell (exit 3)
        want_rc = 3
    l1 = next((l for l in r.stdout.splitlines() if l.strip().startswith("L1 missing or damaged:")), "")
    named = a.case in ("fallback", "here") or "upid %d (host %s)" % (victim["upid"], hosts[1]) in l1
    if prune:
        named = "L1 not checked: host(s) %s: their node-local storage" % ", ".join(sorted(hosts)) in r.stdout
    if r.returncode != want_rc or not named:
        fail("revive verify %s: rc %d (want %d):\n%s%s" % (ck, r.returncode, want_rc, r.stdout, r.stderr))
    if a.case == "partner":  # asked from where only the first host's storage is visible: the wiped host's L1 missing
        r = run(asking_hosts([revive, "verify", ck, "--local", os.path.join(a.workdir, "view")], hosts),
                env=dict(env, REVIVE_HOST_ID=hosts[0]), timeout=60)
        l1 = next((l for l in r.stdout.splitlines() if l.strip().startswith("L1 missing or damaged:")), "")
        if r.returncode != 0 or "upid %d (host %s)" % (victim["upid"], hosts[1]) not in l1 or "not checked" in r.stdout:
            fail("revive verify --hosts after host %s was wiped: rc %d (want 0: its partner copy holds it), its L1 "
                 "copy not named missing:\n%s%s" % (hosts[1], r.returncode, r.stdout, r.stderr))
    placement = t.placement
    if a.case.startswith("migrate"):  # the wiped host left out of the list, the spare one in: its process goes there
        placement = [x if x != ",".join(hosts) else ",".join([hosts[0], hosts[2], spare]) for x in t.placement]
    rcmd = [revive, "restart"] + (["--port", str(port)] if a.case == "here" else placement) + [ck]
    rerr = os.path.join(a.workdir, "restart-stderr")
    t0 = time.time()
    if a.case.startswith("again"):
        expect = streamed(lose_again(a, t, m, victim, by_host, l2, xor, rcmd, rerr, expect, who, rebuilt))
    rp = subprocess.run(rcmd, cwd=rund, stdout=subprocess.DEVNULL, stderr=open(rerr, "wb"), stdin=subprocess.DEVNULL,
                        env=env, timeout=120)
    err = open(rerr).read()
    sys.stdout.write(err)
    for e in expect:
        if e not in err:
            fail("restart stderr does not say %r" % e)
    if a.case.startswith("again") and "restarting from generation" in err:  # generation 2 must still serve
        fail("the second restart did not come back from generation 2")
    check_like_reference(revive, port, ck, env, m, index, ref_rc, rp.returncode, ref, rund, N)
    if a.case == "xor_two":  # the images served from L4 got node-local copies again, and their hosts their parity
        for h in hosts[:2]:
            for f in (by_host[h]["image"], "parity"):
                if not os.path.isfile(os.path.join(job_dir(local, h), "ckpt-%d" % gens, f)):
                    fail("host %s has no %s of generation %d after a restart that took its image from L4" % (h, f, gens))
    if a.case.startswith("migrate") and not os.path.isfile(os.path.join(job_dir(local, spare), "ckpt-%d" % gens, victim["image"])):
        fail("host %s's image was not moved to the spare host %s's node-local storage" % (hosts[1], spare))
    shutil.rmtree(a.workdir, ignore_errors=True)
    print("OK: case %s, restarted in %.2f s, outputs identical, exit %d" % (a.case, time.time() - t0, rp.returncode),
          flush=True)

if __name__ == "__main__":
    main()
