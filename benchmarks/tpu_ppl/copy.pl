// Hand-written PPL twin of the TileLang copy in benchmarks/tpu_vs_ppl.py (written for that
// comparison; ABI of tilelang_tpu/abi.py): B = A for fp32[1024, 1024], 64 x 512 tiles.
#include "ppl.h"
using namespace ppl;

__KERNEL__ void copy_kernel(fp32 *ptr_0, fp32 *ptr_1) {
  const int M = 1024, N = 1024, BM = 64, BN = 512;
  dim4 shape = {1, M, 1, N};
  auto src = gtensor<fp32>(shape, GLOBAL, ptr_0);
  auto dst = gtensor<fp32>(shape, GLOBAL, ptr_1);
  dim4 block = {1, BM, 1, BN};
  for (int m = 0; m < M; m += BM) {
    for (int n = 0; n < N; n += BN) {
      ppl::enable_pipeline();
      dim4 offset = {0, m, 0, n};
      auto tile = make_tensor<fp32>(block, block);
      dma::load(tile, src.sub_view(block, offset));
      dma::store(dst.sub_view(block, offset), tile);
    }
  }
}
