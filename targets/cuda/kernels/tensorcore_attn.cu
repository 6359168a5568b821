// tensorcore_attn.cu: V4's decode attention in the fast numerics mode on the tensor
// cores (compiled in tensorcore.cu's unit: it uses fast_mma, fast_rn, fast_split16).
//
// Per row and layer the decode attention is two small products: the logits Q·Kᵀ (16
// heads × the row's keys, reduced over the head's dim values) and the output P·V (16
// heads × dim values, reduced over the keys; V4's keys are the values). Both run as
// mma.sync m16n8k16 bf16 products with float32 accumulation. Every operand is float32
// (queries, the ring and entry rows, the probabilities), so each is split into bf16
// halves, hi = bf16(x) and lo = bf16(x − hi), and a product is hi·hi + hi·lo + lo·hi
// (three mma, in that order), as tensorcore.cu does for float32 weights.
//
//   att_dec_keys     (attention.cu) each row's key list, as in the exact mode
//   fast_split       (tensorcore.cu) the queries' halves, a row per (token, head), the
//                    dim padded to 64 with zeros
//   att_tc_logits    a warp per (row, 16 heads, 8·NT keys): lg[t, h, j] = scale·q·k_j,
//                    the keys split in registers; a lane holds 16 consecutive values of
//                    its head rows and key rows a step of 64, tensorcore.cu's permuted
//                    reduction (fast_tile)
//   att_tc_softmax   (attention.cu) att_dec_softmax's maximum and denominator (float64,
//                    key order) and the probabilities as bf16 halves (pp) in the order
//                    the output's lanes load them
//   att_tc_out       a warp per (row, 16 heads, 8·NT values): 16 keys an mma step, lane
//                    (g, t) holding keys 4t..4t+3 of the step (the reduction permuted the
//                    same way for both operands) and, in tile j, value d0 + NT·g + j of
//                    each (so its NT values of a key are one load)
//
// NT is 8 (a launch's wide warps) or 1 (small batches: 8× the warps); each logit and
// output value is the same chain of mma either way, and the chain depends on the head
// dim and the row's key count alone, never on the batch. Consecutive warps are the head
// groups of the same keys or values, so that a launch block's four warps read a key row
// from memory once between them (L1).
//
// The emulated device runs a warp's tile at its lane 0 in plain loops from the same bf16
// halves, each mma's 16 products summed in float32 in k order.

// FastAttArgs: the binder's (ops_attention.go bindAttentionTC) arguments.
struct FastAttArgs {
  const u32* qh; const u32* ql;       // query halves: row t·heads + h, qp pairs each
  const u64* keys; const i64* nkeys;  // att_dec_keys' list: kmax row addresses a token
  double* lg;                         // [T, heads, kmax] logits
  Weight sink;
  const u32* pp;                      // [T, heads, kp] probability halves (att_tc_softmax)
  const double* den;                  // [T, heads] softmax denominators
  float* out;                         // [T, heads·dim]
  const SeqRec* seqs; i64 nseq;
  i64 T; i64 heads; i64 dim; i64 kmax; i64 kp; i64 qp; double scale;
};

#define FATC_HG 16  // heads a warp serves (an mma's rows)

// fatc_load: n consecutive values of a key row from value d, 0 past dim or for no row;
// four a load where the row allows (a row that starts 16-byte aligned, dim a multiple
// of 4).
template <int N>
DEVM void fatc_load(const float* row, i64 d, i64 dim, float* v) {
  if (row && (N & 3) == 0 && (dim & 3) == 0 && d + N <= dim && ((unsigned long long)row & 15) == 0) {
    const float4* p = (const float4*)(row + d);
    UNROLL for (int j = 0; j < N / 4; j++) {
      float4 q = p[j];
      v[4 * j] = q.x, v[4 * j + 1] = q.y, v[4 * j + 2] = q.z, v[4 * j + 3] = q.w;
    }
    return;
  }
  UNROLL for (int j = 0; j < N; j++) v[j] = row && d + j < dim ? row[d + j] : 0.0f;
}

// fatc_hi, fatc_lo: a float32's bf16 halves, as fast_rn makes them.
DEVM float fatc_hi(float v) { return fast_lo(fast_rn(v, 0.0f)); }
DEVM float fatc_lo(float v) { return fast_lo(fast_rn(v - fatc_hi(v), 0.0f)); }

#ifndef DI_EMULATE
// fatc_mma3: a 64-value step of a logits tile, four mma k-steps of the split products
// hi·hi, hi·lo (left out where lo is false: keys without lo halves) and lo·hi, in that
// order; a lane's A halves of rows g (ah0, al0) and g+8 (ah1, al1), B halves bh, bl.
DEVM void fatc_mma3(float* acc, const u32* ah0, const u32* ah1, const u32* al0, const u32* al1, const u32* bh,
                    const u32* bl, bool lo) {
  UNROLL for (int q = 0; q < 4; q++) {
    fast_mma(acc, ah0[2 * q], ah1[2 * q], ah0[2 * q + 1], ah1[2 * q + 1], bh[2 * q], bh[2 * q + 1]);
    if (lo) fast_mma(acc, ah0[2 * q], ah1[2 * q], ah0[2 * q + 1], ah1[2 * q + 1], bl[2 * q], bl[2 * q + 1]);
    fast_mma(acc, al0[2 * q], al1[2 * q], al0[2 * q + 1], al1[2 * q + 1], bh[2 * q], bh[2 * q + 1]);
  }
}

// fatc_dsteps runs a logits tile's 64-value steps up to dp; with one key tile (small
// batches) two steps' loads in flight.
template <int NT, class F>
DEVM void fatc_dsteps(i64 dp, F& dstep) {
  if (NT == 1) {
    UNROLL_BY(2)
    for (i64 d0 = 0; d0 < dp; d0 += 64) dstep(d0);
  } else {
    for (i64 d0 = 0; d0 < dp; d0 += 64) dstep(d0);
  }
}
#endif

