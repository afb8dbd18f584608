#!/usr/bin/env bash
# Runs on a device machine (tools/device/README.md), from the repository root, with `.diffarm/site.tar.xz`,
# `.diffarm/tc.tar.xz` and `.diffarm/ours` carried (tools/device/payload.sh): the tpu differential in
# SHARDS processes, one seed each (FIRST_SEED, FIRST_SEED+1, ...), each drawing programs for MINUTES,
# then merges the shards.  DIFF_SMOKE=0 skips the 8-program smoke run.
#   bash tools/device/differential.sh 32 9001 6.9          # results under $OUT (or ./.diffarm/out)
# Each shard has its own TMPDIR and caches; nothing is written outside them and $OUT.
set -u
shards=${1:?shards} first=${2:?first seed} minutes=${3:?minutes}
out=${OUT:-$PWD/.diffarm/out}
mkdir -p "$out/shards"
work=$(mktemp -d /tmp/tilecore-diff.XXXXXX)
site=$work/site
mkdir -p "$site" "$work/tc"
tar -C "$site" -xJf .diffarm/site.tar.xz
tar -C "$work/tc" -xJf .diffarm/tc.tar.xz
python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" .diffarm/ours/*.whl >/dev/null
python3 -c "import site, sysconfig; open(sysconfig.get_paths()['purelib'] + '/zz-tilecore-payload.pth', 'w').write('import site; site.addsitedir(%r)\\n' % '$site')"
# CPU only: upstream's kernels put their tensors on a visible GPU, which the c target refuses.
export PYTHONPATH=$site TILELANG_TPU_TOOLCHAIN_DIR=$work/tc/toolchain PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=
{ uname -a; nproc; python3 --version; g++ --version | head -1; ls /usr/include/c++ /usr/include/x86_64-linux-gnu/c++ 2>&1
  python3 -c 'import tilelang, hypothesis, torch; print("tilelang", tilelang.__version__, "hypothesis", hypothesis.__version__, "torch", torch.__version__)'
  python3 -m tilecore.cli list 2>&1 | head -20; } > "$out/env.txt" 2>&1
# Smoke: one small program batch first, so a broken payload costs seconds, not the whole call.
mkdir -p "$work/smoke"
[ "${DIFF_SMOKE:-1}" = 1 ] && { TMPDIR=$work/smoke TILECORE_CACHE_DIR=$work/smoke/tc TILELANG_CACHE_DIR=$work/smoke/tl \
  python3 benchmarks/tpu_differential.py --count 8 --seed 1 --no-shrink --quiet > "$out/smoke.txt" 2>&1
cat "$out/smoke.txt" | tail -25
grep -qE "^tpu: match [1-9]" "$out/smoke.txt" || { echo "smoke: tpu matched nothing; stopping"; cat "$out/env.txt"; exit 3; }; }
# Upstream's own kernels (benchmarks/upstream_kernels.py), unchanged, on c and tpu, beside the shards, when
# .diffarm/upstream.tar.xz (upstream's examples/ and testing/ folders the manifest names) is carried.
if [ -f .diffarm/upstream.tar.xz ]; then
  mkdir -p "$work/up/checkout" && tar -C "$work/up/checkout" -xJf .diffarm/upstream.tar.xz
  (cd "$work/up" && TMPDIR=$work/up TILECORE_CACHE_DIR=$work/up/tc TILELANG_CACHE_DIR=$work/up/tl \
     timeout -s KILL $(python3 -c "print(int($minutes * 60 + 20))") python3 "$OLDPWD/benchmarks/upstream_kernels.py" "$work/up/checkout" \
     > "$out/upstream.txt" 2>&1) &
fi
for i in $(seq 0 $((shards - 1))); do
  s=$((first + i)); d=$work/s$s; mkdir -p "$d"
  # Killed 30 s after its drawing time: a program can run long, and the shard's summary is written
  # every 30 s under $OUT, so what it ran comes back even when the call passes its time limit.
  TMPDIR=$d TILECORE_CACHE_DIR=$d/tc TILELANG_CACHE_DIR=$d/tl timeout -s KILL $(python3 -c "print(int($minutes * 60 + 30))") nice -n 5 \
    python3 benchmarks/tpu_differential.py --count 5000 --seed $s --minutes "$minutes" --no-shrink --quiet \
    --summary "$out/shards/shard$s.json" > "$d/log.txt" 2>&1 &
done
wait
python3 benchmarks/tpu_differential_merge.py "$out"/shards/shard*.json --out "$out/merged.json" | tee "$out/merged.txt"
rc=${PIPESTATUS[0]}
ls "$out"/shards/shard*.json | wc -l
# One archive: a call brings back a limited number of files.
tar -C "$out" -czf "$out/shards.tar.gz" shards && rm -rf "$out/shards"
for f in "$work"/s*/log.txt; do grep -l "Traceback" "$f" >/dev/null && { echo "== $f"; tail -5 "$f"; }; done | head -40
rm -rf "$work"
exit $rc
