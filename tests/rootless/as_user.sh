#!/usr/bin/env bash
# as_user.sh WORKDIR CMD [ARGS...]: runs CMD as an ordinary user, as issue 8 asks of every restart (HPC
# users are never root). As root: as the user revive-test (REVIVE_TEST_USER; created if missing, no home,
# no shell) with HOME in a fresh WORKDIR it owns; as anyone else: as themselves, in a fresh WORKDIR.
# CMD gets WORKDIR/w as the place for its work (pass it as the driver's --workdir).
set -euo pipefail
work=$1; shift
rm -rf "$work"
mkdir -p "$work"
if [ "$(id -u)" != 0 ]; then
  exec env HOME="$work" "$@"
fi
user=${REVIVE_TEST_USER:-revive-test}
if ! id -u "$user" >/dev/null 2>&1; then
  useradd --system --no-create-home --shell /usr/sbin/nologin "$user" 2>/dev/null || id -u "$user" >/dev/null
fi
chown "$user": "$work"
# The build tree and the sources must be readable by that user: say so, instead of a confusing failure.
for f in "$@"; do
  if [ -e "$f" ] && ! runuser -u "$user" -- test -r "$f"; then
    echo "as_user.sh: $user cannot read $f (a directory above it is not searchable?)" >&2
    exit 1
  fi
done
exec runuser -u "$user" -- env HOME="$work" XDG_RUNTIME_DIR= "$@"