// fatc_logits_tile: the logits of heads h0.. (< heads) and keys kb..kb+8·NT (< the row's
// count) of token t.
template <int NT>
DEVM void fatc_logits_tile(const FastAttArgs& a, i64 t, i64 h0, i64 kb, int lane) {
  const i64 nk = a.nkeys[t], dp = 2 * a.qp;
  if (kb >= nk) return;
#ifdef DI_EMULATE
  if (lane != 0) return;
  for (int r = 0; r < FATC_HG && h0 + r < a.heads; r++) {
    const i64 th = t * a.heads + h0 + r;
    const u32 *xh = a.qh + th * a.qp, *xl = a.ql + th * a.qp;
    for (int c = 0; c < 8 * NT && kb + c < nk; c++) {
      const float* row = (const float*)a.keys[t * a.kmax + kb + c];
      float acc = 0;
      for (i64 d0 = 0; d0 < dp; d0 += 64) {
        float qhv[64], qlv[64], khv[64], klv[64];
        for (int u = 0; u < 32; u++) {
          qhv[2 * u] = fast_lo(xh[d0 / 2 + u]), qhv[2 * u + 1] = fast_hi(xh[d0 / 2 + u]);
          qlv[2 * u] = fast_lo(xl[d0 / 2 + u]), qlv[2 * u + 1] = fast_hi(xl[d0 / 2 + u]);
        }
        for (int u = 0; u < 64; u++) {
          float v = d0 + u < a.dim ? row[d0 + u] : 0.0f;
          khv[u] = fatc_hi(v), klv[u] = fatc_lo(v);
        }
        for (int q = 0; q < 4; q++) {
          // mma q's 16 k: lane t's values 4q..4q+3 for t = 0..3
          float hh = 0, hl = 0, lh = 0;
          for (int tq = 0; tq < 4; tq++)
            for (int u = 0; u < 4; u++) {
              int k = 16 * tq + 4 * q + u;
              hh += qhv[k] * khv[k];
              hl += qhv[k] * klv[k];
              lh += qlv[k] * khv[k];
            }
          acc += hh;
          acc += hl;
          acc += lh;
        }
      }
      a.lg[th * a.kmax + kb + c] = (double)acc * a.scale;
    }
  }
#else
  const int g = lane >> 2, tq = lane & 3;
  const int live = (int)imin(NT, (nk - kb + 7) / 8);  // key tiles with keys (every lane alike)
  float acc[NT][4];
  const float* krow[NT];
  UNROLL for (int j = 0; j < NT; j++) {
    acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0;
    i64 k = kb + 8 * j + g;
    krow[j] = k < nk ? (const float*)a.keys[t * a.kmax + k] : 0;
  }
  const i64 ha = h0 + g, hb = h0 + g + 8;
  const i64 ra = (t * a.heads + ha) * a.qp, rb = (t * a.heads + hb) * a.qp;
  auto dstep = [&](i64 d0) {
    u32 ah0[8], al0[8], ah1[8], al1[8];
    const i64 p = d0 / 2 + 8 * tq;
    if (ha < a.heads) {
      const uint4 *h = (const uint4*)(a.qh + ra + p), *l = (const uint4*)(a.ql + ra + p);
      uint4 h0 = h[0], h1 = h[1], l0 = l[0], l1 = l[1];
      ah0[0] = h0.x, ah0[1] = h0.y, ah0[2] = h0.z, ah0[3] = h0.w, ah0[4] = h1.x, ah0[5] = h1.y, ah0[6] = h1.z, ah0[7] = h1.w;
      al0[0] = l0.x, al0[1] = l0.y, al0[2] = l0.z, al0[3] = l0.w, al0[4] = l1.x, al0[5] = l1.y, al0[6] = l1.z, al0[7] = l1.w;
    } else {
      UNROLL for (int u = 0; u < 8; u++) ah0[u] = al0[u] = 0;
    }
    if (hb < a.heads) {
      const uint4 *h = (const uint4*)(a.qh + rb + p), *l = (const uint4*)(a.ql + rb + p);
      uint4 h0 = h[0], h1 = h[1], l0 = l[0], l1 = l[1];
      ah1[0] = h0.x, ah1[1] = h0.y, ah1[2] = h0.z, ah1[3] = h0.w, ah1[4] = h1.x, ah1[5] = h1.y, ah1[6] = h1.z, ah1[7] = h1.w;
      al1[0] = l0.x, al1[1] = l0.y, al1[2] = l0.z, al1[3] = l0.w, al1[4] = l1.x, al1[5] = l1.y, al1[6] = l1.z, al1[7] = l1.w;
    } else {
      UNROLL for (int u = 0; u < 8; u++) ah1[u] = al1[u] = 0;
    }
    UNROLL for (int j = 0; j < NT; j++) {
      if (j >= live) break;
      float v[16];
      fatc_load<16>(krow[j], d0 + 16 * tq, a.dim, v);
      u32 bh[8], bl[8];
      fast_split16(v, bh, bl);
      fatc_mma3(acc[j], ah0, ah1, al0, al1, bh, bl, true);
    }
  };
  fatc_dsteps<NT>(dp, dstep);
  // c0, c1: head g, keys 2t, 2t+1 of the tile; c2, c3: head g+8
  UNROLL for (int j = 0; j < NT; j++) {
    if (j >= live) break;
    UNROLL for (int e = 0; e < 4; e++) {
      i64 h = h0 + g + (e >= 2 ? 8 : 0), k = kb + 8 * j + 2 * tq + (e & 1);
      if (h < a.heads && k < nk) a.lg[(t * a.heads + h) * a.kmax + k] = (double)acc[j][e] * a.scale;
    }
  }
#endif
}

// fatc_logits: warp w = ((token · key chunks) + chunk) · groups + group.
template <int NT>
DEVM void fatc_logits(const FastAttArgs& a, long long GIDX, long long GSTRIDE) {
  const i64 groups = (a.heads + FATC_HG - 1) / FATC_HG, chunks = (a.kmax + 8 * NT - 1) / (8 * NT);
  for (i64 i = GIDX; i < a.T * chunks * groups * 32; i += GSTRIDE) {
    i64 w = i >> 5, grp = w % groups, c = (w / groups) % chunks, t = w / (groups * chunks);
    fatc_logits_tile<NT>(a, t, grp * FATC_HG, c * 8 * NT, (int)(i & 31));
  }
}
KERNEL(att_tc_logits, FastAttArgs) { fatc_logits<8>(a, GIDX, GSTRIDE); }
KERNEL(att_tc_logits_n, FastAttArgs) { fatc_logits<1>(a, GIDX, GSTRIDE); }

// fatc_decode_row reports whether token t is a decode row of one of the step's sequences
// (att_dec_out writes only those).
DEVM bool fatc_decode_row(const FastAttArgs& a, i64 t) {
  const i64 q = seq_find(a.seqs, a.nseq, t);
  return q >= 0 && a.seqs[q].n == 1;
}

// fatc_out_tile: the output values d0..d0+8·NT (< dim) of heads h0.. of token t. pp holds
// a (token, head)'s probabilities four keys to 16 bytes: hi(k, k+1), hi(k+2, k+3),
// lo(k, k+1), lo(k+2, k+3), zero past the row's keys up to a multiple of 16.
template <int NT>
DEVM void fatc_out_tile(const FastAttArgs& a, i64 t, i64 h0, i64 d0, int lane) {
  const i64 nk = a.nkeys[t];
  // att_dec_keys lists keys only for a decode row of a sequence (and every such row has
  // its own key); a row without keys is looked up
  if (nk == 0 && !fatc_decode_row(a, t)) return;
#ifdef DI_EMULATE
  if (lane != 0) return;
  for (int r = 0; r < FATC_HG && h0 + r < a.heads; r++) {
    const i64 th = t * a.heads + h0 + r;
    const u32* pr = a.pp + th * a.kp;
    for (int c = 0; c < 8 * NT && d0 + c < a.dim; c++) {
      float acc = 0;
      for (i64 k0 = 0; k0 < nk; k0 += 16) {
        float hh = 0, hl = 0, lh = 0;
        for (int u = 0; u < 16; u++) {
          i64 k = k0 + u;
          u32 wh = pr[k / 4 * 4 + (k & 3) / 2], wl = pr[k / 4 * 4 + 2 + (k & 3) / 2];
          float ph = (k & 1) ? fast_hi(wh) : fast_lo(wh), pl = (k & 1) ? fast_hi(wl) : fast_lo(wl);
          float v = k < nk ? ((const float*)a.keys[t * a.kmax + k])[d0 + c] : 0.0f;
          float vh = fatc_hi(v), vl = fatc_lo(v);
          hh += ph * vh;
          hl += ph * vl;
          lh += pl * vh;
        }
        acc += hh;
        acc += hl;
        acc += lh;
      }
      a.out[th * a.dim + d0 + c] = (float)((double)acc / a.den[th]);
    }
  }
#else
  const int g = lane >> 2, tq = lane & 3;
  float acc[NT][4];
  UNROLL for (int j = 0; j < NT; j++) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0;
  const i64 ha = h0 + g, hb = h0 + g + 8;
  const uint4* pa = ha < a.heads ? (const uint4*)(a.pp + (t * a.heads + ha) * a.kp) : 0;
  const uint4* pb = hb < a.heads ? (const uint4*)(a.pp + (t * a.heads + hb) * a.kp) : 0;
  const u64* keys = a.keys + t * a.kmax;
  const i64 dl = d0 + NT * g;  // the lane's first value (tile 0)
  UNROLL_BY(2)
  for (i64 k0 = 0; k0 < nk; k0 += 16) {
    const i64 kk = k0 + 4 * tq;
    uint4 A = pa ? pa[kk / 4] : make_uint4(0, 0, 0, 0), B = pb ? pb[kk / 4] : make_uint4(0, 0, 0, 0);
    float v[4][NT];
    UNROLL for (int u = 0; u < 4; u++) fatc_load<NT>(kk + u < nk ? (const float*)keys[kk + u] : 0, dl, a.dim, v[u]);
    UNROLL for (int j = 0; j < NT; j++) {
      u32 bh0 = fast_rn(v[0][j], v[1][j]), bh1 = fast_rn(v[2][j], v[3][j]);
      u32 bl0 = fast_rn(v[0][j] - fast_lo(bh0), v[1][j] - fast_hi(bh0));
      u32 bl1 = fast_rn(v[2][j] - fast_lo(bh1), v[3][j] - fast_hi(bh1));
      fast_mma(acc[j], A.x, B.x, A.y, B.y, bh0, bh1);
      fast_mma(acc[j], A.x, B.x, A.y, B.y, bl0, bl1);
      fast_mma(acc[j], A.z, B.z, A.w, B.w, bh0, bh1);
    }
  }
  // c0, c1: head g, columns 2t, 2t+1 (values d0 + NT·(2t) + j, d0 + NT·(2t+1) + j); c2, c3: head g+8
  UNROLL for (int e = 0; e < 4; e++) {
    const i64 h = h0 + g + (e >= 2 ? 8 : 0);
    if (h >= a.heads) continue;
    const i64 th = t * a.heads + h;
    const double den = a.den[th];
    UNROLL for (int j = 0; j < NT; j++) {
      i64 d = d0 + NT * (2 * tq + (e & 1)) + j;
      if (d < a.dim) a.out[th * a.dim + d] = (float)((double)acc[j][e] / den);
    }
  }
#endif
}

