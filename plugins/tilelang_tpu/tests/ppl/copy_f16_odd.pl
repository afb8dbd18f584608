// Hand-written reference kernel for the runtime tests (written for tilelang-tpu, following
// tilelang_tpu/abi.py): B = A for fp16[100, 300], a shape that divides neither tile edge.
// TileLang name "copy_kernel" (already ends in _kernel, so the entry keeps that name).
#include "ppl.h"
using namespace ppl;

__KERNEL__ void copy_kernel(fp16 *ptr_0, fp16 *ptr_1) {
  const int M = 100;
  const int N = 300;
  const int BLOCK_M = 64;
  const int BLOCK_N = 128;
  dim4 shape = {1, M, 1, N};
  auto src = gtensor<fp16>(shape, GLOBAL, ptr_0);
  auto dst = gtensor<fp16>(shape, GLOBAL, ptr_1);
  dim4 block = {1, BLOCK_M, 1, BLOCK_N};
  for (int m = 0; m < M; m += BLOCK_M) {
    for (int n = 0; n < N; n += BLOCK_N) {
      dim4 real = {1, min(BLOCK_M, M - m), 1, min(BLOCK_N, N - n)};
      dim4 offset = {0, m, 0, n};
      auto tile = make_tensor<fp16>(block, real);
      dma::load(tile, src.sub_view(real, offset));
      dma::store(dst.sub_view(real, offset), tile);
    }
  }
}
