#!/usr/bin/env python3
"""Multi-level storage end to end: an MPI program (ml_app) on simulated hosts (REVIVE_HOST per rank, each
host's node-local storage a directory of its own), killed as a whole after a checkpoint; then a host's
storage is wiped or a piece corrupted, and the restarted job must print exactly what an uninterrupted run
prints, from the version and level the scenario expects, saying what it did.

  ml_test.py ML_APP MPIEXEC WORKDIR SCENARIO

Versions: ml_app 40 5 checkpoints steps 0, 5, 10, ... as versions 1, 2, 3, ...; it dies after step 27, so
the newest version is 6 (step 25, restart at 26). With L4@4 the global level holds version 4 (step 15,
restart at 16); the app waits for that flush before it dies. Node-local storage keeps versions 5 and 6.
"""
import os
import re
import shutil
import subprocess
import sys

APP, MPIEXEC, WORK, SCEN = sys.argv[1:5]
STEPS, EVERY, DIE = "40", "5", "27"


def run(nhosts, rpn, env, die=True, shift=0, racks=0):
    # Rank r runs on host h((r / rpn + shift) % nhosts); with racks, hosts h0,h1 are in rack0, h2,h3 in rack1...
    rack = ' REVIVE_FAILURE_DOMAIN=rack$(( h / %d ))' % (nhosts // racks) if racks else ''
    wrap = ('r=${OMPI_COMM_WORLD_RANK:-$PMI_RANK}; h=$(( (r / %d + %d) %% %d )); REVIVE_HOST=h$h%s exec "$@"'
            % (rpn, shift, nhosts, rack))
    cmd = [MPIEXEC, "-n", str(nhosts * rpn), "sh", "-c", wrap, "sh", APP, STEPS, EVERY] + ([DIE] if die else [])
    e = dict(os.environ)
    for k in list(e):
        if k.startswith("REVIVE_"):
            del e[k]
    e.update(env)
    p = subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=150)
    return p


def fail(msg, p=None):
    print("FAIL:", msg)
    if p is not None:
        print("--- stdout\n" + p.stdout + "\n--- stderr\n" + p.stderr)
    sys.exit(1)


def pieces(local, host, v, name):
    found = []
    for root, _, files in os.walk(os.path.join(local, host)):
        if os.path.basename(root) == "v-%d" % v and name in files:
            found.append(os.path.join(root, name))
    return found


def corrupt(path):
    with open(path, "r+b") as f:
        f.seek(os.path.getsize(path) // 2)
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 0x5A]))


