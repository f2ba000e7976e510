# Python 3: a hash chain over dicts and strings with short sleeps; prints at the end.
import hashlib, sys, time

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 200
h = hashlib.sha256()
d = {}
for i in range(steps):
    d[i % 97] = d.get(i % 97, 0) + i
    h.update(("%d:%d" % (i, d[i % 97])).encode())
    time.sleep(0.005)
print("steps=%d digest=%s keys=%d" % (steps, h.hexdigest(), len(d)))
