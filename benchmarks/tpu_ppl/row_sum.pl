// Hand-written PPL twin of the TileLang row sum in benchmarks/tpu_vs_ppl.py (written for that
// comparison; ABI of tilelang_tpu/abi.py): Y[m, 0] = sum_n X[m, n] for fp32[1024, 1024].
// 64 rows (one per lane) x the whole row per tile; quick_pooling = two average-pooling passes
// with scale 1 (slice x EU -> EU, then EU -> 1).
#include "ppl.h"
#include "ppl_wrapper_func.h"
using namespace ppl;

__KERNEL__ void row_sum_kernel(fp32 *ptr_0, fp32 *ptr_1) {
  const int M = 1024, N = 1024, BM = 64;
  dim4 xshape = {1, M, 1, N};
  dim4 yshape = {1, M, 1, 1};
  auto gx = gtensor<fp32>(xshape, GLOBAL, ptr_0);
  auto gy = gtensor<fp32>(yshape, GLOBAL, ptr_1);
  dim4 xblock = {1, BM, 1, N};
  dim4 yblock = {1, BM, 1, 1};
  for (int m = 0; m < M; m += BM) {
    ppl::enable_pipeline();
    dim4 xoff = {0, m, 0, 0};
    auto x = make_tensor<fp32>(xblock, xblock);
    auto y = make_tensor<fp32>(yblock, yblock);
    dma::load(x, gx.sub_view(xblock, xoff));
    quick_pooling(y, x, &xblock, &xblock, 0.0f, 1, 1.0f);
    dma::store(gy.sub_view(yblock, xoff), y);
  }
}
