// Hand-written PPL twin of the TileLang flash attention forward in benchmarks/tpu_vs_ppl.py
// (tests/tpu_upstream_kernels.py's flash_attention_kernel, non-causal; written for that comparison,
// ABI of tilelang_tpu/abi.py): Q, K, V, Output fp16[1, 512, 2, 64] (bshd), 128 x 128 blocks,
// the same grid (query block, head) and K/V loop, written as a PPL programmer would:
//   S = Q K^T overwrites the score tile (no clear), the running max is folded in with one fmax,
//   exp2((s - m) * scale) is one subtract of the stride-0 row view, one multiply by
//   scale * ln 2 and PPL's fexp, and the K/V loop runs under ppl::enable_pipeline() with both
//   loads issued first so the DMA of the next step overlaps this step's compute.
#include "ppl.h"
#include "ppl_wrapper_func.h"
using namespace ppl;

__KERNEL__ void flash_attention_kernel(fp16 *ptr_0, fp16 *ptr_1, fp16 *ptr_2, fp16 *ptr_3) {
  const int S = 512, H = 2, D = 64, BM = 128, BN = 128;
  // log2(e) / sqrt(D), as the TileLang source scales before exp2; times ln 2 for fexp (base e).
  const float scale = 0.125f * 1.44269504f;
  const float exp_scale = scale * 0.6931471805599453f;
  dim4 gshape = {1, S, H, D};
  auto gq = gtensor<fp16>(gshape, GLOBAL, ptr_0);
  auto gk = gtensor<fp16>(gshape, GLOBAL, ptr_1);
  auto gv = gtensor<fp16>(gshape, GLOBAL, ptr_2);
  auto go = gtensor<fp16>(gshape, GLOBAL, ptr_3);
  dim4 qblock = {1, BM, 1, D};
  dim4 kblock = {1, BN, 1, D};
  dim4 sblock = {1, BM, 1, BN};
  dim4 rblock = {1, BM, 1, 1};
  // A per-row vector seen as a [BM, W] tile with W stride 0. BM = 128 rows are two rows per
  // lane, so the C and N strides are those of the [1, BM, 1, 1] fp32 vector's layout.
  dim4 rstride = {div_up(BM, LANE_NUM) * align(1, get_eu_num<fp32>()), align(1, get_eu_num<fp32>()), 1, 0};
  for (int bx = 0; bx < S / BM; ++bx) {
    for (int h = 0; h < H; ++h) {
      auto q = make_tensor<fp16>(qblock, qblock);
      auto o = make_tensor<fp32>(qblock, qblock);
      auto o16 = make_tensor<fp16>(qblock, qblock);
      auto m = make_tensor<fp32>(rblock, rblock);
      auto m_new = make_tensor<fp32>(rblock, rblock);
      auto l = make_tensor<fp32>(rblock, rblock);
      auto alpha = make_tensor<fp32>(rblock, rblock);
      auto rsum = make_tensor<fp32>(rblock, rblock);
      auto rmax = make_tensor<fp32>(rblock, rblock);
      dim4 qoff = {0, bx * BM, h, 0};
      dma::load(q, gq.sub_view(qblock, qoff));
      tiu::fill(o, 0.0f);
      tiu::fill(l, 0.0f);
      tiu::fill(m, -3.4028234663852886e38f);
      for (int k = 0; k < S / BN; ++k) {
        ppl::enable_pipeline();
        auto kt = make_tensor<fp16>(kblock, kblock);
        auto vt = make_tensor<fp16>(kblock, kblock);
        dim4 koff = {0, k * BN, h, 0};
        dma::load(kt, gk.sub_view(kblock, koff));
        dma::load(vt, gv.sub_view(kblock, koff));
        auto s = make_tensor<fp32>(sblock, sblock);
        tiu::fmm2_nt(s, q, kt);
        quick_pooling(rmax, s, &sblock, &sblock, -3.4028234663852886e38f, 0, 1.0f);
        tiu::fmax(m_new, m, rmax);
        // alpha = exp2((m - m_new) * scale): rescales what was accumulated so far.
        tiu::fsub(alpha, m, m_new);
        tiu::fmul(alpha, alpha, exp_scale);
        fexp(alpha, alpha, &rblock, &rblock);
        tiu::move(m, m_new);
        auto &m_rows = m_new.view(sblock, rstride);
        auto t = make_tensor<fp32>(sblock, sblock);
        tiu::fsub(t, s, m_rows);
        tiu::fmul(t, t, exp_scale);
        fexp(s, t, &sblock, &sblock);
        quick_pooling(rsum, s, &sblock, &sblock, 0.0f, 1, 1.0f);
        tiu::fmul(l, l, alpha);
        tiu::fadd(l, l, rsum);
        auto p = make_tensor<fp16>(sblock, sblock);
        tiu::cast(p, s);
        auto &alpha_rows = alpha.view(qblock, rstride);
        tiu::fmul(o, o, alpha_rows);
        tiu::fmm2_nn(o, p, vt, true);
      }
      auto &l_rows = l.view(qblock, rstride);
      tiu::fdiv(o, o, l_rows);
      tiu::cast(o16, o);
      dma::store(go.sub_view(qblock, qoff), o16);
    }
  }
}
