#!/bin/sh
# install_test.sh BUILD_DIR SOURCE_DIR: cmake --install into a temporary prefix, then build and run a
# user program with pkg-config (C++ and C) and with find_package(revive).
set -eu
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" --component revive >"$tmp/install.log" || { cat "$tmp/install.log"; exit 1; }
pcdir=$(dirname "$(find "$prefix" -name revive.pc | head -1)")
[ -f "$pcdir/revive.pc" ] || { echo "revive.pc not installed"; exit 1; }
export PKG_CONFIG_PATH=$pcdir
libdir=$(pkg-config --variable=libdir revive)
[ -e "$libdir/librevive.so" ] || { echo "librevive.so not in $libdir"; exit 1; }
app=$src/tests/applevel/install

g++ -std=c++20 "$app/app.cpp" -o "$tmp/app_pc" $(pkg-config --cflags --libs revive)
gcc "$app/app.c" -o "$tmp/app_c_pc" $(pkg-config --cflags --libs revive)
LD_LIBRARY_PATH=$libdir REVIVE_CP_PATH=$tmp/cp1 "$tmp/app_pc"
LD_LIBRARY_PATH=$libdir REVIVE_CP_PATH=$tmp/cp2 "$tmp/app_c_pc"

cmake -S "$app" -B "$tmp/user" -DCMAKE_PREFIX_PATH="$prefix" >"$tmp/user.log" 2>&1 || { cat "$tmp/user.log"; exit 1; }
cmake --build "$tmp/user" >>"$tmp/user.log" 2>&1 || { cat "$tmp/user.log"; exit 1; }
REVIVE_CP_PATH=$tmp/cp3 "$tmp/user/app"
REVIVE_CP_PATH=$tmp/cp4 "$tmp/user/app_c"

# When the MPI flavour was built, its package parts must be installed and usable too.
if [ -e "$libdir/librevive_mpi.so" ]; then
  pkg-config --exists revive-mpi || { echo "revive-mpi.pc missing"; exit 1; }
  [ -f "$prefix/include/revive/checkpoint_mpi.hpp" ] || { echo "checkpoint_mpi.hpp missing"; exit 1; }
  grep -q "revive::revive_mpi available" "$tmp/user.log" || { echo "revive::revive_mpi not exported"; exit 1; }
  echo "revive_mpi installed and exported"
fi
echo "install test passed"
