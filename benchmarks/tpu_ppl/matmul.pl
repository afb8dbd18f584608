// Hand-written PPL twin of the TileLang matmul in benchmarks/tpu_vs_ppl.py (written for that
// comparison; ABI of tilelang_tpu/abi.py): C = A @ B, A fp16[256, 256], B fp16[256, 256],
// C fp32[256, 256]; 128 x 128 output tiles, K in steps of 64, fp32 accumulation on the mm2
// unit (rows on lanes: A [1, M, 1, K], B [1, K, 1, N], C [1, M, 1, N]).
#include "ppl.h"
using namespace ppl;

__KERNEL__ void matmul_kernel(fp16 *ptr_0, fp16 *ptr_1, fp32 *ptr_2) {
  const int M = 256, N = 256, K = 256, BM = 128, BN = 128, BK = 64;
  dim4 ashape = {1, M, 1, K};
  dim4 bshape = {1, K, 1, N};
  dim4 cshape = {1, M, 1, N};
  auto ga = gtensor<fp16>(ashape, GLOBAL, ptr_0);
  auto gb = gtensor<fp16>(bshape, GLOBAL, ptr_1);
  auto gc = gtensor<fp32>(cshape, GLOBAL, ptr_2);
  dim4 ablock = {1, BM, 1, BK};
  dim4 bblock = {1, BK, 1, BN};
  dim4 cblock = {1, BM, 1, BN};
  for (int m = 0; m < M; m += BM) {
    for (int n = 0; n < N; n += BN) {
      auto c = make_tensor<fp32>(cblock, cblock);
      for (int k = 0; k < K; k += BK) {
        ppl::enable_pipeline();
        dim4 aoff = {0, m, 0, k};
        dim4 boff = {0, k, 0, n};
        auto a = make_tensor<fp16>(ablock, ablock);
        auto b = make_tensor<fp16>(bblock, bblock);
        dma::load(a, ga.sub_view(ablock, aoff));
        dma::load(b, gb.sub_view(bblock, boff));
        tiu::fmm2_nn(c, a, b, k > 0);  // the first K step overwrites, the rest accumulate
      }
      dim4 coff = {0, m, 0, n};
      dma::store(gc.sub_view(cblock, coff), c);
    }
  }
}
