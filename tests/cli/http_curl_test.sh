#!/usr/bin/env bash
# http_curl_test.sh REVIVE: programs nobody here wrote, over TCP as users run them: python3's http.server
# and a shell loop of curl, one new HTTP/1.0 connection per file, the server answering and closing (the
# pattern whose answers a checkpoint between the server's close and curl's read used to lose:
# channels.outside_unread). One computation (`revive launch bash job.sh`), checkpointed at random moments,
# SIGKILLed, restarted, twice; the md5 of every file curl fetched equals an uninterrupted run's, in order.
set -euo pipefail
rv=$(realpath "$1")
source "$(dirname "$0")/lib.sh"
command -v curl >/dev/null || { echo "SKIP: no curl"; exit 77; }
py=/usr/bin/python3; [ -x "$py" ] || py=$(command -v python3)
cleanup_patterns=("$tmp/job.sh" "http.server $lport")
mkdir "$tmp/www"
for i in $(seq 1 40); do head -c $((i * 1499)) /dev/urandom | base64 >"$tmp/www/f$i"; done
cat >"$tmp/job.sh" <<JOB
cd "$tmp/www"
"$py" -m http.server $lport --bind 127.0.0.1 >/dev/null 2>&1 &
srv=\$!
for t in \$(seq 100); do curl -s -o /dev/null http://127.0.0.1:$lport/f1 && break; sleep 0.05; done
for r in \$(seq 1 8); do
  for i in \$(seq 1 40); do echo "\$r \$i \$(curl -s http://127.0.0.1:$lport/f\$i | md5sum)"; done
done
kill \$srv
JOB
bash "$tmp/job.sh" >"$tmp/ref.out"
[ "$(wc -l <"$tmp/ref.out")" = 320 ] || fail "reference run: $(wc -l <"$tmp/ref.out") lines"
ck=$tmp/ck
"$rv" launch --port "$port" --ckpt-dir "$ck" -- bash "$tmp/job.sh" >"$tmp/run.out" 2>"$tmp/launch.err" &
launcher=$!
for _ in $(seq 200); do [ "$(wc -l <"$tmp/run.out")" -ge 20 ] && break; sleep 0.05; done
sleep "0.$((RANDOM % 10))"
"$rv" checkpoint --port "$port" --ckpt-dir "$ck" >/dev/null || { cat "$tmp/launch.err"; fail "checkpoint 1"; }
sleep "0.$((RANDOM % 10))"
checkpoint_and_kill "$launcher" "$tmp/job.sh"
pkill -9 -f "http.server $lport" || true
pkill -9 -f "curl -s http://127.0.0.1:$lport" || true
echo "killed after $(wc -l <"$tmp/run.out") lines"
# First restart: checkpointed again at a random moment and killed; the second runs to the end.
"$rv" restart --port "$port" "$ck" >>"$tmp/run.out" 2>"$tmp/restart1.err" &
rp=$!
n0=$(wc -l <"$tmp/run.out")
for _ in $(seq 400); do [ "$(wc -l <"$tmp/run.out")" -ge $((n0 + 10)) ] && break; sleep 0.05; done
[ "$(wc -l <"$tmp/run.out")" -ge $((n0 + 10)) ] || { cat "$tmp/restart1.err"; fail "the restored computation did not fetch 10 files in 20 s"; }
sleep "0.$((RANDOM % 10))"
"$rv" checkpoint --port "$port" --ckpt-dir "$ck" >/dev/null || { cat "$tmp/restart1.err"; fail "checkpoint after the restart"; }
kill -9 "$rp" 2>/dev/null || true
pkill -9 -f "$tmp/job.sh" || true
pkill -9 -f "http.server $lport" || true
pkill -9 -f "curl -s http://127.0.0.1:$lport" || true
pkill -9 -f "(revive|coordinator).*--port $port( |$)" 2>/dev/null || true
wait "$rp" 2>/dev/null || true
echo "killed again after $(wc -l <"$tmp/run.out") lines"
timeout 120 "$rv" restart --port "$port" "$ck" >>"$tmp/run.out" 2>"$tmp/restart2.err" ||
  { tail "$tmp/restart2.err"; fail "second restart"; }
cmp "$tmp/ref.out" "$tmp/run.out" || { diff "$tmp/ref.out" "$tmp/run.out" | head; fail "output differs from an uninterrupted run"; }
echo "http.server + curl test passed: 320 fetches identical after two kills and restarts"