// fatc_out: warp w = ((token · value chunks) + chunk) · groups + group.
template <int NT>
DEVM void fatc_out(const FastAttArgs& a, long long GIDX, long long GSTRIDE) {
  const i64 groups = (a.heads + FATC_HG - 1) / FATC_HG, chunks = (a.dim + 8 * NT - 1) / (8 * NT);
  for (i64 i = GIDX; i < a.T * chunks * groups * 32; i += GSTRIDE) {
    i64 w = i >> 5, grp = w % groups, c = (w / groups) % chunks, t = w / (groups * chunks);
    fatc_out_tile<NT>(a, t, grp * FATC_HG, c * 8 * NT, (int)(i & 31));
  }
}
KERNEL(att_tc_out, FastAttArgs) { fatc_out<8>(a, GIDX, GSTRIDE); }
KERNEL(att_tc_out_n, FastAttArgs) { fatc_out<1>(a, GIDX, GSTRIDE); }

// ---- V4.1's attention logits and output on the tensor cores (fast mode) ----
//
// csa41.cu's split attention (csa_attn_kdec's widened keys, csa_attn_softmax's blocked
// softmax) with its two products as warp tiles of mma.sync, as att_tc_* run V4's:
//
//   csa_tc_logits    a warp per (row, 16 heads, 8·NT keys): pb[t, h, j] = scale·q·k_j
//                    (−inf for an empty slot), the query split into bf16 halves in
//                    registers, the keys' halves as csa_attn_kdec wrote them: qh·kh +
//                    qh·kl + ql·kh (three mma a 16-value step, in that order), the
//                    reduction permuted as fatc_logits_tile's
//   csa_tc_out       a warp per (row, 16 heads, 8·NT values): per softmax block the
//                    block's rescale (csa_attn_softmax's bsc), then its keys 16 an mma
//                    step: p·vh + p·vl (the probabilities are bf16 already:
//                    csa_attn_softmax rounds them), lane (g, t) holding keys 4t..4t+3 of
//                    the step and, in tile j, value d0 + NT·g + j of each; out =
//                    bf16(acc / den)
//
// A row whose keys' lo halves are all 0 (rlo[t] = 0: V4.1's FP8 and FP4 keys are bf16
// values) leaves the mma on kl out: they would add products that are all 0, so the
// values are the same bit for bit, from half the mma of the output and two thirds of
// the logits', and half the keys' bytes. In a row with some, a key's lo halves are read
// only where klo marks them (csa_attn_kdec writes no others): zeros for the rest.
//
// NT is 8 (the wide kernels) or 1 (the narrow ones, 8× the warps, for small steps); each
// logit and output value is the same chain of mma either way, and the chain depends on
// the head dim, the row's key count and the softmax block alone, never on the batch.
// Consecutive warps are the head groups of the same keys or values (a launch block's
// four warps read a key row from memory once between them). A step of keys past the
// row's count or its block's end, and an empty slot, add zeros. The emulated device
// runs a warp's tile at its lane 0 in plain loops from the same bf16 halves, each mma's
// 16 products summed in float32 in the order the lanes harness's mma sums them. Here pb
// is [rows, heads, lmax] (csa_attn_softmax's tc layout: a warp's loads there of adjacent
// keys are adjacent), not the other kernels' [rows, lmax, heads].

// CsaTcArgs: the binder's (ops_csa41.go) arguments, csa41.cu's scratch of the same step.
struct CsaTcArgs {
  const float* q;               // [rows, heads, dim] the queries
  const unsigned short* kh;     // [rows, lmax, dim] the keys' bf16 hi halves (csa_attn_kdec)
  const unsigned short* kl;     // [rows, lmax, dim] their lo halves
  const unsigned char* valid;   // [rows, lmax] whether a key slot holds a key
  const i64* rlen;              // [rows] a row's key count, −1 for a row in no view
  const unsigned* rlo;          // [rows] nonzero where a key's lo half is not 0
  float* pb;                    // [rows, heads, lmax] the logits, then the bf16 probabilities
  const float* bsc;             // [rows, nblk, heads] each block's rescale (< 0: none)
  const float* den;             // [rows, heads] the softmax denominators
  float* out;                   // [rows, heads·dim]
  i64 rows, heads, dim, lmax, nblk, block;
  double scale;
  const unsigned char* klo;     // [rows, lmax] nonzero where the key's lo halves are (written)
};

DEVM float ctc_bf(unsigned short h) { return f32_bits((u32)h << 16); }

// ctc_pairs16: a row of bf16 values' values d..d+15 as 8 pairs (value 2j in the low
// half), 0 past dim or for no row; two 16-byte loads where the row allows.
DEVM void ctc_pairs16(const unsigned short* row, i64 d, i64 dim, u32* p) {
  if (row && (dim & 7) == 0 && d + 16 <= dim && ((unsigned long long)row & 15) == 0) {
    const uint4* r = (const uint4*)(row + d);
    const uint4 x = r[0], y = r[1];
    p[0] = x.x, p[1] = x.y, p[2] = x.z, p[3] = x.w, p[4] = y.x, p[5] = y.y, p[6] = y.z, p[7] = y.w;
    return;
  }
  UNROLL for (int j = 0; j < 8; j++) {
    const u32 a = row && d + 2 * j < dim ? row[d + 2 * j] : 0, b = row && d + 2 * j + 1 < dim ? row[d + 2 * j + 1] : 0;
    p[j] = a | b << 16;
  }
}

// ctc_words: a row of bf16 values' values d..d+N−1 (N = 8 or 1) as (N+1)/2 words,
// value j in half j&1 of word j/2; 0 past dim or for no row; one 16-byte load where the
// row allows.
template <int N>
DEVM void ctc_words(const unsigned short* row, i64 d, i64 dim, u32* w) {
  if (N == 8 && row && (dim & 7) == 0 && d + 8 <= dim && ((unsigned long long)row & 15) == 0) {
    const uint4 x = *(const uint4*)(row + d);
    w[0] = x.x, w[1] = x.y, w[2] = x.z, w[3] = x.w;
    return;
  }
  UNROLL for (int j = 0; j < (N + 1) / 2; j++) {
    const u32 a = row && d + 2 * j < dim ? row[d + 2 * j] : 0, b = N > 1 && row && d + 2 * j + 1 < dim ? row[d + 2 * j + 1] : 0;
    w[j] = a | b << 16;
  }
}
// ctc_pair: value j of words x (low half) and of words y (high half), as one bf16 pair.
DEVM u32 ctc_pair(const u32* x, const u32* y, int j) {
  return j & 1 ? (x[j / 2] >> 16) | (y[j / 2] & 0xffff0000u) : (x[j / 2] & 0xffffu) | (y[j / 2] << 16);
}

