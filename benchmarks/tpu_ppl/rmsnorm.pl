// Hand-written PPL twin of the TileLang RMSNorm in benchmarks/tpu_vs_ppl.py (written for that
// comparison; ABI of tilelang_tpu/abi.py): Y = X * rsqrt(mean(X^2) + 1e-6), fp32[1024, 1024].
// 64 rows (one per lane) x the whole row per tile, as the TileLang kernel tiles it.
#include "ppl.h"
#include "ppl_wrapper_func.h"
using namespace ppl;

__KERNEL__ void rmsnorm_kernel(fp32 *ptr_0, fp32 *ptr_1) {
  const int M = 1024, N = 1024, BM = 64;
  dim4 shape = {1, M, 1, N};
  auto gx = gtensor<fp32>(shape, GLOBAL, ptr_0);
  auto gy = gtensor<fp32>(shape, GLOBAL, ptr_1);
  dim4 block = {1, BM, 1, N};
  dim4 rblock = {1, BM, 1, 1};
  dim4 rstride = {0, 1, 1, 0};  // BM = 64 rows: one row group, the C stride is never used
  for (int m = 0; m < M; m += BM) {
    ppl::enable_pipeline();
    dim4 off = {0, m, 0, 0};
    auto x = make_tensor<fp32>(block, block);
    auto sq = make_tensor<fp32>(block, block);
    auto y = make_tensor<fp32>(block, block);
    auto r = make_tensor<fp32>(rblock, rblock);
    dma::load(x, gx.sub_view(block, off));
    tiu::fmul(sq, x, x);
    quick_pooling(r, sq, &block, &block, 0.0f, 1, 1.0f);
    tiu::fmul(r, r, 1.0f / N);
    tiu::fadd(r, r, 1e-6f);
    tiu::frsqrt(r, r);
    auto &rb = r.view(block, rstride);
    tiu::fmul(y, x, rb);
    dma::store(gy.sub_view(block, off), y);
  }
}
