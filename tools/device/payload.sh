#!/usr/bin/env bash
# Builds .diffarm/ (ignored: add `/.diffarm/` to .git/info/exclude): what a bare GPU device machine of
# this workplace needs to run the tpu differential (tools/device/differential.sh) or the cuda
# conformance suite (tools/device/cuda.sh).  The device has Python 3.12, torch and numpy but no
# tilelang, and the working tree travels in 64 MiB, so everything is xz-packed:
#   site.tar.xz     tilelang 0.1.15 (its headers, cutlass's included; no C++ sources), tvm-ffi, z3,
#                   ml_dtypes, torch-c-dlpack-ext, cloudpickle, unpacked  (~32 MB)
#   tc.tar.xz       the tpu_mlir 1.30.2 toolchain from `tilelang-tpu toolchain install`, stripped (~27 MB)
#   ours/           wheels of tilecore and tilelang-tpu, built from this checkout, pluggy, platformdirs
#   testwhl/        tilelang-cuda, tilelang-democpu, pytest and what the image may lack (cuda.sh)
# All of it, with the repository, is ~65 MB: one call runs both scripts (tools/device/README.md).
# Usage: tools/device/payload.sh [all|site|toolchain]   (run from the repository root, after `make setup`)
set -euo pipefail
what=${1:-all}
out=.diffarm
mkdir -p "$out/whl" "$out/ours"
py=.venv/bin/python
platforms=""
for p in manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux_2_24_x86_64 manylinux_2_27_x86_64 manylinux_2_28_x86_64 manylinux_2_31_x86_64 manylinux_2_34_x86_64 manylinux_2_35_x86_64; do
  platforms="$platforms --platform $p"
done
for req in tilelang==0.1.15 apache-tvm-ffi==0.1.12 z3-solver==4.15.4.0 ml_dtypes==0.6.0 cloudpickle \
           torch-c-dlpack-ext; do
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    $platforms -d "$out/whl" "$req"
done
rm -f "$out"/ours/*.whl "$out"/testwhl/*.whl
# Small needs the device image may lack.  The differential's carry is close to the 64 MiB a call may
# carry, so ours/ holds only what it needs (the image's huggingface_hub and accelerate bring filelock,
# tqdm, typing_extensions, packaging and psutil); testwhl/ the rest, for cuda.sh.
mkdir -p "$out/testwhl"
rm -f "$out"/testwhl/*.whl
for req in pluggy platformdirs; do
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    $platforms -d "$out/ours" "$req"
done
for req in pytest iniconfig pygments filelock tqdm typing_extensions packaging psutil; do
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    $platforms -d "$out/testwhl" "$req"
done
$py -m pip wheel -q --no-deps -w "$out/ours" . ./plugins/tilelang_tpu
$py -m pip wheel -q --no-deps -w "$out/testwhl" ./plugins/tilelang_cuda ./examples/democpu

stage=$(mktemp -d "${TMPDIR:-/tmp}/tilecore-payload.XXXXXX")
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/site"
for w in "$out"/whl/*.whl; do (cd "$stage/site" && unzip -q -o "$OLDPWD/$w"); done
rm -rf "$stage"/site/z3_solver-*.data
(cd "$stage/site/z3/lib" && rm -f libz3.so && ln -s libz3.so.* libz3.so)   # the wheel ships the library twice
# No C++ sources (tilelang's, TVM's, libbacktrace's); hypothesis is the device image's own (its
# version is in env.txt: draws depend on it).  --x86 (BCJ) packs the shared libraries ~10 % smaller.
(cd "$stage/site" && rm -rf tvm_ffi/3rdparty/libbacktrace tilelang/3rdparty/tvm/src \
   $(ls -d tilelang/src/* | grep -v tl_templates) hypothesis hypothesis-*.dist-info sortedcontainers*)
if [ "$what" != toolchain ]; then
  tar -C "$stage/site" -cf - . | xz --x86 --lzma2=preset=9e -T1 > "$out/site.tar.xz"
fi
if [ "$what" != site ]; then
  root=$($py -c 'from tilelang_tpu.setup import install_root; print(install_root())')
  mkdir -p "$stage/tc"
  cp -a "$root" "$stage/tc/toolchain"
  rm -f "$stage"/tc/toolchain/*/tpu_mlir/lib/libcmodel_bm1684x.so "$stage"/tc/toolchain/.install-*.lock
  strip "$stage"/tc/toolchain/*/tpu_mlir/cross_toolchains/ppl_compile/bin/ppl-compile \
        "$stage"/tc/toolchain/*/tpu_mlir/lib/third_party/libdnnl.so.3
  tar -C "$stage/tc" -cf - toolchain | xz --x86 --lzma2=preset=9e -T1 > "$out/tc.tar.xz"
fi
ls -la "$out" "$out/ours"
