# Python 3 with threads: workers feed a queue under a lock; the main thread collects and prints at the end.
import hashlib, queue, sys, threading, time

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 300
q = queue.Queue()
lock = threading.Lock()
totals = [0, 0, 0]

def work(k):
    for i in range(steps):
        with lock:
            totals[k] += i * (k + 1)
        q.put((k, i))
        time.sleep(0.004)

ts = [threading.Thread(target=work, args=(k,)) for k in range(3)]
for t in ts:
    t.start()
h = hashlib.sha256()
seen = sorted(q.get() for _ in range(3 * steps))
for t in ts:
    t.join()
for k, i in seen:
    h.update(b"%d:%d;" % (k, i))
print("steps=%d totals=%s digest=%s" % (steps, totals, h.hexdigest()))
