#!/usr/bin/env bash
# Runs on a device machine with an NVIDIA GPU (see the device tool's README), from the repository root,
# with `.diffarm/site.tar.xz`, `.diffarm/ours`, `.diffarm/testwhl` carried (tools/device/payload.sh cuda): tilecore doctor, the cuda conformance suite,
# the cuda backend's tests and the GEMM benchmark against upstream.  Results under $OUT.
#   bash tools/device/cuda.sh [ROUNDS]
set -u
rounds=${1:-2}
out=${OUT:-$PWD/.diffarm/out}
mkdir -p "$out"
work=$(mktemp -d /tmp/tilecore-cuda.XXXXXX)
site=$work/site
mkdir -p "$site"
tar -C "$site" -xJf .diffarm/site.tar.xz
python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" .diffarm/ours/*.whl .diffarm/testwhl/*.whl >/dev/null
python3 -c "import site, sysconfig; open(sysconfig.get_paths()['purelib'] + '/zz-tilecore-payload.pth', 'w').write('import site; site.addsitedir(%r)\\n' % '$site')"
export PYTHONPATH=$site PYTHONUNBUFFERED=1 TILECORE_CACHE_DIR=$work/tc TILELANG_CACHE_DIR=$work/tl TMPDIR=$work
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -m tilecore.cli doctor > "$out/doctor.txt" 2>&1
echo "doctor rc $?"; tail -15 "$out/doctor.txt"
# CUDA_CONFORMANCE=0 skips the conformance suite, CUDA_TESTS names the tests to run, ROUNDS=0 the benchmark.
if [ "${CUDA_CONFORMANCE:-1}" = 1 ]; then
  python3 -c 'import pytest, sys; sys.exit(pytest.main(sys.argv[1:]))' -q -p no:cacheprovider \
    --pyargs tilecore.conformance --tilecore-target=cuda --tilecore-json="$out/cuda_conformance.json" 2>&1 | tail -8
fi
python3 -c 'import pytest, sys; sys.exit(pytest.main(sys.argv[1:]))' -q -p no:cacheprovider \
  ${CUDA_TESTS:-plugins/tilelang_cuda tests/test_upstream_regression.py} > "$out/cuda_pytest.txt" 2>&1
echo "cuda tests rc $?"; tail -8 "$out/cuda_pytest.txt"
if [ "$rounds" != 0 ]; then
  python3 benchmarks/cuda_gemm.py --rounds "$rounds" 2>&1 | tee "$out/cuda_gemm.txt" | tail -16
fi
rm -rf "$work"
