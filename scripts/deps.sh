#!/usr/bin/env bash
# Installs (apt-get) whatever revive's build, tests and demo need and is missing. Idempotent; quiet when
# everything is present. Debian 12. Needs root (or sudo) only when something is missing.
set -euo pipefail
PKGS=(build-essential cmake pkg-config git gfortran python3 iproute2 procps psmisc
      sqlite3 make util-linux  # programs nobody here wrote, for tests/files
      xfsprogs  # tests/files: files.blocks_reflink clones blocks on an XFS loop filesystem
      libzstd-dev libxxhash-dev libisal-dev libcli11-dev nlohmann-json3-dev
      libgtest-dev libgmock-dev libbenchmark-dev
      libopenmpi-dev openmpi-bin mpich libmpich-dev
      libibverbs-dev ibverbs-utils  # tests/rdma: softverbs builds against the verbs headers, runs the utils
      libfabric-dev libfabric-bin  # tests/rdma: fi_inflight (fi_* API), fi_pingpong; Open MPI's mtl ofi
      clang libclang-rt-dev  # clang: libFuzzer target of the coordinator wire decoder (tests/coord)
      slurm-wlm munge)  # tests/slurm: a private single-node Slurm (slurm_env.sh)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "deps: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