// ctc_logits_tile: the logits of heads h0.. (< heads) and keys kb..kb+8·NT (< the row's
// count) of row t.
template <int NT>
DEVM void ctc_logits_tile(const CsaTcArgs& a, i64 t, i64 h0, i64 kb, int lane) {
  const i64 L = a.rlen[t], dp = (a.dim + 63) / 64 * 64;
  if (kb >= L) return;  // past the row's keys, or a row in no view (−1)
  const float scale = (float)a.scale;
  const bool lo = a.rlo[t] != 0;
#ifdef DI_EMULATE
  if (lane != 0) return;
  for (int r = 0; r < FATC_HG && h0 + r < a.heads; r++) {
    const float* qr = a.q + (t * a.heads + h0 + r) * a.dim;
    for (int c = 0; c < 8 * NT && kb + c < L; c++) {
      const i64 tj = t * a.lmax + kb + c;
      const unsigned short *kh = a.kh + tj * a.dim, *kl = a.klo[tj] ? a.kl + tj * a.dim : 0;
      float acc = 0;
      for (i64 d0 = 0; d0 < dp; d0 += 64) {
        float qh[64], ql[64], kvh[64], kvl[64];
        for (int u = 0; u < 64; u++) {
          const bool in = d0 + u < a.dim;
          const float x = in ? qr[d0 + u] : 0.0f;
          qh[u] = fatc_hi(x), ql[u] = fatc_lo(x);
          kvh[u] = in ? ctc_bf(kh[d0 + u]) : 0.0f, kvl[u] = in && kl ? ctc_bf(kl[d0 + u]) : 0.0f;
        }
        for (int q = 0; q < 4; q++) {
          // mma q's 16 k: lane t's values 4q..4q+3 of its 16 for t = 0..3
          float hh = 0, hl = 0, lh = 0;
          for (int tq = 0; tq < 4; tq++)
            for (int u = 0; u < 4; u++) {
              const int k = 16 * tq + 4 * q + u;
              hh += qh[k] * kvh[k];
              hl += qh[k] * kvl[k];
              lh += ql[k] * kvh[k];
            }
          acc += hh;
          if (lo) acc += hl;
          acc += lh;
        }
      }
      a.pb[(t * a.heads + h0 + r) * a.lmax + kb + c] = a.valid[tj] ? acc * scale : -F32_INF;
    }
  }
#else
  const int g = lane >> 2, tq = lane & 3;
  const int live = (int)imin(NT, (L - kb + 7) / 8);  // key tiles with keys (every lane alike)
  float acc[NT][4];
  UNROLL for (int j = 0; j < NT; j++) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0;
  // the lane's key of tile j: kb + 8j + g, its row at kr0 + 8j·dim (hi; lo at kl − kh
  // past it), one pointer kept rather than 2·NT
  const unsigned short* kr0 = a.kh + (t * a.lmax + kb + g) * a.dim;
  const i64 klo = a.kl - a.kh;
  const i64 ha = h0 + g, hb = h0 + g + 8;
  const float* qa = ha < a.heads ? a.q + (t * a.heads + ha) * a.dim : 0;
  const float* qb = hb < a.heads ? a.q + (t * a.heads + hb) * a.dim : 0;
  auto dstep = [&](i64 d0) {
    float v[16];
    u32 ah0[8], al0[8], ah1[8], al1[8];
    fatc_load<16>(qa, d0 + 16 * tq, a.dim, v);
    fast_split16(v, ah0, al0);
    fatc_load<16>(qb, d0 + 16 * tq, a.dim, v);
    fast_split16(v, ah1, al1);
    UNROLL for (int j = 0; j < NT; j++) {
      if (j >= live) break;
      u32 bh[8], bl[8];
      const unsigned short* kr = kb + 8 * j + g < L ? kr0 + 8 * j * a.dim : 0;
      ctc_pairs16(kr, d0 + 16 * tq, a.dim, bh);
      if (lo) ctc_pairs16(kr && a.klo[t * a.lmax + kb + 8 * j + g] ? kr + klo : 0, d0 + 16 * tq, a.dim, bl);
      fatc_mma3(acc[j], ah0, ah1, al0, al1, bh, bl, lo);
    }
  };
  fatc_dsteps<NT>(dp, dstep);
  // c0, c1: head g, keys 2t, 2t+1 of the tile; c2, c3: head g+8
  UNROLL for (int j = 0; j < NT; j++) {
    if (j >= live) break;
    UNROLL for (int e = 0; e < 4; e++) {
      const i64 h = h0 + g + (e >= 2 ? 8 : 0), k = kb + 8 * j + 2 * tq + (e & 1);
      if (h < a.heads && k < L) a.pb[(t * a.heads + h) * a.lmax + k] = a.valid[t * a.lmax + k] ? acc[j][e] * scale : -F32_INF;
    }
  }
#endif
}

// CTC_OUT_AHEAD: the key steps whose operands csa_tc_out_na (the narrow output kernel
// with AHEAD) loads before the first of them is multiplied.
#define CTC_OUT_AHEAD 4
// ctc_out_tile: the output values d0..d0+8·NT (< dim) of heads h0.. of row t (AHEAD,
// narrow only: CTC_OUT_AHEAD steps' operands loaded at once, csa_tc_out_na).
template <int NT, bool AHEAD = false>
DEVM void ctc_out_tile(const CsaTcArgs& a, i64 t, i64 h0, i64 d0, int lane) {
  const i64 L = a.rlen[t];
  if (L < 0) return;  // a row in no view
  const bool lo = a.rlo[t] != 0;
  const unsigned short* kh = a.kh + t * a.lmax * a.dim;
  const unsigned short* kl = a.kl + t * a.lmax * a.dim;
  const float* pr = a.pb + t * a.heads * a.lmax;  // the row's [heads, lmax]
  const unsigned char* vr = a.valid + t * a.lmax;
  const unsigned char* kf = a.klo + t * a.lmax;  // the row's keys with lo halves
#ifdef DI_EMULATE
  if (lane != 0) return;
  for (int r = 0; r < FATC_HG && h0 + r < a.heads; r++) {
    const i64 h = h0 + r, th = t * a.heads + h;
    for (int c = 0; c < 8 * NT && d0 + c < a.dim; c++) {
      float acc = 0;
      for (i64 b = 0; b < L; b += a.block) {
        const float s = a.bsc[(t * a.nblk + b / a.block) * a.heads + h];
        if (s >= 0) acc *= s;
        const i64 be = imin(b + a.block, L);
        for (i64 k0 = b; k0 < be; k0 += 16) {
          float hh = 0, hl = 0;
          for (int u = 0; u < 16; u++) {
            const i64 k = k0 + u;
            const bool ok = k < be && vr[k];
            const float p = ok ? pr[h * a.lmax + k] : 0.0f;
            hh += p * (ok ? ctc_bf(kh[k * a.dim + d0 + c]) : 0.0f);
            hl += p * (ok && kf[k] ? ctc_bf(kl[k * a.dim + d0 + c]) : 0.0f);
          }
          acc += hh;
          if (lo) acc += hl;
        }
      }
      a.out[th * a.dim + d0 + c] = q_bf16(acc / a.den[th]);
    }
  }
#else
  const int g = lane >> 2, tq = lane & 3;
  float acc[NT][4];
  UNROLL for (int j = 0; j < NT; j++) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0;
  const i64 ha = h0 + g, hb = h0 + g + 8;
  const bool ina = ha < a.heads, inb = hb < a.heads;
  const i64 dl = d0 + NT * g;  // the lane's first value (tile 0)
  for (i64 b = 0; b < L; b += a.block) {
    const float* bs = a.bsc + (t * a.nblk + b / a.block) * a.heads;
    const float sa = ina ? bs[ha] : -1.0f, sb = inb ? bs[hb] : -1.0f;
    UNROLL for (int j = 0; j < NT; j++) {
      if (sa >= 0) acc[j][0] *= sa, acc[j][1] *= sa;
      if (sb >= 0) acc[j][2] *= sb, acc[j][3] *= sb;
    }
    const i64 be = imin(b + a.block, L);
    if constexpr (NT == 1 && AHEAD) {
      // (csa_tc_out_na: the narrow kernel, for small steps, where a warp's keys are a
      // serial chain of loads and mma: CTC_OUT_AHEAD steps' flags, probabilities and values
      // loaded before the first step's mma, the same mma in the same order)
      for (i64 kg = b; kg < be; kg += 16 * CTC_OUT_AHEAD) {
        float pa[CTC_OUT_AHEAD][4], pq[CTC_OUT_AHEAD][4];
        u32 vh[CTC_OUT_AHEAD][4][1], vl[CTC_OUT_AHEAD][4][1];
        UNROLL for (int st = 0; st < CTC_OUT_AHEAD; st++) {
          const i64 kk = kg + 16 * st + 4 * tq;
          UNROLL for (int u = 0; u < 4; u++) {
            const i64 k = kk + u;
            const bool ok = k < be && vr[k];
            pa[st][u] = ok && ina ? pr[ha * a.lmax + k] : 0.0f;
            pq[st][u] = ok && inb ? pr[hb * a.lmax + k] : 0.0f;
            ctc_words<1>(ok ? kh + k * a.dim : 0, dl, a.dim, vh[st][u]);
            if (lo) ctc_words<1>(ok && kf[k] ? kl + k * a.dim : 0, dl, a.dim, vl[st][u]);
          }
        }
        UNROLL for (int st = 0; st < CTC_OUT_AHEAD; st++) {
          if (kg + 16 * st >= be) break;
          const u32 A0 = fast_rn(pa[st][0], pa[st][1]), A1 = fast_rn(pq[st][0], pq[st][1]), A2 = fast_rn(pa[st][2], pa[st][3]),
                    A3 = fast_rn(pq[st][2], pq[st][3]);
          fast_mma(acc[0], A0, A1, A2, A3, ctc_pair(vh[st][0], vh[st][1], 0), ctc_pair(vh[st][2], vh[st][3], 0));
          if (lo) fast_mma(acc[0], A0, A1, A2, A3, ctc_pair(vl[st][0], vl[st][1], 0), ctc_pair(vl[st][2], vl[st][3], 0));
        }
      }
    } else {
      UNROLL_BY(2)
      for (i64 k0 = b; k0 < be; k0 += 16) {
        const i64 kk = k0 + 4 * tq;
        float pa[4], pq[4];
        u32 vh[4][(NT + 1) / 2], vl[4][(NT + 1) / 2];
        UNROLL for (int u = 0; u < 4; u++) {
          const i64 k = kk + u;
          const bool ok = k < be && vr[k];
          pa[u] = ok && ina ? pr[ha * a.lmax + k] : 0.0f;
          pq[u] = ok && inb ? pr[hb * a.lmax + k] : 0.0f;
          ctc_words<NT>(ok ? kh + k * a.dim : 0, dl, a.dim, vh[u]);
          if (lo) ctc_words<NT>(ok && kf[k] ? kl + k * a.dim : 0, dl, a.dim, vl[u]);
        }
        const u32 A0 = fast_rn(pa[0], pa[1]), A1 = fast_rn(pq[0], pq[1]), A2 = fast_rn(pa[2], pa[3]), A3 = fast_rn(pq[2], pq[3]);
        UNROLL for (int j = 0; j < NT; j++) {
          fast_mma(acc[j], A0, A1, A2, A3, ctc_pair(vh[0], vh[1], j), ctc_pair(vh[2], vh[3], j));
          if (lo) fast_mma(acc[j], A0, A1, A2, A3, ctc_pair(vl[0], vl[1], j), ctc_pair(vl[2], vl[3], j));
        }
      }
    }
  }
  // c0, c1: head g, columns 2t, 2t+1 (values d0 + NT·(2t) + j, d0 + NT·(2t+1) + j); c2, c3: head g+8
  UNROLL for (int e = 0; e < 4; e++) {
    const i64 h = h0 + g + (e >= 2 ? 8 : 0);
    if (h >= a.heads) continue;
    const i64 th = t * a.heads + h;
    const float den = a.den[th];
    UNROLL for (int j = 0; j < NT; j++) {
      const i64 d = d0 + NT * (2 * tq + (e & 1)) + j;
      if (d < a.dim) a.out[th * a.dim + d] = q_bf16(acc[j][e] / den);
    }
  }
#endif
}

