// Hand-written reference kernel for the runtime tests (written for tilelang-tpu, following
// tilelang_tpu/abi.py): C = A + B for fp32[1024, 1024], row-major.  TileLang name "add" ->
// entry "add_kernel"; parameters in PrimFunc order (A, B, C), shapes baked in.
#include "ppl.h"
using namespace ppl;

__KERNEL__ void add_kernel(fp32 *ptr_0, fp32 *ptr_1, fp32 *ptr_2) {
  const int M = 1024;
  const int N = 1024;
  const int BLOCK_M = 64;   // one row per lane (64 lanes on BM1690 and BM1684X)
  const int BLOCK_N = 256;
  dim4 shape = {1, M, 1, N};
  auto a = gtensor<fp32>(shape, GLOBAL, ptr_0);
  auto b = gtensor<fp32>(shape, GLOBAL, ptr_1);
  auto c = gtensor<fp32>(shape, GLOBAL, ptr_2);
  dim4 block = {1, BLOCK_M, 1, BLOCK_N};
  for (int m = 0; m < M; m += BLOCK_M) {
    for (int n = 0; n < N; n += BLOCK_N) {
      ppl::enable_pipeline();
      dim4 real = {1, min(BLOCK_M, M - m), 1, min(BLOCK_N, N - n)};
      dim4 offset = {0, m, 0, n};
      auto la = make_tensor<fp32>(block, real);
      auto lb = make_tensor<fp32>(block, real);
      auto lc = make_tensor<fp32>(block, real);
      dma::load(la, a.sub_view(real, offset));
      dma::load(lb, b.sub_view(real, offset));
      tiu::fadd(lc, la, lb);
      dma::store(c.sub_view(real, offset), lc);
    }
  }
}
