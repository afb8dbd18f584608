#!/usr/bin/env bash
# One device call for both checks (the payload of tools/device/payload.sh all): the cuda checks
# (tools/device/cuda.sh) on the GPU beside the tpu differential (tools/device/differential.sh) on the
# CPUs, four of which are left to the cuda checks.  Results under $OUT.
#   bash tools/device/all.sh 8001 7.5         # first seed, minutes of drawing per shard
set -u
first=${1:?first seed} minutes=${2:?minutes}
out=${OUT:-$PWD/.diffarm/out}
mkdir -p "$out"
bash tools/device/cuda.sh 2 > "$out/cuda.txt" 2>&1 &
bash tools/device/differential.sh $(( $(nproc) - 4 )) "$first" "$minutes"
rc=$?
wait
cat "$out/cuda.txt"
exit $rc