// warp w = ((row · chunks) + chunk) · groups + group, chunks of 8·NT keys (logits) or
// values (output)
template <int NT, bool OUT, bool AHEAD = false>
DEVM void ctc_run(const CsaTcArgs& a, long long GIDX, long long GSTRIDE) {
  const i64 groups = (a.heads + FATC_HG - 1) / FATC_HG, chunks = ((OUT ? a.dim : a.lmax) + 8 * NT - 1) / (8 * NT);
  for (i64 i = GIDX; i < a.rows * chunks * groups * 32; i += GSTRIDE) {
    const i64 w = i >> 5, grp = w % groups, c = (w / groups) % chunks, t = w / (groups * chunks);
    if (OUT) ctc_out_tile<NT, AHEAD>(a, t, grp * FATC_HG, c * 8 * NT, (int)(i & 31));
    else ctc_logits_tile<NT>(a, t, grp * FATC_HG, c * 8 * NT, (int)(i & 31));
  }
}
// (no register bound: run 17b's at 128 registers, four blocks a multiprocessor, spilled —
// 3.8 M local requests in a batch-256 csa_tc_logits — and the output took 2.68 ms a step
// against 17a's 1.71 unbounded)
KERNEL(csa_tc_logits, CsaTcArgs) { ctc_run<8, false>(a, GIDX, GSTRIDE); }
KERNEL(csa_tc_logits_n, CsaTcArgs) { ctc_run<1, false>(a, GIDX, GSTRIDE); }
KERNEL(csa_tc_out, CsaTcArgs) { ctc_run<8, true>(a, GIDX, GSTRIDE); }
KERNEL(csa_tc_out_n, CsaTcArgs) { ctc_run<1, true>(a, GIDX, GSTRIDE); }
// csa_tc_out_na: csa_tc_out_n with CTC_OUT_AHEAD key steps' operands loaded before the
// first of them is multiplied (the same mma, the same values; DEEPINFER_CUDA_ATT_AHEAD=1)
KERNEL(csa_tc_out_na, CsaTcArgs) { ctc_run<1, true, true>(a, GIDX, GSTRIDE); }

// ---- V4.1's attention in one launch (csa_tc_fused; fast mode) ----
//
// csa_tc_logits, csa_attn_softmax and csa_tc_out for one row and CTF_HC heads in one
// launch block of CTF_NT threads, block after block of the blocked softmax, the keys
// and the logits never leaving the multiprocessor: the row's query halves (fast_rn's
// hi and lo pairs, zero past the dim and the heads) are staged once in shared memory, each
// softmax block's keys (csa_attn_kdec's hi halves) are copied by cp.async into one of
// two stages while the block before is worked on, and per block
//   logits    warp w = (head group w / 4 of 16, key tiles 2·(w % 4) and the next of 8
//             keys): ctc_logits_tile's chain of mma from the staged operands, into S
//   softmax   warp w: heads w, w + 8, … of the block's CTF_HC (softmax_block, as
//             csa_attn_softmax runs it; for a block of 64 keys, the four at once,
//             softmax_block64), the probabilities in place of the logits in S and each
//             head's rescale in bsc
//   output    warp w = (head group w / 4, value chunks 2·(w % 4) and the next of 64):
//             ctc_out_tile's rescale and chain of mma from S and the staged keys, the
//             accumulators held across the blocks.
// Every logit, probability, sum and output is the same operation on the same operands
// as in the split kernels, so the values are the same bit for bit. The lo halves of a
// row that has them (rlo) are read from global memory where klo marks them, as the
// split kernels read them. A softmax block of at most CTF_KB keys, a head dim of at most
// CTF_DMAX, a multiple of 8 (16-byte copies); the binder (ops_csa41.go) keeps other
// shapes on the split kernels. The emulated device runs the split kernels' emulated
// code for the block's row and heads, through the global scratch they use.
#define CTF_HC 32
#define CTF_KB 64
#define CTF_NT 256
#define CTF_DMAX 512
struct CsaFusedArgs {
  CsaTcArgs tc;
  Weight sink;  // [heads] the sink logits (csa_attn_softmax's)
  float* ps;    // [rows, heads, lmax] the unrounded probabilities (the emulated device's)
};
// ctf_rs: u32 words a staged row (a query's halves or a key's): the dim rounded up to
// 64 values as pairs, and 16 bytes more, so that rows g and g + 1 of a quarter warp's
// 16-byte reads fall on other banks.
DEV i64 ctf_rs(i64 dim) { return (dim + 63) / 64 * 32 + 4; }
// ctf_smem: the shared bytes a block of nw warps takes (ops_csa41.go's csaFusedShared:
// the same).
DEV i64 ctf_smem(i64 dim, i64 nw = 8) {
  return 4 * ctf_rs(dim) * (2 * CTF_HC + 2 * CTF_KB) + 4 * CTF_HC * (CTF_KB + 4) + 4 * nw * CTF_KB + 8 * CTF_HC + CTF_KB;
}

// ctf_krow / ctf_key: the second form's stage row of key k of a softmax block, and the
// key of stage row r: in each 16 keys, keys 0, 1, 4, 5, 8, 9, 12, 13 in rows 0-7 and
// 2, 3, 6, 7, 10, 11, 14, 15 in rows 8-15 (the output's ldmatrix then reads 8 adjacent
// rows a matrix, no bank conflicts; the logits' tiles take the keys of 8 adjacent rows)
DEV int ctf_krow(int k) { return (k & ~15) | ((k >> 1) & 1) << 3 | ((k >> 2) & 3) << 1 | (k & 1); }
DEV int ctf_key(int r) { return (r & ~15) | ((r >> 1) & 3) << 2 | ((r >> 3) & 1) << 1 | (r & 1); }