def main():
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    local, glob = os.path.join(WORK, "local"), os.path.join(WORK, "global")
    nhosts, rpn = 3, 2
    env = {"REVIVE_LOCAL_PATH": local, "REVIVE_CP_PATH": glob, "REVIVE_GROUP_SIZE": "3",
           "REVIVE_LEVELS": "L1+L3,L4@4", "ML_APP_WAIT_GLOBAL": "4"}
    wipe, corrupt_piece, shift, racks = [], None, 0, 0
    step, said = 26, [r"from node-local storage", r"rebuilt from their group's parity"]
    if SCEN == "xor":
        wipe = ["h1"]
    elif SCEN == "rs":
        nhosts = 4
        env.update({"REVIVE_GROUP_SIZE": "4", "REVIVE_PARITY": "2"})
        wipe = ["h1", "h3"]
    elif SCEN == "partner":
        env["REVIVE_LEVELS"] = "L1+L2,L4@4"
        wipe = ["h2"]
        said = [r"fetched from another node"]
    elif SCEN == "fallback":
        wipe = ["h1", "h2"]
        step = 16
        said = [r"cannot restore from node-local storage: version 6: .*XOR group .*lost 2 members.*parity tolerates 1",
                r"from %s/mlapp \(global level\)" % re.escape(glob)]
    elif SCEN == "rs_fallback":
        nhosts = 4
        env.update({"REVIVE_GROUP_SIZE": "4", "REVIVE_PARITY": "2"})
        wipe = ["h0", "h1", "h2"]
        step = 16
        said = [r"Reed-Solomon group .*lost 3 members.*parity tolerates 2", r"\(global level\)"]
    elif SCEN == "bad_parity":
        wipe = ["h1"]
        corrupt_piece = ("h0", 6, "parity-0")  # rank 0's parity: its group lost rank 2 (on h1) already
        step = 21
        said = [r"parity-0: checksum mismatch", r"set aside", r"version 6: .*lost 2 members",
                r"restarting from version 5 .*rebuilt from their group's parity"]
    elif SCEN == "bad_partner":
        env["REVIVE_LEVELS"] = "L1+L2+L3,L4@4"
        wipe = ["h1"]
        corrupt_piece = ("*", 6, "rank-2")  # the partner copy of rank 2 (its own copy was on h1)
        said = [r"rank-2: checksum mismatch", r"set aside", r"rebuilt from their group's parity"]
    elif SCEN == "rack":
        # 4 hosts in 2 racks, groups across racks (REVIVE_DOMAIN_DEPTH=1): a whole rack lost is one member
        # of every group.
        nhosts, racks = 4, 2
        env.update({"REVIVE_DOMAIN_DEPTH": "1", "REVIVE_GROUP_SIZE": "4"})
        wipe = ["h0", "h1"]
        said = [r"8 ranks: 4 read on their node, 4 rebuilt from their group's parity"]
    elif SCEN == "rack_unaware":
        # The same loss with groups placed by host only: some group loses two members, the global level serves.
        nhosts, racks = 4, 2
        env.update({"REVIVE_GROUP_SIZE": "4"})
        wipe = ["h0", "h1"]
        step = 16
        said = [r"lost 2 members", r"\(global level\)"]
    elif SCEN == "moved":
        shift = 1
        said = [r"6 ranks: 6 fetched from another node"]
    elif SCEN == "config":
        conf = os.path.join(WORK, "revive.conf")
        with open(conf, "w") as f:
            f.write("# levels from a file\nREVIVE_LEVELS = L1+L3,L4@4\nREVIVE_GROUP_SIZE=3\n")
        env = {k: v for k, v in env.items() if k not in ("REVIVE_LEVELS", "REVIVE_GROUP_SIZE")}
        env["REVIVE_CONFIG"] = conf
        wipe = ["h1"]
    elif SCEN == "bad_policy":
        env["REVIVE_LEVELS"] = "L1+L5"
        p = run(nhosts, rpn, env, die=False, racks=racks)
        if p.returncode == 0 or not re.search(r"storage levels \"L1\+L5\": 'L5' is not a level", p.stderr):
            fail("a bad REVIVE_LEVELS must be refused naming the level", p)
        print("bad_policy: PASS")
        return
    elif SCEN == "other_rank_count":
        # Restarting node-local versions with another number of ranks is refused, as for the global level.
        p = run(nhosts, rpn, env)
        if p.returncode == 0:
            fail("the job was meant to die after step " + DIE, p)
        r = run(2, rpn, env, die=False)
        if r.returncode == 0 or not re.search(r"cannot restart from version 6 was written by 6 ranks, this run has 4",
                                              r.stderr):
            fail("a restart with 4 ranks of a 6-rank checkpoint must be refused, naming both counts", r)
        print("other_rank_count: PASS")
        return
    elif SCEN == "one_domain":
        p = run(1, 4, env, die=False)
        if p.returncode == 0 or not re.search(r"cannot place redundancy: .*parity groups \(L3\)", p.stderr):
            fail("L3 with every rank on one host must be refused, naming the failure domains", p)
        print("one_domain: PASS")
        return
    else:
        fail("unknown scenario " + SCEN)

    ref = run(nhosts, rpn, {"REVIVE_CP_PATH": os.path.join(WORK, "ref")}, die=False, racks=racks)
    if ref.returncode != 0 or "digest" not in ref.stdout:
        fail("reference run", ref)
    p = run(nhosts, rpn, env, racks=racks)
    if p.returncode == 0:
        fail("the job was meant to die after step " + DIE, p)
    if not os.path.exists(os.path.join(glob, "mlapp", "v-4", "MANIFEST")):
        fail("version 4 never became complete on the global level", p)
    for h in wipe:
        shutil.rmtree(os.path.join(local, h))
    if corrupt_piece:
        host, v, name = corrupt_piece
        hosts = [d for d in os.listdir(local)] if host == "*" else [host]
        paths = [x for h in hosts for x in pieces(local, h, v, name)]
        if len(paths) != 1:
            fail("expected one %s of version %d, found %s" % (name, v, paths))
        corrupt(paths[0])
    r = run(nhosts, rpn, env, die=False, shift=shift, racks=racks)
    if r.returncode != 0:
        fail("restart failed", r)
    if r.stdout != ref.stdout:
        fail("restarted output differs from the uninterrupted run:\n" + ref.stdout, r)
    m = re.search(r"restarted at step (\d+)", r.stderr)
    if not m or int(m.group(1)) != step:
        fail("expected a restart at step %d" % step, r)
    for s in said:
        if not re.search(s, r.stderr):
            fail("stderr does not say /%s/" % s, r)
    print("%s: PASS (restarted at step %d)" % (SCEN, step))


main()
