// Hand-written PPL twin of the TileLang softmax in benchmarks/tpu_vs_ppl.py (written for that
// comparison; ABI of tilelang_tpu/abi.py): row softmax of fp32[1024, 1024], 64 rows x the whole
// row per tile: max (quick_pooling), x - max, exp, sum, divide.
#include "ppl.h"
#include "ppl_wrapper_func.h"
using namespace ppl;

__KERNEL__ void softmax_kernel(fp32 *ptr_0, fp32 *ptr_1) {
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
    auto e = make_tensor<fp32>(block, block);
    auto t = make_tensor<fp32>(block, block);
    auto mx = make_tensor<fp32>(rblock, rblock);
    auto s = make_tensor<fp32>(rblock, rblock);
    dma::load(x, gx.sub_view(block, off));
    quick_pooling(mx, x, &block, &block, -3.4028234663852886e38f, 0, 1.0f);
    auto &mb = mx.view(block, rstride);
    tiu::fsub(t, x, mb);
    fexp(e, t, &block, &block);
    quick_pooling(s, e, &block, &block, 0.0f, 1, 1.0f);
    auto &sb = s.view(block, rstride);
    tiu::fdiv(t, e, sb);
    dma::store(gy.sub_view(block, off), t);
  }
}