#ifdef DI_EMULATE
DEVM void ctf_row(const CsaFusedArgs& f, i64 t, i64 h0) {
  const CsaTcArgs& a = f.tc;
  const i64 L = a.rlen[t], he = imin(h0 + CTF_HC, a.heads);
  if (L < 0) return;
  for (i64 hg = h0; hg < he; hg += FATC_HG)
    for (i64 kb = 0; kb < L; kb += 8) ctc_logits_tile<1>(a, t, hg, kb, 0);
  for (i64 h = h0; h < he; h++) {
    const i64 it = t * a.heads + h;
    float* pr = a.pb + it * a.lmax;
    float m = -F32_INF, sum = 0;
    for (i64 b = 0; b < L; b += a.block)
      softmax_block(pr + b, 1, a.valid + t * a.lmax + b, f.ps + it * a.lmax + b, imin(a.block, L - b), 0,
                    (float*)a.bsc + (t * a.nblk + b / a.block) * a.heads + h, m, sum);
    ((float*)a.den)[it] = sum + (float)exp((double)(wval(f.sink, 0, h) - m));
  }
  // (ctc_out_tile's heads h0.. of a group of 16: only this block's)
  for (i64 hg = h0; hg < he; hg += FATC_HG)
    for (i64 d0 = 0; d0 < a.dim; d0 += 8) ctc_out_tile<1>(a, t, hg, d0, 0);
}
#else
// ctf_ldsm4t: ldmatrix .x4 .trans: four 8×8 matrices of bf16 values, lanes 8m..8m+7
// giving the 16-byte rows of matrix m (p: the lane's row, in shared memory); r[m] is
// lane (g, t)'s values at column g of rows 2t and 2t + 1 (the low half first): an mma's
// B fragment where the rows are its k and the columns its n.
#ifdef DI_LANES
DEV void ctf_ldsm4t(u32* r, const u32* p) { lanes_ldsm4t(r, p); }
#else
DEV void ctf_ldsm4t(u32* r, const u32* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
#endif
// ctf_q16: the staged query halves of local head r, pairs p..p+7 (16 values): hi to h,
// lo to l.
DEVM void ctf_q16(const u32* qh, const u32* ql, i64 rs, int r, i64 p, u32* h, u32* l) {
  const uint4* x = (const uint4*)(qh + r * rs + p);
  const uint4* y = (const uint4*)(ql + r * rs + p);
  const uint4 x0 = x[0], x1 = x[1], y0 = y[0], y1 = y[1];
  h[0] = x0.x, h[1] = x0.y, h[2] = x0.z, h[3] = x0.w, h[4] = x1.x, h[5] = x1.y, h[6] = x1.z, h[7] = x1.w;
  l[0] = y0.x, l[1] = y0.y, l[2] = y0.z, l[3] = y0.w, l[4] = y1.x, l[5] = y1.y, l[6] = y1.z, l[7] = y1.w;
}
template <bool V2, int NW = 8>
DEVM void ctf_row(const CsaFusedArgs& f, i64 t, i64 h0, int tid, unsigned char* sm) {
  const CsaTcArgs& a = f.tc;
  const i64 L = a.rlen[t];
  if (L < 0) return;  // a row in no view (the block's threads alike)
  const i64 dp = (a.dim + 63) / 64 * 64, rs = ctf_rs(a.dim), SS = CTF_KB + 4;
  u32* qh = (u32*)sm;                            // [CTF_HC][rs] the query's hi pairs
  u32* ql = qh + CTF_HC * rs;                    // [CTF_HC][rs] its lo pairs
  u32* ks = ql + CTF_HC * rs;                    // [2][CTF_KB][rs] two stages of keys (hi pairs)
  float* S = (float*)(ks + 2 * CTF_KB * rs);     // [CTF_HC][SS] a block's logits, then probabilities
  float* PS = S + CTF_HC * SS;                   // [NW][CTF_KB] a warp's unrounded probabilities
  float* bsc = PS + NW * CTF_KB;                 // [CTF_HC] the block's rescales
  float* den = bsc + CTF_HC;                     // [CTF_HC] the denominators
  unsigned char* vs = (unsigned char*)(den + CTF_HC);  // [CTF_KB] the block's valid keys
  const int w = tid >> 5, lane = tid & 31, g = lane >> 2, tq = lane & 3;
  // NW warps: HW a head group (16 heads), each with TPW key tiles of the logits and TPW
  // chunks of 64 output values; NT threads
  constexpr int HW = NW / 2, TPW = 16 / NW, NT = 32 * NW;
  static_assert(NW == 8 || (NW == 16 && V2), "8 warps, or 16 in the second form");
  const int hg = w / HW, part = w % HW;
  const bool lo = a.rlo[t] != 0;
  const float scale = (float)a.scale;
  const unsigned short* khr = a.kh + t * a.lmax * a.dim;  // the row's keys
  // the query's halves, a pair a thread at a time (fast_split16's pairs); V2: in the
  // order of the logits' mma A fragments, (head group of 16, 64-value step ds, mma q of
  // the step, lane (g, t), its four words: pairs 32·ds + 8t + 2q and the next of heads g
  // and g + 8), so that a lane's fragment is one 16-byte read
  const u32 pairs = (u32)(dp / 2);  // (32-bit quotients: a 64-bit division is a long call on the device)
  const u32 nds = (u32)(dp / 64);
  for (u32 i = (u32)tid; i < CTF_HC * pairs; i += NT) {
    const u32 r = i / pairs, p = i - r * pairs;
    u32 at = r * (u32)rs + p;
    if constexpr (V2) {
      const u32 pin = p & 31, e = ((r >> 3) & 1) | ((pin & 1) << 1);
      at = ((((r >> 4) * nds + (p >> 5)) * 4 + ((pin & 7) >> 1)) * 32 + (r & 7) * 4 + (pin >> 3)) * 4 + e;
    }
    const i64 h = h0 + r;
    float v0 = 0, v1 = 0;
    if (h < a.heads) {
      const float* q = a.q + (t * a.heads + h) * a.dim;
      if (2 * p < a.dim) v0 = q[2 * p];
      if (2 * p + 1 < a.dim) v1 = q[2 * p + 1];
    }
    const u32 hh = fast_rn(v0, v1);
    qh[at] = hh;
    ql[at] = fast_rn(v0 - fast_lo(hh), v1 - fast_hi(hh));
  }
  // stage s ← keys b.. of the row (16-byte copies), every one of its CTF_KB rows: zeros
  // past the dim, past the block's keys and for keys not valid (whose widened values
  // csa_attn_kdec may not have written: V2's output multiplies every staged row); a
  // thread's copies (r, c) step by NT through the rows of cpr copies, no division
  const u32 cpr = (u32)(dp / 8), rstep = NT / cpr, cstep = NT - rstep * cpr;
  const u32 r0 = (u32)tid / cpr, c0 = (u32)tid - r0 * cpr;
  const unsigned char* vrow = a.valid + t * a.lmax;
  auto issue = [&](i64 b, int s) {
    u32* dst = ks + s * CTF_KB * rs;
    const u32 n = (u32)imin(a.block, L - b);
    if constexpr (!V2) {
      // (the first form: the block's keys alone, a division a copy)
      for (u32 i = (u32)tid; i < n * cpr; i += NT) {
        const u32 r = i / cpr, c = i - r * cpr;
        const bool in = 8 * c < a.dim;
        fast_cp16(dst + r * rs + 4 * c, in ? khr + (b + r) * a.dim + 8 * c : a.kh, in);
      }
      fast_cp_commit();
      return;
    }
    const unsigned short* src = khr + b * a.dim;
    for (u32 r = r0, c = c0; r < CTF_KB;) {
      const bool in = r < n && 8 * c < a.dim && vrow[b + r];
      fast_cp16(dst + ctf_krow((int)r) * rs + 4 * c, in ? src + r * a.dim + 8 * c : a.kh, in);
      c += cstep, r += rstep;
      if (c >= cpr) c -= cpr, r++;
    }
    fast_cp_commit();
  };
  const i64 nb = L > 0 ? (L + a.block - 1) / a.block : 0;
  float m[CTF_HC / NW], sum[CTF_HC / NW];
  UNROLL for (int u = 0; u < CTF_HC / NW; u++) m[u] = -F32_INF, sum[u] = 0;
  float acc[TPW][8][4];
  UNROLL for (int c = 0; c < TPW; c++) {
    UNROLL for (int j = 0; j < 8; j++) acc[c][j][0] = acc[c][j][1] = acc[c][j][2] = acc[c][j][3] = 0;
  }
  const int hla = 16 * hg + g, hlb = hla + 8;  // the lane's local heads (mma rows g, g + 8)
  const bool ina = h0 + hla < a.heads, inb = h0 + hlb < a.heads;
  if (nb > 0) issue(0, 0);
  for (i64 bi = 0; bi < nb; bi++) {
    const i64 b = bi * a.block, bl = imin(a.block, L - b);
    if (bi + 1 < nb) issue(b + a.block, (int)((bi + 1) & 1));
    else fast_cp_commit();  // (an empty group: the wait below leaves one in flight)
    for (i64 i = tid; i < CTF_KB; i += NT) vs[i] = i < bl && a.valid[t * a.lmax + b + i];
    fast_cp_wait<1>();
    __syncthreads();  // the stage, vs, and (the first time) the query
    const u32* kst = ks + (bi & 1) * CTF_KB * rs;
    // the logits: tiles j of 8 keys, rows 16·hg + g and + 8
    {
      // (V2: tiles 2G and 2G + 1 hold the keys of 16-key group G, in ctf_krow's rows)
      const int j0 = TPW * part, live = (int)imin(TPW, imax(0, (V2 ? 2 * ((bl + 15) / 16) : (bl + 7) / 8) - j0));
      if (live > 0) {
        float c[TPW][4];
        UNROLL for (int jj = 0; jj < TPW; jj++) c[jj][0] = c[jj][1] = c[jj][2] = c[jj][3] = 0;
        for (i64 d0 = 0; d0 < dp; d0 += 64) {
          const i64 p = d0 / 2 + 8 * tq;
          u32 ah0[8], al0[8], ah1[8], al1[8];
          uint4 fh[4], fl[4];  // (V2: the fragments of mma q)
          if constexpr (V2) {
            const uint4* xh = (const uint4*)qh + ((hg * nds + (u32)(d0 / 64)) * 4) * 32 + lane;
            const uint4* xl = (const uint4*)ql + ((hg * nds + (u32)(d0 / 64)) * 4) * 32 + lane;
            UNROLL for (int q = 0; q < 4; q++) fh[q] = xh[32 * q], fl[q] = xl[32 * q];
          } else {
            ctf_q16(qh, ql, rs, hla, p, ah0, al0);
            ctf_q16(qh, ql, rs, hlb, p, ah1, al1);
          }
          if constexpr (!V2) {
            // (the first form: a tile's keys loaded, then its chain)
            UNROLL for (int jj = 0; jj < TPW; jj++) {
              if (jj >= live) break;
              const int kr = 8 * (j0 + jj) + g;
              u32 bh[8], bq[8];
              const uint4* kp = (const uint4*)(kst + kr * rs + p);
              const uint4 k0 = kp[0], k1 = kp[1];
              bh[0] = k0.x, bh[1] = k0.y, bh[2] = k0.z, bh[3] = k0.w, bh[4] = k1.x, bh[5] = k1.y, bh[6] = k1.z, bh[7] = k1.w;
              if (lo) {
                const i64 k = b + kr;
                ctc_pairs16(k < L && a.klo[t * a.lmax + k] ? a.kl + (t * a.lmax + k) * a.dim : 0, d0 + 16 * tq, a.dim, bq);
              }
              fatc_mma3(c[jj], ah0, ah1, al0, al1, bh, bq, lo);
            }
            continue;
          }
          // the lane's keys of the two tiles (hi pairs from the stage; lo from global memory)
          u32 bh[TPW][8], bq[TPW][8];
          UNROLL for (int jj = 0; jj < TPW; jj++) {
            if (jj >= live) break;
            const int kr = 8 * (j0 + jj) + g;  // the lane's stage row (key ctf_key(kr))
            const uint4* kp = (const uint4*)(kst + kr * rs + p);
            const uint4 k0 = kp[0], k1 = kp[1];
            bh[jj][0] = k0.x, bh[jj][1] = k0.y, bh[jj][2] = k0.z, bh[jj][3] = k0.w;
            bh[jj][4] = k1.x, bh[jj][5] = k1.y, bh[jj][6] = k1.z, bh[jj][7] = k1.w;
            if (lo) {
              const i64 k = b + ctf_key(kr);
              ctc_pairs16(k < L && a.klo[t * a.lmax + k] ? a.kl + (t * a.lmax + k) * a.dim : 0, d0 + 16 * tq, a.dim, bq[jj]);
            }
          }
          {
            // fatc_mma3's chain for each tile (the same mma in the same order an
            // accumulator), the two tiles' chains interleaved
            UNROLL for (int q = 0; q < 4; q++) {
              UNROLL for (int jj = 0; jj < TPW; jj++) {
                if (jj >= live) break;
                fast_mma(c[jj], fh[q].x, fh[q].y, fh[q].z, fh[q].w, bh[jj][2 * q], bh[jj][2 * q + 1]);
              }
              if (lo) {
                UNROLL for (int jj = 0; jj < TPW; jj++) {
                  if (jj >= live) break;
                  fast_mma(c[jj], fh[q].x, fh[q].y, fh[q].z, fh[q].w, bq[jj][2 * q], bq[jj][2 * q + 1]);
                }
              }
              UNROLL for (int jj = 0; jj < TPW; jj++) {
                if (jj >= live) break;
                fast_mma(c[jj], fl[q].x, fl[q].y, fl[q].z, fl[q].w, bh[jj][2 * q], bh[jj][2 * q + 1]);
              }
            }
          }
        }
        // c0, c1: head g, keys 2t, 2t+1 of the tile; c2, c3: head g+8
        UNROLL for (int jj = 0; jj < TPW; jj++) {
          if (jj >= live) break;
          UNROLL for (int e = 0; e < 4; e++) {
            const int hl = e >= 2 ? hlb : hla, k0 = 8 * (j0 + jj) + 2 * tq + (e & 1), k = V2 ? ctf_key(k0) : k0;
            if (k < bl) S[hl * SS + k] = vs[k] ? c[jj][e] * scale : -F32_INF;
          }
        }
      }
    }
    __syncthreads();
    // the softmax of the block: warp w's heads w, w + 8, … (a block of 64 keys: the four
    // at once, softmax_block64; past the heads too, whose values no one reads)
    if (bl == 64) {
      float* pr[CTF_HC / NW];
      float* bp[CTF_HC / NW];
      UNROLL for (int u = 0; u < CTF_HC / NW; u++) pr[u] = S + (w + NW * u) * SS, bp[u] = bsc + w + NW * u;
      softmax_block64<CTF_HC / NW>(pr, 1, vs, lane, bp, m, sum);
    } else {
      UNROLL for (int u = 0; u < CTF_HC / NW; u++) {
        const int hl = w + NW * u;
        if (h0 + hl >= a.heads) continue;  // (the warp's lanes alike)
        softmax_block(S + hl * SS, 1, vs, PS + w * CTF_KB, bl, lane, bsc + hl, m[u], sum[u]);
        __syncwarp();  // (PS is the next head's)
      }
    }
    __syncthreads();
    // the output: the block's rescale, then its keys 16 an mma step
    {
      const float sa = ina ? bsc[hla] : -1.0f, sb = inb ? bsc[hlb] : -1.0f;
      UNROLL for (int cc = 0; cc < TPW; cc++) {
        UNROLL for (int j = 0; j < 8; j++) {
          if (sa >= 0) acc[cc][j][0] *= sa, acc[cc][j][1] *= sa;
          if (sb >= 0) acc[cc][j][2] *= sb, acc[cc][j][3] *= sb;
        }
      }
      const int ch0 = TPW * part;  // the warp's first chunk of 64 values
      const int clive = (int)imin(TPW, imax(0, dp / 64 - ch0));
      if (V2 && !lo) {
        // V2 (rows without lo halves): tile j of chunk cc holds values 64·(ch0 + cc) + 8j
        // + n (n the mma's column) and each pair of tiles' B fragments is one ldmatrix
        // from the stage, the lane of matrix m giving the row of key k0 + 4(r / 2) +
        // (r % 2) + 2(m % 2) (r = lane % 8), stage row k0 + r + 8(m % 2) (ctf_krow): the
        // keys of the mma's k the split kernels give it (lane t's 4t, 4t + 1 and 4t + 2,
        // 4t + 3), so each value's chain of products is theirs; keys not valid or past
        // the block are zero rows of the stage (issue) with probabilities 0, as the split
        // kernels' zeros are
        const int lm = lane >> 3, lr = lane & 7;
        const u32* krow = kst + (lr + 8 * (lm & 1)) * rs + 4 * (lm >> 1) + 32 * ch0;
        for (i64 k0 = 0; k0 < bl; k0 += 16) {
          // the lane's four keys' probabilities of its two heads and their flags, one
          // 16-byte read each (rows of SS floats, 16-byte aligned; vs is 0 past the block)
          const int kq = (int)k0 + 4 * tq;
          const float4 xa = *(const float4*)(S + hla * SS + kq), xb = *(const float4*)(S + hlb * SS + kq);
          const u32 vq = *(const u32*)(vs + kq);
          const float fa[4] = {xa.x, xa.y, xa.z, xa.w}, fb[4] = {xb.x, xb.y, xb.z, xb.w};
          float pa[4], pq[4];
          UNROLL for (int u = 0; u < 4; u++) {
            const bool ok = ((vq >> (8 * u)) & 0xff) != 0;
            pa[u] = ok && ina ? fa[u] : 0.0f;
            pq[u] = ok && inb ? fb[u] : 0.0f;
          }
          const u32 A0 = fast_rn(pa[0], pa[1]), A1 = fast_rn(pq[0], pq[1]), A2 = fast_rn(pa[2], pa[3]), A3 = fast_rn(pq[2], pq[3]);
          UNROLL for (int cc = 0; cc < TPW; cc++) {
            if (cc >= clive) break;
            UNROLL for (int jp = 0; jp < 4; jp++) {
              u32 bf[4];
              ctf_ldsm4t(bf, krow + k0 * rs + 32 * cc + 8 * jp);
              fast_mma(acc[cc][2 * jp], A0, A1, A2, A3, bf[0], bf[1]);
              fast_mma(acc[cc][2 * jp + 1], A0, A1, A2, A3, bf[2], bf[3]);
            }
          }
        }
      } else
      for (i64 k0 = 0; k0 < bl; k0 += 16) {
        const i64 kk = k0 + 4 * tq;
        float pa[4], pq[4];
        u32 vh[TPW][4][4], vl[TPW][4][4];
        UNROLL for (int u = 0; u < 4; u++) {
          const i64 k = kk + u;
          const bool ok = k < bl && vs[k];
          pa[u] = ok && ina ? S[hla * SS + k] : 0.0f;
          pq[u] = ok && inb ? S[hlb * SS + k] : 0.0f;
          UNROLL for (int cc = 0; cc < TPW; cc++) {
            const i64 dl = 64 * (ch0 + cc) + 8 * g;  // the lane's first value (tile 0)
            if (ok && cc < clive) {
              const uint4 x = *(const uint4*)(kst + (V2 ? ctf_krow((int)k) : k) * rs + dl / 2);
              vh[cc][u][0] = x.x, vh[cc][u][1] = x.y, vh[cc][u][2] = x.z, vh[cc][u][3] = x.w;
            } else {
              vh[cc][u][0] = vh[cc][u][1] = vh[cc][u][2] = vh[cc][u][3] = 0;
            }
            if (lo) ctc_words<8>(ok && cc < clive && a.klo[t * a.lmax + b + k] ? a.kl + (t * a.lmax + b + k) * a.dim : 0, dl, a.dim, vl[cc][u]);
          }
        }
        const u32 A0 = fast_rn(pa[0], pa[1]), A1 = fast_rn(pq[0], pq[1]), A2 = fast_rn(pa[2], pa[3]), A3 = fast_rn(pq[2], pq[3]);
        UNROLL for (int cc = 0; cc < TPW; cc++) {
          if (cc >= clive) break;
          UNROLL for (int j = 0; j < 8; j++) {
            fast_mma(acc[cc][j], A0, A1, A2, A3, ctc_pair(vh[cc][0], vh[cc][1], j), ctc_pair(vh[cc][2], vh[cc][3], j));
            if (lo) fast_mma(acc[cc][j], A0, A1, A2, A3, ctc_pair(vl[cc][0], vl[cc][1], j), ctc_pair(vl[cc][2], vl[cc][3], j));
          }
        }
      }
    }
    __syncthreads();  // (the next copies overwrite the stage before this one, and S)
  }
  // the denominators: the sink's term last (csa_attn_softmax's)
  UNROLL for (int u = 0; u < CTF_HC / NW; u++) {
    const int hl = w + NW * u;
    if (lane == 0 && h0 + hl < a.heads) den[hl] = sum[u] + (float)exp((double)(wval(f.sink, 0, h0 + hl) - m[u]));
  }
  __syncthreads();
  // c0, c1: head g, columns 2t, 2t+1 (values d0 + 8·(2t) + j, d0 + 8·(2t+1) + j); c2, c3: head g+8
  UNROLL for (int e = 0; e < 4; e++) {
    const int hl = e >= 2 ? hlb : hla;
    const i64 h = h0 + hl;
    if (h >= a.heads) continue;
    const i64 th = t * a.heads + h;
    const float dn = den[hl];
    UNROLL for (int cc = 0; cc < TPW; cc++) {
      UNROLL for (int j = 0; j < 8; j++) {
        const i64 d = 64 * (TPW * part + cc) + (V2 && !lo ? 8 * j + 2 * tq + (e & 1) : 8 * (2 * tq + (e & 1)) + j);
        if (d < a.dim) a.out[th * a.dim + d] = q_bf16(acc[cc][j][e] / dn);
      }
    }
  }
}
#endif
// ctf_launch: a launch block of 32·NW threads per (row, CTF_HC heads): block i = row ·
// groups + group (the emulated device: one item a block, the split kernels' code)
template <bool V2, int NW>
DEVM void ctf_launch(const CsaFusedArgs& a, i64 GIDX, i64 GSTRIDE) {
  const i64 groups = (a.tc.heads + CTF_HC - 1) / CTF_HC;
#ifdef DI_EMULATE
  for (i64 i = GIDX; i < a.tc.rows * groups; i += GSTRIDE) ctf_row(a, i / groups, i % groups * CTF_HC);
#else
  constexpr i64 NT = 32 * NW;
  DYN_SHARED(ctf_sm);
  for (i64 i = GIDX; i < a.tc.rows * groups * NT; i += GSTRIDE) {
    const i64 blk = i / NT;
    ctf_row<V2, NW>(a, blk / groups, blk % groups * CTF_HC, (int)(i % NT), ctf_sm);
  }
#endif
}
#undef KERNEL_BOUNDS
#define KERNEL_BOUNDS __launch_bounds__(CTF_NT, 1)
KERNEL(csa_tc_fused, CsaFusedArgs) { ctf_launch<false, 8>(a, GIDX, GSTRIDE); }
// csa_tc_fused2: the second form (ctf_row's V2; DEEPINFER_CUDA_ATT_FUSED_FORM=2): the query staged in the logits' fragment order, the two
// key tiles' chains of mma interleaved, the output's key fragments by ldmatrix, the
// keys staged in the output's row order without a division a copy. The same values as
// csa_tc_fused.
KERNEL(csa_tc_fused2, CsaFusedArgs) { ctf_launch<true, 8>(a, GIDX, GSTRIDE); }
// csa_tc_fused3: the second form in a launch block of 16 warps (CTF_NT3 threads, at most
// 128 registers a thread): a warp one key tile of the logits, two heads' softmax and one
// chunk of 64 output values: the default form since run 39 (on an H100, 0.86 → 0.55 ms
// at V4.1 batch 64 and 3.23 → 2.02 ms at 256 against csa_tc_fused, 0.61 / 2.24 for
// csa_tc_fused2). The same values as csa_tc_fused (bit for bit on the GPU in run 39b).
#define CTF_NT3 512
#undef KERNEL_BOUNDS
#define KERNEL_BOUNDS __launch_bounds__(CTF_NT3, 1)
KERNEL(csa_tc_fused3, CsaFusedArgs) { ctf_launch<true, CTF_NT3 / 32>(a, GIDX, GSTRIDE); }
#undef KERNEL_BOUNDS
#define KERNEL_BOUNDS
