// Hand-written reference kernel for the runtime tests (written for tilelang-tpu, following
// tilelang_tpu/abi.py): C = A * B + A in fp16[130, 700], three tensor parameters, one tile
// op chain.  TileLang name "main" -> entry "main_kernel" (the same entry name as
// other "main" kernels: the runtime must keep each library's symbol apart).
#include "ppl.h"
using namespace ppl;

__KERNEL__ void main_kernel(fp16 *ptr_0, fp16 *ptr_1, fp16 *ptr_2) {
  const int M = 130;
  const int N = 700;
  const int BLOCK_M = 64;
  const int BLOCK_N = 256;
  dim4 shape = {1, M, 1, N};
  auto a = gtensor<fp16>(shape, GLOBAL, ptr_0);
  auto b = gtensor<fp16>(shape, GLOBAL, ptr_1);
  auto c = gtensor<fp16>(shape, GLOBAL, ptr_2);
  dim4 block = {1, BLOCK_M, 1, BLOCK_N};
  for (int m = 0; m < M; m += BLOCK_M) {
    for (int n = 0; n < N; n += BLOCK_N) {
      dim4 real = {1, min(BLOCK_M, M - m), 1, min(BLOCK_N, N - n)};
      dim4 offset = {0, m, 0, n};
      auto la = make_tensor<fp16>(block, real);
      auto lb = make_tensor<fp16>(block, real);
      auto lc = make_tensor<fp16>(block, real);
      dma::load(la, a.sub_view(real, offset));
      dma::load(lb, b.sub_view(real, offset));
      tiu::fmul(lc, la, lb);
      tiu::fadd(lc, lc, la);
      dma::store(c.sub_view(real, offset), lc);
    }
  }
}
