# revive launch /bin/true vs /bin/true: medians of interleaved runs, with a coordinator already running
# (the usual case in a job) and cold (launch starts and stops its own coordinator).
import os, statistics, subprocess, sys, time, tempfile
revive = sys.argv[1]; runs = int(sys.argv[2])
ck = tempfile.mkdtemp(prefix="launchbench")
env = dict(os.environ, REVIVE_LOG="0")
def t(cmd):
    t0 = time.perf_counter(); subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL); return time.perf_counter() - t0
def meas(port):
    return [revive, "launch", "--port", str(port), "--ckpt-dir", ck, "--", "/bin/true"]
native, cold, warm = [], [], []
coord = subprocess.Popen([revive, "coordinator", "--port", "29911", "--ckpt-dir", ck], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
time.sleep(0.5)
for i in range(runs):
    native.append(t(["/bin/true"]))
    warm.append(t(meas(29911)))
    cold.append(t(meas(29912 + i)))
coord.terminate(); coord.wait()
m = statistics.median
print("/bin/true native            median %.2f ms" % (1e3 * m(native)))
print("revive launch, coordinator up median %.2f ms  (+%.2f ms)" % (1e3 * m(warm), 1e3 * (m(warm) - m(native))))
print("revive launch, cold (starts one) median %.2f ms  (+%.2f ms)" % (1e3 * m(cold), 1e3 * (m(cold) - m(native))))
