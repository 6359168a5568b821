// tensorcore.cu: products of the fast numerics mode (targets.Options.Numerics "fast") on the
// tensor cores. They do not reproduce the cpu target's float32 order; they are checked
// against it with a tolerance (docs/cuda.md, "Numerics modes").
//
// y = x·wᵀ as bf16 products with float32 accumulation (mma.sync m16n8k16), nearly
// float32-accurate: x is split into two bf16 halves, hi = bf16(x) and lo = bf16(x − hi),
// so x = hi + lo to about 2^-16 of |x|; every weight format but float32 is exact in bf16
// once its UE8M0 scale is folded in (FP8 e4m3 and FP4 e2m1 codes times a power of two),
// and a float32 weight is split the same way. A product is hi·w + lo·w (and hi·w_lo for
// float32 weights), each exact in float32, summed by the tensor core.
//
// The work is split in warp tiles: 16 weight rows × 32 activation rows (four mma tiles of
// 8) × a slice of the reduction (S slices, chosen from N and K only, so a row's value
// does not depend on the batch). With S > 1 the slices' sums go to a scratch and
// fast_sum adds them in slice order.
//
// Conventions differ from the other kernels in one way: a work item is a lane of a
// warp tile (32 work items a tile, and 32 divides the launch block), because an mma is
// a warp's instruction. The emulated device runs a tile when it meets its lane 0, with
// the same bf16 operands, summing each mma's 16 products in k order in float32.


// fast_rn packs two floats as bf16 (round to nearest even), lo in the low half.
// DI_LANES: a test's host build of the device branch (lanes_test.go), which runs the
// warps' lanes with the emulated device's arithmetic and simulates mma and the
// asynchronous copies.
#if defined(DI_EMULATE) || defined(DI_LANES)
DEV u32 fast_rn(float lo, float hi) {
  return (bits_f32(q_bf16(lo)) >> 16) | (bits_f32(q_bf16(hi)) & 0xffff0000u);
}
#else
DEV u32 fast_rn(float lo, float hi) {
  u32 d;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
}
#endif
DEV float fast_lo(u32 p) { return f32_bits(p << 16); }
DEV float fast_hi(u32 p) { return f32_bits(p & 0xffff0000u); }

// bf2_mul: the pairs' products, rounded to bf16 (exact where used: one factor a power
// of two).
#if defined(DI_EMULATE) || defined(DI_LANES)
DEV u32 bf2_mul(u32 a, u32 b) { return fast_rn(fast_lo(a) * fast_lo(b), fast_hi(a) * fast_hi(b)); }
#else
DEV u32 bf2_mul(u32 a, u32 b) {
  u32 d;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(0x80008000u));
  return d;
}
#endif
// bf2_pow2: the bf16 pair (2^e, 2^e), −126 ≤ e ≤ 127.
DEV u32 bf2_pow2(int e) {
  u32 b = (u32)(e + 127) << 7;
  return b | (b << 16);
}
// e4m3_pair: the FP8 e4m3 codes in bytes 0 and 2 of x as a bf16 pair, each 2^-120
// times its value: the code's sign, exponent and mantissa bits placed at bf16's, so the
// subnormal codes land on bf16 subnormals. (The NaN codes 0x7f and 0xff read as
// ±480·2^-120: weights never hold them.)
DEV u32 e4m3_pair(u32 x) { return ((x & 0x007f007fu) << 4) | ((x & 0x00800080u) << 8); }
// e4m3_widen16: 16 e4m3 codes (q, value j in byte j) times 2^(u−127) (a UE8M0 scale
// byte; 0xff: NaN) as 8 bf16 pairs (values 2j, 2j+1), by integer operations and one or
// two bf16x2 multiplies a pair: exact, as e4m3_f32(c)·ue8m0_f32(u) rounded to bf16.
DEVM void e4m3_widen16(uint4 q, u32 u, u32* hi) {
  int e = (int)u - 7;  // 2^120 · 2^(u − 127)
  u32 m1 = bf2_pow2(e < 127 ? e : 127);
  u32 m2 = u == 255 ? 0x7fc07fc0u : bf2_pow2(e > 127 ? e - 127 : 0);
  u32 word[4] = {q.x, q.y, q.z, q.w};
  UNROLL for (int j = 0; j < 4; j++) {
    u32 x01 = (word[j] & 0xffu) | ((word[j] & 0xff00u) << 8), x23 = (word[j] >> 16 & 0xffu) | (word[j] & 0xff000000u) >> 8;
    hi[2 * j] = bf2_mul(e4m3_pair(x01), m1);
    hi[2 * j + 1] = bf2_mul(e4m3_pair(x23), m1);
  }
  if (e > 127 || u == 255) UNROLL for (int j = 0; j < 8; j++) hi[j] = bf2_mul(hi[j], m2);
}

// fast_split16 splits 16 floats into bf16 pairs hi[8] and residual pairs lo[8].
DEVM void fast_split16(const float* v, u32* hi, u32* lo) {
  UNROLL for (int j = 0; j < 8; j++) {
    u32 h = fast_rn(v[2 * j], v[2 * j + 1]);
    hi[j] = h;
    lo[j] = fast_rn(v[2 * j] - fast_lo(h), v[2 * j + 1] - fast_hi(h));
  }
}

// fast_fp8_scale is the UE8M0 scale byte weight row r's FP8 values from k are widened
// with (formats 2, 3 and 5).
DEVM u32 fast_fp8_scale(const Weight& w, i64 r, i64 k) {
  if (w.fmt == 5) return w.s[(r / 128) * ((w.cols + 127) / 128) + k / 128];
  i64 sc = (w.cols + 31) / 32;
  return w.s[(w.fmt == 2 ? (r / 32) * sc : r * sc) + k / 32];
}

// FastRaw: the bits of 16 weight values as they lie in memory (bf16: a and b; FP8: a
// and the scale byte u; FP4: a.x, a.y and u), loaded by fast_wraw and widened by
// fast_wwiden, so that a kernel can have the loads in flight before it widens.
struct FastRaw {
  uint4 a, b;
  u32 u;
};
// fast_wraw loads the bits of weight row r's values [k, k+16) (k a multiple of 16) for
// the formats widened from their bits (bf16, FP8, FP4) when the 16 values are whole
// (r < N, k + 16 ≤ K, rows a multiple of 16 values); false otherwise, where fast_wload
// takes its per-value path.
DEVM bool fast_wraw(const Weight& w, i64 r, i64 k, i64 N, i64 K, FastRaw& o) {
  if (r >= N || k + 16 > K || (w.cols & 15) != 0) return false;
  const unsigned char* base = (const unsigned char*)w.p;
  if (w.fmt == 1) {
    const uint4* p = (const uint4*)(base + 2 * (r * w.cols + k));
    o.a = p[0], o.b = p[1];
    return true;
  }
  if (w.fmt == 2 || w.fmt == 3 || w.fmt == 5) {
    o.a = *(const uint4*)(base + r * w.cols + k);
    o.u = fast_fp8_scale(w, r, k);
    return true;
  }
  if (w.fmt == 4) {
    u64 q = *(const u64*)(base + (r * w.cols + k) / 2);
    o.a.x = (u32)q, o.a.y = (u32)(q >> 32);
    o.u = w.s[r * ((w.cols + 31) / 32) + k / 32];
    return true;
  }
  return false;
}
// fast_wwiden widens fast_wraw's bits of a weight of format fmt into 8 bf16 pairs (exact).
DEVM void fast_wwiden(int fmt, const FastRaw& o, u32* hi) {
  if (fmt == 1) {
    hi[0] = o.a.x, hi[1] = o.a.y, hi[2] = o.a.z, hi[3] = o.a.w;
    hi[4] = o.b.x, hi[5] = o.b.y, hi[6] = o.b.z, hi[7] = o.b.w;
  } else if (fmt == 4) {
    u64 q = (u64)o.a.x | (u64)o.a.y << 32;
    float s = ue8m0_f32(o.u);
    UNROLL for (int j = 0; j < 8; j++) {
      unsigned char byte = (unsigned char)(q >> (8 * j));
      hi[j] = fast_rn(e2m1_f32(byte & 15) * s, e2m1_f32(byte >> 4) * s);
    }
  } else {
    e4m3_widen16(o.a, o.u, hi);
  }
}

// fast_wload widens weight row r, values [k, k+16) (k a multiple of 16), into 8 bf16
// pairs hi (exact for every format but float32) and, for float32 weights, the residual
// pairs lo (F32: the caller passes float32 weights and lo; otherwise neither). Values
// at or past K, and rows at or past N, are 0.
template <bool F32>
DEVM void fast_wload(const Weight& w, i64 r, i64 k, i64 N, i64 K, u32* hi, u32* lo) {
  UNROLL for (int j = 0; j < 8; j++) {
    hi[j] = 0;
    if (F32) lo[j] = 0;
  }
  if (r >= N || k >= K) return;
  float v[16];
  bool full = k + 16 <= K && (w.cols & 15) == 0;
  FastRaw o;
  if (fast_wraw(w, r, k, N, K, o)) {
    fast_wwiden(w.fmt, o, hi);
    return;
  }
  if (F32 && full && w.fmt == 0) {
    const float4* p = (const float4*)((const float*)w.p + r * w.cols + k);
    UNROLL for (int j = 0; j < 4; j++) {
      float4 q = p[j];
      v[4 * j] = q.x, v[4 * j + 1] = q.y, v[4 * j + 2] = q.z, v[4 * j + 3] = q.w;
    }
    fast_split16(v, hi, lo);
    return;
  }
  UNROLL for (int j = 0; j < 16; j++) v[j] = k + j < K ? wval(w, r, k + j) : 0.0f;
  if (F32 && w.fmt == 0) {
    fast_split16(v, hi, lo);
  } else {
    UNROLL for (int j = 0; j < 8; j++) hi[j] = fast_rn(v[2 * j], v[2 * j + 1]);
  }
}

#ifdef DI_LANES
DEV void fast_mma(float* c, u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1) { lanes_mma(c, a0, a1, a2, a3, b0, b1); }
#elif !defined(DI_EMULATE)
// fast_mma: c += a·b, one m16n8k16 bf16 product with float32 accumulation.
DEV void fast_mma(float* c, u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
#endif

// fast_split: xh, xl = the bf16 halves of x's rows (rows[m] when a list is given,
// checked against arows), Kp = K rounded up to 64 values a row, zero past K. One work
// item a pair of values.
// xexact: the binder says x is bf16 already (1: V4.1's quantized activations), so every lo
// half is zero and the tiles leave its mma out; a nonzero lo is error 600. 2: the fp8
// numerics round x to bf16 here (V4's float32 activations), the tiles as for 1.
struct FastSplitArgs { const float* x; const int* rows; u32* xh; u32* xl; i64 M; i64 K; i64 Kp; i64 ldx; i64 arows; i64* err; i64 xexact; };
// fast_pair stores pair i of values v0, v1 as its bf16 halves, checking xexact's promise
// (1); with xexact 2 (the fp8 numerics on activations the model keeps in float32: V4's)
// the values are rounded to bf16 (the hi halves) and the lo halves are zero.
DEV void fast_pair(u32* xh, u32* xl, i64 i, float v0, float v1, i64 xexact, i64* err) {
  u32 h = fast_rn(v0, v1);
  xh[i] = h;
  if (xexact == 2) {
    xl[i] = 0;
    return;
  }
  u32 lo = fast_rn(v0 - fast_lo(h), v1 - fast_hi(h));
  xl[i] = lo;
  if (xexact && (lo & 0x7fff7fffu)) *err = 600;
}
// wgr_pos: where fast_split_wg stores a row's pair pn (values 2pn, 2pn + 1) for
// fast_gemm_wg_fp8r, the wgmma kernel that takes x as its register operand (Kp a
// multiple of 64): within each step of 32 pairs, pair 8s + t + 4h
// (16-value piece s, fragment column t, half h) goes to 8t + 2s + h, so that a thread's
// four pieces' fragment pairs of a row are 32 contiguous bytes (two 16-byte loads).
DEV i64 wgr_pos(i64 pn) {
  const i64 q = pn & 31;
  return (pn & ~(i64)31) + 8 * (q & 3) + 2 * (q >> 3) + ((q >> 2) & 1);
}
template <bool FRAG>
DEVM void fast_split_body(const FastSplitArgs& a, i64 GIDX, i64 GSTRIDE) {
  i64 P = a.Kp / 2;
  for (i64 i = GIDX; i < a.M * P; i += GSTRIDE) {
    i64 m = qdiv(i, P), k = 2 * qmod(i, P);
    i64 r = m;
    if (a.rows) {
      r = a.rows[m];
      if (r < 0 || r >= a.arows) { *a.err = 2; continue; }
    }
    const float* xr = a.x + r * a.ldx;
    float v0 = k < a.K ? xr[k] : 0.0f, v1 = k + 1 < a.K ? xr[k + 1] : 0.0f;
    fast_pair(a.xh, a.xl, FRAG ? m * P + wgr_pos(k / 2) : i, v0, v1, a.xexact, a.err);
  }
}
KERNEL(fast_split, FastSplitArgs) { fast_split_body<false>(a, GIDX, GSTRIDE); }
// fast_split_wg: fast_split with each row's pairs in wgr_pos's order (Kp a multiple of
// 64), for fast_gemm_wg_fp8r: the same halves, elsewhere
KERNEL(fast_split_wg, FastSplitArgs) { fast_split_body<true>(a, GIDX, GSTRIDE); }

// fast_quant_split is dense_quant (pieces of 32 values; mode 1 bf16, 2 bf16 then MXFP8)
// and a split of bf16-valued activations (xexact; rows in order, row stride K) in one
// launch: a warp qs pieces of 32 values of a row's Kp (qs 1 or QS_PIECES; p0 = qs·g, g
// the warp's group of the row), each lane's value of each quantized as dense_quant stores
// it (q_act_lanes32: with four, the pieces' loads and maxima together), the
// pairs formed across lanes as fast_split forms them (values k, k + 1) or, with fp4, as
// fast_split_fp4 does (pair 4w + j of a piece holds its values 8w + j and 8w + j + 4),
// zero past K — the same bits in xh and xl as the two launches. The launch's threads:
// M · ⌈(Kp/32)/qs⌉ · 32 (ops_fast.go's quantSplitArgs, which takes QS_PIECES for steps of
// many rows: on an H100, run 46a, V4.1's 31 launches at batch 256 0.411 → 0.347 ms of
// event time, at batch 1 0.110 → 0.149, at 64 the same). The emulated device runs a
// warp's pieces at its first lane, in order. With xq (mode 2, K a multiple of 32: the
// fp8 numerics' products on fast_gemm_wg_e4m3) it also writes each value's E4M3 code,
// xq[m·K + k], and each piece's scale, xe[m·K/32 + k/32]: code times scale is the value
// the halves hold.
#define QS_PIECES 4
struct FastQuantSplitArgs {
  const float* x; u32* xh; u32* xl; i64 M; i64 K; i64 Kp; i64 mode; i64 fp4; i64* err; i64 qs;
  unsigned char* xq; float* xe;
};
#ifndef DI_EMULATE
// quant_split_warp: a warp's N pieces p0.. of the row at x + xo (those below pieces
// stored), each lane's value and its pair partner d lanes on.
template <int N>
DEVM void quant_split_warp(const FastQuantSplitArgs& a, i64 xo, i64 p0, i64 pieces, int lane, int d, u32* xh, u32* xl) {
  float v[N], sc[N];
  q_act_lanes32<N>(a.x + xo, a.K, p0, lane, a.mode, v, a.xq ? sc : nullptr);
  const int pos = a.fp4 ? (lane >> 3) * 4 + (lane & 3) : lane >> 1;
  UNROLL for (int j = 0; j < N; j++) {
    const float w = __shfl_down_sync(0xffffffffu, v[j], d);
    if (p0 + j < pieces && (lane & d) == 0) fast_pair(xh + (p0 + j) * 16, xl + (p0 + j) * 16, pos, v[j], w, true, a.err);
  }
  if (a.xq) {
    const i64 m = xo / a.K;
    UNROLL for (int j = 0; j < N; j++) {
      if ((p0 + j) * 32 + 32 > a.K) continue;
      a.xq[xo + (p0 + j) * 32 + lane] = e4m3_code(v[j] / sc[j]);
      if (lane == 0) a.xe[m * (a.K / 32) + p0 + j] = sc[j];
    }
  }
}
#endif
KERNEL(fast_quant_split, FastQuantSplitArgs) {
  const i64 qs = a.qs == QS_PIECES ? QS_PIECES : 1;
  const i64 pieces = a.Kp / 32, P = a.Kp / 2, groups = (pieces + qs - 1) / qs;
  const int d = a.fp4 ? 4 : 1;  // a pair's second value: d lanes on
  for (i64 i = GIDX; i < a.M * groups * 32; i += GSTRIDE) {
    const i64 wg = i >> 5, m = qdiv(wg, groups), p0 = qmod(wg, groups) * qs;
    const int lane = (int)(i & 31);
    u32* xh = a.xh + m * P;
    u32* xl = a.xl + m * P;
#ifdef DI_EMULATE
    if (lane != 0) continue;
    for (i64 p = p0; p < imin(p0 + qs, pieces); p++) {
      float v[32] = {0};
      q_act_piece(a.x + m * a.K, a.K, p * 32, 32, a.mode, v);
      for (int j = 0; j < 16; j++) {
        const int k = a.fp4 ? 8 * (j >> 2) + (j & 3) : 2 * j;
        fast_pair(xh + p * 16, xl + p * 16, j, v[k], v[k + d], true, a.err);
      }
      if (a.xq && p * 32 + 32 <= a.K) {
        // (the piece quantized again for its scale: dense_mxfp8_group's, as q_act_piece ran it)
        float w[32];
        for (int u = 0; u < 32; u++) w[u] = q_bf16(a.x[m * a.K + p * 32 + u]);
        const float s = dense_mxfp8_group(w, 32);
        for (int u = 0; u < 32; u++) a.xq[m * a.K + p * 32 + u] = e4m3_code(w[u] / s);
        a.xe[m * (a.K / 32) + p] = s;
      }
    }
#else
    if (qs == 1) quant_split_warp<1>(a, m * a.K, p0, pieces, lane, d, xh, xl);
    else quant_split_warp<QS_PIECES>(a, m * a.K, p0, pieces, lane, d, xh, xl);
#endif
  }
}

#ifndef DI_EMULATE
// fast_xload: a lane's 16 values from k of activation row m's bf16 halves (P pairs a
// row) as 8 pairs each, or zeros for no row (m < 0).
DEVM void fast_xload(const u32* xh, const u32* xl, i64 m, i64 P, i64 k, u32* bh, u32* bl) {
  if (m < 0) {
    UNROLL for (int q = 0; q < 8; q++) bh[q] = bl[q] = 0;
    return;
  }
  const uint4* ph = (const uint4*)(xh + m * P + k / 2);
  const uint4* pl = (const uint4*)(xl + m * P + k / 2);
  uint4 h0 = ph[0], h1 = ph[1], l0 = pl[0], l1 = pl[1];
  bh[0] = h0.x, bh[1] = h0.y, bh[2] = h0.z, bh[3] = h0.w, bh[4] = h1.x, bh[5] = h1.y, bh[6] = h1.z, bh[7] = h1.w;
  bl[0] = l0.x, bl[1] = l0.y, bl[2] = l0.z, bl[3] = l0.w, bl[4] = l1.x, bl[5] = l1.y, bl[6] = l1.z, bl[7] = l1.w;
}

// FAST_M1_D: the reduction steps whose FP8 weight bytes a one-tile warp
// (fast_gemm_m1_fp8) loads before widening the first of them.
#define FAST_M1_D 4

// fast_m1_fp8 is fast_tile's loop for one weight and one activation tile when the
// weight is FP8 (formats 2, 3, 5), every step of [kb, ke) is whole (K a multiple of 64,
// rows a multiple of 16 values) and the 16 weight rows exist: the same mmas on the same
// operands in the same order as kstep's, with FAST_M1_D steps' weight bytes and scales
// in flight before the first is widened (kstep's loads sit behind the format's
// branches, so a step's loads wait for the last step's mmas).
DEVM bool fast_m1_fp8_ok(const Weight& w, i64 n0, i64 N, i64 K) {
  return (w.fmt == 2 || w.fmt == 3 || w.fmt == 5) && K % 64 == 0 && (w.cols & 15) == 0 && n0 + 16 <= N;
}
// fast_m1_fp8_loop is that loop; XA (bf16 activations, xexact) also loads the activation's hi halves of
// the FAST_M1_D steps with their weight bytes, before the first step is widened: without
// it a step's activation values are loaded after its weights are widened, so each step of
// a group waits on a load of its own behind the mma of the one before (run 22b: 0.691 →
// 0.596 ms, V4.1's one-row FP8 products). The same mmas on the same operands in the same
// order either way.
template <bool XA>
DEVM void fast_m1_fp8_loop(const Weight& w, i64 n0, i64 kb, i64 ke, const u32* xh, const u32* xl, i64 P, i64 m, int g,
                           int t, float* acc, bool xexact) {
  const unsigned char* base = (const unsigned char*)w.p;
  const i64 r0 = n0 + g, r1 = r0 + 8;
  const unsigned char* p0 = base + r0 * w.cols + 16 * t;
  const unsigned char* p1 = base + r1 * w.cols + 16 * t;
  const uint4* px = (const uint4*)(xh + (m < 0 ? 0 : m) * P + 8 * t);  // (XA) + k / 8 uint4s a step
  for (i64 k0 = kb; k0 < ke; k0 += 64 * FAST_M1_D) {
    uint4 q0[FAST_M1_D], q1[FAST_M1_D], x0[XA ? FAST_M1_D : 1], x1[XA ? FAST_M1_D : 1];
    u32 u0[FAST_M1_D], u1[FAST_M1_D];
    UNROLL for (int d = 0; d < FAST_M1_D; d++) {
      const i64 k = k0 + 64 * d;
      if (k < ke) {
        q0[d] = *(const uint4*)(p0 + k);
        q1[d] = *(const uint4*)(p1 + k);
        u0[d] = fast_fp8_scale(w, r0, k + 16 * t);
        u1[d] = fast_fp8_scale(w, r1, k + 16 * t);
        if constexpr (XA) {
          if (m >= 0) {
            x0[d] = px[k / 8];
            x1[d] = px[k / 8 + 1];
          } else {
            x0[d] = x1[d] = make_uint4(0, 0, 0, 0);
          }
        }
      }
    }
    UNROLL for (int d = 0; d < FAST_M1_D; d++) {
      const i64 k = k0 + 64 * d + 16 * t;
      if (k0 + 64 * d >= ke) break;
      u32 a0[8], a1[8], bh[8], bl[8];
      e4m3_widen16(q0[d], u0[d], a0);
      e4m3_widen16(q1[d], u1[d], a1);
      if constexpr (XA) {
        const uint4 v[2] = {x0[d], x1[d]};
        UNROLL for (int q = 0; q < 2; q++) bh[4 * q] = v[q].x, bh[4 * q + 1] = v[q].y, bh[4 * q + 2] = v[q].z, bh[4 * q + 3] = v[q].w;
      } else {
        fast_xload(xh, xl, m, P, k, bh, bl);
      }
      UNROLL for (int q = 0; q < 4; q++) {
        fast_mma(acc, a0[2 * q], a1[2 * q], a0[2 * q + 1], a1[2 * q + 1], bh[2 * q], bh[2 * q + 1]);
        if (!XA && !xexact) fast_mma(acc, a0[2 * q], a1[2 * q], a0[2 * q + 1], a1[2 * q + 1], bl[2 * q], bl[2 * q + 1]);
      }
    }
  }
}
DEVM void fast_m1_fp8(const Weight& w, i64 n0, i64 kb, i64 ke, const u32* xh, const u32* xl, i64 P, i64 m, int g, int t,
                      float* acc, bool xexact) {
  fast_m1_fp8_loop<false>(w, n0, kb, ke, xh, xl, P, m, g, t, acc, xexact);
}
#endif

// fast_tile: one warp tile, y_p[n, c] = Σ_{k in [kb, ke)} w_p[n, k]·x[rows(c), k] for NW
// weights w_p of the same shape (the experts' w1 and w3 share their activations), the 16
// weight rows n0.. (n < N) and the 8·MT activation rows c whose rows(c) ≥ 0 (the
// rows of a tile are a prefix: rows(8j) < 0 ends it), from the bf16 halves xh, xl (P
// pairs a row); store(p, n, c, v) receives every value. A lane (g = lane/4, t = lane%4)
// loads 16 consecutive values [k0+16t, k0+16t+16) of weight rows n0+g and n0+g+8 and of
// activation rows 8j+g, and feeds them to four mmas: mma q takes the lane's values
// 4q..4q+3 as its k pairs (2t, 2t+1) and (2t+8, 2t+9). The reduction is permuted, the
// same way for both operands, so that a lane's loads are contiguous. xexact (x is bf16
// already, its lo halves zero): the lo mma is left out, and the emulated loop leaves out
// adding its sum.
template <int NW, int MT, bool F32, bool PIPE = false, class Rows, class Store>
DEVM void fast_tile(const Weight* w, i64 n0, i64 N, i64 K, i64 kb, i64 ke, const u32* xh, const u32* xl, i64 P,
                    Rows rows, int lane, Store store, bool xexact) {
#ifdef DI_EMULATE
  if (lane != 0) return;
  for (int p = 0; p < NW; p++) {
    float acc[16][8 * MT];
    for (int r = 0; r < 16; r++)
      for (int c = 0; c < 8 * MT; c++) acc[r][c] = 0;
    for (i64 k0 = kb; k0 < ke; k0 += 64) {
      // the bf16 values as the lanes hold them
      float wh[16][64], wl[16][64];
      for (int r = 0; r < 16; r++)
        for (int t = 0; t < 4; t++) {
          u32 hi[8], lo[8];
          fast_wload<true>(w[p], n0 + r, k0 + 16 * t, N, K, hi, lo);
          for (int j = 0; j < 8; j++) {
            wh[r][16 * t + 2 * j] = fast_lo(hi[j]), wh[r][16 * t + 2 * j + 1] = fast_hi(hi[j]);
            wl[r][16 * t + 2 * j] = fast_lo(lo[j]), wl[r][16 * t + 2 * j + 1] = fast_hi(lo[j]);
          }
        }
      for (int c = 0; c < 8 * MT; c++) {
        i64 m = rows(c);
        if (m < 0) continue;
        float x_h[64], x_l[64];
        for (int j = 0; j < 32; j++) {
          u32 h = xh[m * P + k0 / 2 + j], l = xl[m * P + k0 / 2 + j];
          x_h[2 * j] = fast_lo(h), x_h[2 * j + 1] = fast_hi(h);
          x_l[2 * j] = fast_lo(l), x_l[2 * j + 1] = fast_hi(l);
        }
        for (int r = 0; r < 16; r++)
          for (int q = 0; q < 4; q++) {
            // mma q's 16 k: lane t's values 4q..4q+3 for t = 0..3
            float d0 = 0, d1 = 0, d2 = 0;
            for (int t = 0; t < 4; t++)
              for (int u = 0; u < 4; u++) {
                int k = 16 * t + 4 * q + u;
                d0 += wh[r][k] * x_h[k];
                d1 += wh[r][k] * x_l[k];
                d2 += wl[r][k] * x_h[k];
              }
            acc[r][c] += d0;
            if (!xexact) acc[r][c] += d1;
            if (w[p].fmt == 0) acc[r][c] += d2;
          }
      }
    }
    for (int r = 0; r < 16; r++)
      for (int c = 0; c < 8 * MT; c++)
        if (n0 + r < N && rows(c) >= 0) store(p, n0 + r, c, acc[r][c]);
  }
#else
  int g = lane >> 2, t = lane & 3;
  float acc[NW][MT][4];
  i64 mrow[MT];
  int live = 0;  // activation tiles in use (the same for every lane)
  UNROLL for (int j = 0; j < MT; j++) {
    UNROLL for (int p = 0; p < NW; p++) acc[p][j][0] = acc[p][j][1] = acc[p][j][2] = acc[p][j][3] = 0;
    mrow[j] = rows(8 * j + g);
    if (live == j && rows(8 * j) >= 0) live = j + 1;
  }
  auto kstep = [&](i64 k0) {
    i64 k = k0 + 16 * t;
    u32 ah0[NW][8], al0[NW][F32 ? 8 : 1], ah1[NW][8], al1[NW][F32 ? 8 : 1];
    UNROLL for (int p = 0; p < NW; p++) {
      fast_wload<F32>(w[p], n0 + g, k, N, K, ah0[p], al0[p]);
      fast_wload<F32>(w[p], n0 + g + 8, k, N, K, ah1[p], al1[p]);
    }
    UNROLL for (int j = 0; j < MT; j++) {
      if (j >= live) break;
      i64 m = mrow[j];
      u32 bh[8], bl[8];
      fast_xload(xh, xl, m, P, k, bh, bl);
      UNROLL for (int p = 0; p < NW; p++) {
        UNROLL for (int q = 0; q < 4; q++) {
          fast_mma(acc[p][j], ah0[p][2 * q], ah1[p][2 * q], ah0[p][2 * q + 1], ah1[p][2 * q + 1], bh[2 * q], bh[2 * q + 1]);
          if (!xexact)
            fast_mma(acc[p][j], ah0[p][2 * q], ah1[p][2 * q], ah0[p][2 * q + 1], ah1[p][2 * q + 1], bl[2 * q], bl[2 * q + 1]);
          if (F32)
            fast_mma(acc[p][j], al0[p][(2 * q) % (F32 ? 8 : 1)], al1[p][(2 * q) % (F32 ? 8 : 1)],
                     al0[p][(2 * q + 1) % (F32 ? 8 : 1)], al1[p][(2 * q + 1) % (F32 ? 8 : 1)], bh[2 * q], bh[2 * q + 1]);
        }
      }
    }
  };
  // one weight plane and one activation tile: two reduction steps' loads in flight
  if (NW == 1 && MT == 1 && !F32 && PIPE && live == 1 && fast_m1_fp8_ok(w[0], n0, N, K)) {
    fast_m1_fp8(w[0], n0, kb, ke, xh, xl, P, mrow[0], g, t, acc[0][0], xexact);
  } else if (NW == 1 && MT == 1) {
#pragma unroll 2
    for (i64 k0 = kb; k0 < ke; k0 += 64) kstep(k0);
  } else {
    for (i64 k0 = kb; k0 < ke; k0 += 64) kstep(k0);
  }
  // c0, c1: weight row g, activation rows 2t, 2t+1; c2, c3: weight row g+8
  UNROLL for (int j = 0; j < MT; j++) {
    if (j >= live) break;
    UNROLL for (int e = 0; e < 4; e++) {
      i64 n = n0 + g + (e >= 2 ? 8 : 0);
      int c = 8 * j + 2 * t + (e & 1);
      if (n < N && rows(c) >= 0) {
        UNROLL for (int p = 0; p < NW; p++) store(p, n, c, acc[p][j][e]);
      }
    }
  }
#endif
}

// fast_gemm_*: y = x·wᵀ, one warp tile (16 weight rows, 8·MT rows of x, a slice of
// the reduction) every 32 work items; with S > 1 slices to part (fast_sum adds them).
// With G groups, weight row n reads x's row m·G + n/(N/G) (the halves of grouped_linear's
// x, a row per token and group; N/G a multiple of 16, so a tile is in one group).
// prefetch (fast_gemm_blk only): ask for the next step's weights in L1 (a hint).
struct FastGemmArgs {
  const u32* xh; const u32* xl; Weight w; float* y; float* part;
  i64 M; i64 N; i64 K; i64 Kp; i64 S; i64 ks; i64 mtiles; i64 ldy; i64 out_bf16; i64 G; i64 prefetch;
  i64 xexact;  // x is bf16 already (fast_split's xexact): no lo mma
};
struct FastGemmRows {
  i64 m0, M, G, g;
  DEVM i64 operator()(int c) const { return m0 + c < M ? (m0 + c) * G + g : -1; }
};
struct FastGemmStore {
  const FastGemmArgs* a;
  i64 m0, s;
  DEVM void operator()(int, i64 n, int c, float v) const {
    i64 m = m0 + c;
    if (a->S > 1) a->part[(s * a->M + m) * a->N + n] = v;
    else a->y[m * a->ldy + n] = a->out_bf16 ? q_bf16(v) : v;
  }
};
// fast_gemm_tiles runs the warp tiles with MT activation tiles of 8 rows each.
template <int MT, bool F32, bool PIPE = false>
DEVM void fast_gemm_tiles(const FastGemmArgs& a, long long GIDX, long long GSTRIDE) {
  i64 ntiles = (a.N + 15) / 16;
  i64 items = ntiles * a.S * a.mtiles * 32;
  for (i64 i = GIDX; i < items; i += GSTRIDE) {
    i64 tile = i >> 5;
    i64 mt = tile % a.mtiles, s = (tile / a.mtiles) % a.S, nt = tile / (a.mtiles * a.S);
    i64 m0 = mt * 8 * MT, kb = s * a.ks;
    FastGemmRows rows = {m0, a.M, a.G, a.G > 1 ? (nt * 16) / (a.N / a.G) : 0};
    FastGemmStore store = {&a, m0, s};
    i64 ke = imin(a.Kp, kb + a.ks);
    fast_tile<1, MT, F32, PIPE>(&a.w, nt * 16, a.N, a.K, kb, ke, a.xh, a.xl, a.Kp / 2, rows, (int)(i & 31), store,
                                a.xexact != 0);
  }
}
// fast_gemm_m1_only: fast_gemm_tiles<1, false, true> for products whose every tile takes
// fast_m1_fp8 (FP8 weights, N a multiple of 16, K of 64, rows of a multiple of 16 values;
// Go checks): that loop alone in the kernel's body, without fast_tile's paths for the
// other formats (which make fast_gemm_m1_fp8_b4 27,456 instructions on sm_90a, its FP8
// loop 1,140 of them); each lane's values and stores as fast_tile's for one weight plane
// and one activation tile, so the same values. The emulated device runs
// fast_gemm_tiles itself.
DEVM void fast_gemm_m1_only(const FastGemmArgs& a, long long GIDX, long long GSTRIDE) {
#ifdef DI_EMULATE
  fast_gemm_tiles<1, false, true>(a, GIDX, GSTRIDE);
#else
  const i64 items = a.N / 16 * a.S * a.mtiles * 32;
  for (i64 i = GIDX; i < items; i += GSTRIDE) {
    const i64 tile = i >> 5;
    const i64 mt = tile % a.mtiles, s = (tile / a.mtiles) % a.S, nt = tile / (a.mtiles * a.S);
    const i64 m0 = mt * 8, kb = s * a.ks, ke = imin(a.Kp, kb + a.ks);
    const FastGemmRows rows = {m0, a.M, a.G, a.G > 1 ? (nt * 16) / (a.N / a.G) : 0};
    const FastGemmStore store = {&a, m0, s};
    const int lane = (int)(i & 31), g = lane >> 2, t = lane & 3;
    float acc[4] = {0, 0, 0, 0};
    if (rows(0) >= 0 && a.xexact) fast_m1_fp8_loop<true>(a.w, nt * 16, kb, ke, a.xh, a.xl, a.Kp / 2, rows(g), g, t, acc, true);
    else if (rows(0) >= 0) fast_m1_fp8(a.w, nt * 16, kb, ke, a.xh, a.xl, a.Kp / 2, rows(g), g, t, acc, false);
    // c0, c1: weight row g, activation rows 2t, 2t+1; c2, c3: weight row g+8
    UNROLL for (int e = 0; e < 4; e++) {
      const int c = 2 * t + (e & 1);
      if (rows(c) >= 0) store(0, nt * 16 + g + (e >= 2 ? 8 : 0), c, acc[e]);
    }
  }
#endif
}
// Four entries, so that each compiles with the registers it needs: one or four
// activation tiles a warp (mtiles counts tiles of 8 or 32 rows), float32 weights or not.
KERNEL(fast_gemm_m1, FastGemmArgs) { fast_gemm_tiles<1, false>(a, GIDX, GSTRIDE); }
// fast_gemm_m1_fp8: fast_gemm_m1 for FP8 weights (formats 2, 3, 5) whose reduction is a
// multiple of 64: fast_m1_fp8's loads steps ahead where a tile's 16 rows exist. A
// kernel of its own, so that fast_gemm_m1 keeps its registers (with both loops in one
// kernel, run 12 measured fast_gemm_m1's bf16 LM head 0.29 → 0.38 ms).
KERNEL(fast_gemm_m1_fp8, FastGemmArgs) { fast_gemm_tiles<1, false, true>(a, GIDX, GSTRIDE); }
// fast_gemm_m1_fp8_b4: fast_gemm_m1_fp8 with at most 128 registers a thread, so four
// launch blocks a multiprocessor instead of three (run 13d: 150 registers, 18.75%
// theoretical occupancy); the same code, the same values (EnvM1Bounds chooses it).
#ifndef DI_EMULATE
#undef KERNEL_BOUNDS
#define KERNEL_BOUNDS __launch_bounds__(128, 4)
#endif
KERNEL(fast_gemm_m1_fp8_b4, FastGemmArgs) { fast_gemm_tiles<1, false, true>(a, GIDX, GSTRIDE); }
KERNEL(fast_gemm_m1_fp8_only, FastGemmArgs) { fast_gemm_m1_only(a, GIDX, GSTRIDE); }
#undef KERNEL_BOUNDS
#define KERNEL_BOUNDS

// fast_gemv_*: the fast mode's products of at most FAST_GEMV_M activation rows on the
// CUDA cores, for decode steps of a few tokens, where the warp tiles' mma units idle on
// 7 of their 8 activation rows and their slices need a second launch (fast_sum). A
// launch block (four warps) holds 4 / KS pairs of weight rows (of one group), KS warps a
// pair (KS = fast_gemv_ks(N): 1, 2 or 4, more for fewer rows, so that a product of few
// rows still has about 2,048 warps); warp s of a pair takes the reduction's 16-value
// pieces 32·(s + KS·j) + l at lane l (j = 0, 1, …), FAST_GEMV_D pieces' weight bytes in
// flight before the first is used. Each weight value is widened exactly (FP8 codes to
// their e4m3 values, the piece's UE8M0 scale applied to its sum — a power of two, so
// exactly as to each value; bf16 and float32 as they are), each product added by fma in
// float32 in k order from 0 a piece (FP8) or a lane (the others). The activations are
// x's float32 rows themselves (XQ false: no split, no halves; rows picked by a rows
// operand or in order, group g of row t at t·G + g) or the hi halves of a quantized
// split (XQ: V4.1's bf16-valued activations, fast_quant_split's). A warp's lanes fold
// pairwise, l and l ^ 16, then ^ 8, ^ 4, ^ 2, ^ 1; a pair's KS warp sums are added in
// slice order; y written directly. Another summation order than the tiles', so never in
// batch-invariant mode (Go chooses). WF: 0 float32 weights, 1 bf16, 2 FP8 (formats 2,
// 3, 5). Go checks K a multiple of 16, rows 16-byte aligned, N / G a multiple of
// FAST_GEMV_R. The emulated device runs a block at its first thread.
#define FAST_GEMV_M 4
#define FAST_GEMV_R 2
#define FAST_GEMV_D 4
struct FastGemvArgs {
  const float* x; const int* rows; const u32* xh; Weight w; float* y;
  i64 M; i64 N; i64 K; i64 Kp; i64 ldx; i64 ldy; i64 out_bf16; i64 G; i64 arows; i64* err;
};
// fast_gemv_ks: the warps a pair of weight rows shares (Go's gemvSlices).
DEVM int fast_gemv_ks(i64 N) { return N >= 4096 ? 1 : N >= 2048 ? 2 : 4; }

// GemvRaw: a piece's weight bits as loaded (FP8: a, the codes, and u, the scale byte;
// bf16: a and b; float32: a, b, c and d).
struct GemvRaw {
  uint4 a, b, c, d;
  u32 u;
};
template <int WF>
DEVM void gemv_load(const Weight& w, i64 n, i64 k, GemvRaw& o) {
  if constexpr (WF == 2) {
    o.a = *(const uint4*)((const unsigned char*)w.p + n * w.cols + k);
    o.u = fast_fp8_scale(w, n, k);
  } else if constexpr (WF == 1) {
    const uint4* q = (const uint4*)((const unsigned short*)w.p + n * w.cols + k);
    o.a = q[0], o.b = q[1];
  } else {
    const uint4* q = (const uint4*)((const float*)w.p + n * w.cols + k);
    o.a = q[0], o.b = q[1], o.c = q[2], o.d = q[3];
  }
}
// e4m3x2_f32: the FP8 e4m3 codes in bytes 0 and 1 of c as floats (exact; NaN codes NaN).
#if defined(DI_EMULATE) || defined(DI_LANES)
DEV void e4m3x2_f32(u32 c, float* v) {
  v[0] = e4m3_f32((unsigned char)(c & 0xff));
  v[1] = e4m3_f32((unsigned char)(c >> 8 & 0xff));
}
#else
DEV void e4m3x2_f32(u32 c, float* v) {
  u32 h2;
  unsigned short lo, hi;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h2) : "h"((unsigned short)(c & 0xffff)));
  lo = (unsigned short)(h2 & 0xffff), hi = (unsigned short)(h2 >> 16);
  asm("cvt.f32.f16 %0, %1;" : "=f"(v[0]) : "h"(lo));
  asm("cvt.f32.f16 %0, %1;" : "=f"(v[1]) : "h"(hi));
}
#endif
// gemv_widen: the piece's 16 weight values as floats (FP8: the codes' values, unscaled).
template <int WF>
DEVM void gemv_widen(const GemvRaw& o, float* v) {
  const uint4 q[4] = {o.a, o.b, o.c, o.d};
  if constexpr (WF == 0) {
    UNROLL for (int j = 0; j < 4; j++) {
      v[4 * j] = f32_bits(q[j].x), v[4 * j + 1] = f32_bits(q[j].y), v[4 * j + 2] = f32_bits(q[j].z), v[4 * j + 3] = f32_bits(q[j].w);
    }
  } else if constexpr (WF == 1) {
    const u32 h[8] = {o.a.x, o.a.y, o.a.z, o.a.w, o.b.x, o.b.y, o.b.z, o.b.w};
    UNROLL for (int j = 0; j < 8; j++) v[2 * j] = fast_lo(h[j]), v[2 * j + 1] = fast_hi(h[j]);
  } else {
    const u32 c[4] = {o.a.x, o.a.y, o.a.z, o.a.w};
    UNROLL for (int j = 0; j < 4; j++) e4m3x2_f32(c[j], v + 4 * j), e4m3x2_f32(c[j] >> 16, v + 4 * j + 2);
  }
}
// gemv_scale: 2^(u − 127) for a UE8M0 scale byte (NaN for 0xff), as ue8m0_f32.
DEVM float gemv_scale(u32 u) { return u == 255 ? f32_bits(0x7fc00000u) : u == 0 ? f32_bits(0x00400000u) : f32_bits(u << 23); }
// gemv_x: activation row m's values [k, k + 16) for weight group grp, or false for a
// row the rows operand does not have (error 2).
template <bool XQ>
DEVM bool gemv_x(const FastGemvArgs& a, i64 m, i64 grp, i64 k, float* v) {
  const i64 q = m * a.G + grp;
  if constexpr (XQ) {
    const uint4* p = (const uint4*)(a.xh + q * (a.Kp / 2) + k / 2);
    const uint4 h0 = p[0], h1 = p[1];
    const u32 h[8] = {h0.x, h0.y, h0.z, h0.w, h1.x, h1.y, h1.z, h1.w};
    UNROLL for (int j = 0; j < 8; j++) v[2 * j] = fast_lo(h[j]), v[2 * j + 1] = fast_hi(h[j]);
  } else {
    const i64 r = a.rows ? a.rows[q] : q;
    if (a.rows && (r < 0 || r >= a.arows)) return false;  // (as fast_split checks)
    const float4* p = (const float4*)(a.x + r * a.ldx + k);
    UNROLL for (int j = 0; j < 4; j++) {
      const float4 f = p[j];
      v[4 * j] = f.x, v[4 * j + 1] = f.y, v[4 * j + 2] = f.z, v[4 * j + 3] = f.w;
    }
  }
  return true;
}
// gemv_piece: piece p's products (the pair's weight bits raw) added to acc[r][m], the
// activation piece loaded once for the pair's rows and a row widened again for each
// activation row (at one row, once); bad set for a row the rows operand does not have.
template <int WF, bool XQ>
DEVM void gemv_piece(const FastGemvArgs& a, i64 grp, i64 p, const GemvRaw (&raw)[FAST_GEMV_R], float (&acc)[FAST_GEMV_R][FAST_GEMV_M], bool& bad) {
  UNROLL for (int m = 0; m < FAST_GEMV_M; m++) {
    if (m >= a.M) break;
    float xv[16];
    if (!gemv_x<XQ>(a, m, grp, 16 * p, xv)) {
      bad = true;
      continue;
    }
    UNROLL for (int r = 0; r < FAST_GEMV_R; r++) {
      float wv[16];
      gemv_widen<WF>(raw[r], wv);
      if constexpr (WF == 2) {
        float ps = 0.0f;
        UNROLL for (int j = 0; j < 16; j++) ps = fma_fast(wv[j], xv[j], ps);
        acc[r][m] = fma_fast(ps, gemv_scale(raw[r].u), acc[r][m]);
      } else {
        UNROLL for (int j = 0; j < 16; j++) acc[r][m] = fma_fast(wv[j], xv[j], acc[r][m]);
      }
    }
  }
}
// fast_gemv_lane: lane l of slice s (of KS)'s sums acc[r][m] of weight row n0 + r (rows
// past N read row N − 1, not stored) and activation row m < M.
template <int WF, bool XQ>
DEVM void fast_gemv_lane(const FastGemvArgs& a, i64 n0, int s, int KS, int l, float (&acc)[FAST_GEMV_R][FAST_GEMV_M]) {
  UNROLL for (int r = 0; r < FAST_GEMV_R; r++) UNROLL for (int m = 0; m < FAST_GEMV_M; m++) acc[r][m] = 0.0f;
  const i64 pieces = a.K / 16, grp = a.G > 1 ? n0 / (a.N / a.G) : 0, step = 32 * KS;
  bool bad = false;
  for (i64 p0 = 32 * s + l; p0 < pieces; p0 += step * FAST_GEMV_D) {
    GemvRaw raw[FAST_GEMV_D][FAST_GEMV_R];
    UNROLL for (int d = 0; d < FAST_GEMV_D; d++) {
      if (p0 + step * d < pieces) {
        UNROLL for (int r = 0; r < FAST_GEMV_R; r++) gemv_load<WF>(a.w, imin(n0 + r, a.N - 1), 16 * (p0 + step * d), raw[d][r]);
      }
    }
    UNROLL for (int d = 0; d < FAST_GEMV_D; d++) {
      const i64 p = p0 + step * d;
      if (p >= pieces) break;
      gemv_piece<WF, XQ>(a, grp, p, raw[d], acc, bad);
    }
  }
  if (bad) *a.err = 2;
}
// fast_gemv_store: a pair's sums into y.
template <int MM = FAST_GEMV_M>
DEVM void fast_gemv_store(const FastGemvArgs& a, i64 n0, const float (&acc)[FAST_GEMV_R][MM]) {
  UNROLL for (int r = 0; r < FAST_GEMV_R; r++) UNROLL for (int m = 0; m < MM; m++) {
    if (m < a.M && n0 + r < a.N) a.y[m * a.ldy + n0 + r] = a.out_bf16 ? q_bf16(acc[r][m]) : acc[r][m];
  }
}
// fast_gemv_blocks: the launch blocks of a product (4 / KS pairs a block).
DEVM i64 fast_gemv_blocks(i64 N, int KS) {
  const i64 pairs = (N + FAST_GEMV_R - 1) / FAST_GEMV_R, per = 4 / KS;
  return (pairs + per - 1) / per;
}
#ifndef DI_EMULATE
// gemv_finish: a pair's sums at the end of a device block's trip: each warp's lanes
// folded (l ^ 16, ^ 8, … ^ 1), then with KS == 1 lane 0 stores them, else the warps' sums
// meet in part and the pair's first warp adds them in slice order and stores (two
// barriers: every thread of the block calls it once a trip).
template <int MM = FAST_GEMV_M>
DEVM void gemv_finish(const FastGemvArgs& a, i64 n0, int KS, int w, int l, float (&acc)[FAST_GEMV_R][MM], float (*part)[FAST_GEMV_R][MM]) {
  UNROLL for (int off = 16; off >= 1; off >>= 1)
    UNROLL for (int r = 0; r < FAST_GEMV_R; r++) UNROLL for (int m = 0; m < MM; m++)
      if (m < a.M) acc[r][m] += __shfl_xor_sync(0xffffffffu, acc[r][m], off);  // (the rows stored)
  if (KS == 1) {
    if (l == 0) fast_gemv_store<MM>(a, n0, acc);
    return;
  }
  if (l == 0) UNROLL for (int r = 0; r < FAST_GEMV_R; r++) UNROLL for (int m = 0; m < MM; m++) part[w][r][m] = acc[r][m];
  __syncthreads();
  if (l == 0 && w % KS == 0) {
    for (int u = 1; u < KS; u++)
      UNROLL for (int r = 0; r < FAST_GEMV_R; r++) UNROLL for (int m = 0; m < MM; m++) acc[r][m] += part[w + u][r][m];
    fast_gemv_store<MM>(a, n0, acc);
  }
  __syncthreads();  // the sums read before the next trip writes them
}
#endif
template <int WF, bool XQ>
DEVM void fast_gemv(const FastGemvArgs& a, long long GIDX, long long GSTRIDE) {
  const int KS = fast_gemv_ks(a.N);
  const i64 items = fast_gemv_blocks(a.N, KS) * 128;
  typedef float Sums[FAST_GEMV_R][FAST_GEMV_M];
#ifdef DI_EMULATE
  for (i64 i = GIDX; i < items; i += GSTRIDE) {
    if (i % 128 != 0) continue;
    Sums part[4];  // a warp's folded sums
    for (int w = 0; w < 4; w++) {
      const i64 n0 = ((i / 128) * (4 / KS) + w / KS) * FAST_GEMV_R;
      Sums acc[32], nx[32];
      for (int l = 0; l < 32; l++) fast_gemv_lane<WF, XQ>(a, n0, w % KS, KS, l, acc[l]);
      for (int off = 16; off >= 1; off >>= 1) {  // every lane l: its sums + lane l ^ off's
        for (int l = 0; l < 32; l++)
          for (int r = 0; r < FAST_GEMV_R; r++)
            for (int m = 0; m < FAST_GEMV_M; m++) nx[l][r][m] = acc[l][r][m] + acc[l ^ off][r][m];
        memcpy(acc, nx, sizeof acc);
      }
      memcpy(part[w], acc[0], sizeof(Sums));
    }
    for (int w = 0; w < 4; w += KS) {
      Sums t;
      memcpy(t, part[w], sizeof t);
      for (int s = 1; s < KS; s++)
        for (int r = 0; r < FAST_GEMV_R; r++)
          for (int m = 0; m < FAST_GEMV_M; m++) t[r][m] += part[w + s][r][m];
      fast_gemv_store(a, ((i / 128) * (4 / KS) + w / KS) * FAST_GEMV_R, t);
    }
  }
#else
  __shared__ float part[4][FAST_GEMV_R][FAST_GEMV_M];
  // (a block's threads take the same trips: GSTRIDE and items are multiples of 128)
  for (i64 i = GIDX; i < items; i += GSTRIDE) {
    const int tid = (int)(i % 128), w = tid >> 5, l = tid & 31, s = w % KS;
    const i64 n0 = ((i / 128) * (4 / KS) + w / KS) * FAST_GEMV_R;
    Sums acc;
    fast_gemv_lane<WF, XQ>(a, n0, s, KS, l, acc);
    gemv_finish(a, n0, KS, w, l, acc, part);
  }
#endif
}
// fast_gemv_fp8s, fast_gemv_fp8s_q (and the float32 and bf16 forms, fast_gemv_f32s,
// _bf16s and their _q): fast_gemv_*'s products — the same pairs, slices, lanes' pieces,
// products, order and folds, so the same values bit for bit — with each lane's weight
// bytes copied into shared memory by cp.async (16 bytes a copy, into the lane's own
// slots: no other thread reads them) one trip ahead, across the warp's pairs: the next
// trip's copies are in flight while a trip is summed, where fast_gemv_*'s loads sit idle
// behind its products and a launch block ends after one pair. A trip is GEMV_TRIP(WF)
// pieces (FP8 4, bf16 2, float32 1: 8 copies a lane either way, 4 KB a warp; a lane's
// pieces come in the same order, trip or not). Go launches them on a grid of at most
// gemvStagedBlocks launch blocks (each then takes several pairs in turn). An FP8 trip's
// scale bytes are loaded into registers when its copies are issued and put beside them
// after the trip before it is summed. A warp runs T trips a pair, lane 0's count (its
// slice's first piece, 32·s, the lowest): a lane past the pieces copies zeros and sums
// nothing. The emulated device runs fast_gemv_*'s emulated branch. Opt-in
// (DEEPINFER_CUDA_GEMV_STAGED=1): 7-10% slower than fast_gemv_* on the H200 (run 31).
#define GEMV_TRIP(WF) ((WF) == 2 ? FAST_GEMV_D : (WF) == 1 ? 2 : 1)
#define GEMV_WORDS(WF) ((WF) == 2 ? 1 : (WF) == 1 ? 2 : 4)  // 16-byte words a piece
#define GEMV_SLOTS 8  // a lane's copies a trip: GEMV_TRIP · FAST_GEMV_R · GEMV_WORDS
#ifndef DI_EMULATE
// gemv_stage: the copies of lane l's trip from piece p0 (its pieces p0 + step·d) of
// weight rows n0, n0 + 1 into the slots dst[(d·R + r)·words + u][l], FP8 scale bytes
// into sr[d·R + r].
template <int WF>
DEVM void gemv_stage(const FastGemvArgs& a, i64 n0, i64 p0, i64 step, i64 pieces, int l, uint4 (*dst)[32], u32 (&sr)[GEMV_SLOTS]) {
  constexpr int D = GEMV_TRIP(WF), U = GEMV_WORDS(WF);
  UNROLL for (int d = 0; d < D; d++) {
    const i64 p = p0 + step * d;
    const bool in = p < pieces;
    UNROLL for (int r = 0; r < FAST_GEMV_R; r++) {
      const i64 n = imin(n0 + r, a.N - 1);
      const unsigned char* row = (const unsigned char*)a.w.p + n * a.w.cols * (WF == 2 ? 1 : WF == 1 ? 2 : 4);
      UNROLL for (int u = 0; u < U; u++) fast_cp16(&dst[(d * FAST_GEMV_R + r) * U + u][l], row + (in ? 16 * (p * U + u) : 0), in);
      if constexpr (WF == 2) sr[d * FAST_GEMV_R + r] = in ? fast_fp8_scale(a.w, n, 16 * p) : 0u;
    }
  }
  fast_cp_commit();
}
#endif
template <int WF, bool XQ>
DEVM void fast_gemv_staged(const FastGemvArgs& a, long long GIDX, long long GSTRIDE) {
#ifdef DI_EMULATE
  fast_gemv<WF, XQ>(a, GIDX, GSTRIDE);
#else
  typedef float Sums[FAST_GEMV_R][FAST_GEMV_M];
  constexpr int D = GEMV_TRIP(WF), U = GEMV_WORDS(WF), NS = WF == 2 ? GEMV_SLOTS : 1;
  __shared__ uint4 slot[4][2][GEMV_SLOTS][32];
  __shared__ u32 scale[4][2][NS][32];
  __shared__ float part[4][FAST_GEMV_R][FAST_GEMV_M];
  const int KS = fast_gemv_ks(a.N);
  const i64 items = fast_gemv_blocks(a.N, KS) * 128;
  const int tid = (int)(GIDX % 128), w = tid >> 5, l = tid & 31, s = w % KS;
  const i64 pieces = a.K / 16, step = 32 * KS, trip = step * D, first = 32 * s;
  const i64 T = first < pieces ? (pieces - first + trip - 1) / trip : 0;
  // a block's threads take the same pairs (GSTRIDE and items are multiples of 128)
  auto pair = [&](i64 i) { return ((i / 128) * (4 / KS) + w / KS) * FAST_GEMV_R; };
  u32 sr[GEMV_SLOTS];
  int b = 0;
  if (T > 0 && GIDX < items) {
    gemv_stage<WF>(a, pair(GIDX), first + l, step, pieces, l, slot[w][0], sr);
    UNROLL for (int q = 0; q < NS; q++) scale[w][0][q][l] = sr[q];
  }
  bool bad = false;
  for (i64 i = GIDX; i < items; i += GSTRIDE) {
    const i64 n0 = pair(i), grp = a.G > 1 ? n0 / (a.N / a.G) : 0;
    Sums acc;
    UNROLL for (int r = 0; r < FAST_GEMV_R; r++) UNROLL for (int m = 0; m < FAST_GEMV_M; m++) acc[r][m] = 0.0f;
    for (i64 t = 0; t < T; t++) {
      // the next trip (this pair's t + 1 or the next pair's first) copied ahead
      const i64 ni = t + 1 < T ? i : i + GSTRIDE, nt = t + 1 < T ? t + 1 : 0;
      const bool ahead = ni < items;
      if (ahead) gemv_stage<WF>(a, pair(ni), first + l + nt * trip, step, pieces, l, slot[w][b ^ 1], sr);
      else fast_cp_commit();  // (an empty group: the wait below is then this trip's)
      fast_cp_wait<1>();
      const i64 p0 = first + l + t * trip;
      UNROLL for (int d = 0; d < D; d++) {
        const i64 p = p0 + step * d;
        if (p >= pieces) break;
        GemvRaw raw[FAST_GEMV_R];
        UNROLL for (int r = 0; r < FAST_GEMV_R; r++) {
          const int q = (d * FAST_GEMV_R + r) * U;
          raw[r].a = slot[w][b][q][l];
          if constexpr (U > 1) raw[r].b = slot[w][b][q + 1][l];
          if constexpr (U > 2) raw[r].c = slot[w][b][q + 2][l], raw[r].d = slot[w][b][q + 3][l];
          if constexpr (WF == 2) raw[r].u = scale[w][b][d * FAST_GEMV_R + r][l];
        }
        gemv_piece<WF, XQ>(a, grp, p, raw, acc, bad);
      }
      if (ahead) UNROLL for (int q = 0; q < NS; q++) scale[w][b ^ 1][q][l] = sr[q];
      b ^= 1;
    }
    gemv_finish(a, n0, KS, w, l, acc, part);
  }
  if (bad) *a.err = 2;
#endif
}
#ifndef DI_EMULATE
#undef KERNEL_BOUNDS
#define KERNEL_BOUNDS __launch_bounds__(128, 4)
#endif
KERNEL(fast_gemv_f32, FastGemvArgs) { fast_gemv<0, false>(a, GIDX, GSTRIDE); }
KERNEL(fast_gemv_bf16, FastGemvArgs) { fast_gemv<1, false>(a, GIDX, GSTRIDE); }
KERNEL(fast_gemv_fp8, FastGemvArgs) { fast_gemv<2, false>(a, GIDX, GSTRIDE); }
KERNEL(fast_gemv_f32_q, FastGemvArgs) { fast_gemv<0, true>(a, GIDX, GSTRIDE); }
KERNEL(fast_gemv_bf16_q, FastGemvArgs) { fast_gemv<1, true>(a, GIDX, GSTRIDE); }
KERNEL(fast_gemv_fp8_q, FastGemvArgs) { fast_gemv<2, true>(a, GIDX, GSTRIDE); }
KERNEL(fast_gemv_fp8s, FastGemvArgs) { fast_gemv_staged<2, false>(a, GIDX, GSTRIDE); }
KERNEL(fast_gemv_fp8s_q, FastGemvArgs) { fast_gemv_staged<2, true>(a, GIDX, GSTRIDE); }
KERNEL(fast_gemv_f32s, FastGemvArgs) { fast_gemv_staged<0, false>(a, GIDX, GSTRIDE); }
KERNEL(fast_gemv_f32s_q, FastGemvArgs) { fast_gemv_staged<0, true>(a, GIDX, GSTRIDE); }
KERNEL(fast_gemv_bf16s, FastGemvArgs) { fast_gemv_staged<1, false>(a, GIDX, GSTRIDE); }
KERNEL(fast_gemv_bf16s_q, FastGemvArgs) { fast_gemv_staged<1, true>(a, GIDX, GSTRIDE); }
// fast_gemv1_fp8, fast_gemv1_fp8_q: fast_gemv_fp8 and _fp8_q for steps of one
// activation row (Go checks M = 1), written for it: the same pairs, slices, lanes'
// pieces, products, order and folds, so the same values bit for bit, with a lane's two
// weight rows', their scale rows' and its activation row's addresses found once a pair
// (fast_gemv_*'s loads compute each piece's from the row and k in 64-bit arithmetic,
// behind a branch a piece), a trip's loads made unconditionally (a piece past the
// reduction loads the trip's first again, whose products are then skipped), the weight
// bytes read past L1 (ld.global.nc with no L1 allocation: the activation row, which every
// warp of a multiprocessor reads, stays there), and one row's sums in registers.
// fast_gemv1b_fp8, _fp8_q: the same code bounded to six launch blocks a multiprocessor
// instead of four (80 registers a thread). fast_gemv1p_fp8, _fp8_q (PIPE): stages of two
// pieces in two register sets, the next stage's loads issued before a stage is summed.
// Go picks them for one-row steps with DEEPINFER_CUDA_GEMV_ONE (ops_fast.go). The
// emulated device runs fast_gemv's emulated branch for one row.
#if defined(DI_EMULATE) || defined(DI_LANES)
DEVM uint4 ld_stream16(const void* p) { return *(const uint4*)p; }
#else
DEVM uint4 ld_stream16(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}
#endif
template <bool XQ, bool PIPE = false>
DEVM void fast_gemv_one(const FastGemvArgs& a, long long GIDX, long long GSTRIDE) {
#ifdef DI_EMULATE
  fast_gemv<2, XQ>(a, GIDX, GSTRIDE);  // (Go checks M = 1: the one row's values)
#else
  __shared__ float part[4][FAST_GEMV_R][1];
  const int KS = fast_gemv_ks(a.N);
  const i64 items = fast_gemv_blocks(a.N, KS) * 128;
  const int pieces = (int)(a.K / 16), step = 32 * KS;
  // a scale byte's pieces: 2 (32 values: formats 2 and 3) or 8 (128 values: format 5);
  // a scale row's bytes
  const int sh = a.w.fmt == 5 ? 3 : 1;
  const i64 sc = a.w.fmt == 5 ? (a.w.cols + 127) / 128 : (a.w.cols + 31) / 32;
  for (i64 i = GIDX; i < items; i += GSTRIDE) {
    const int tid = (int)(i % 128), w = tid >> 5, l = tid & 31, s = w % KS;
    const i64 n0 = ((i / 128) * (4 / KS) + w / KS) * FAST_GEMV_R, grp = a.G > 1 ? n0 / (a.N / a.G) : 0;
    const unsigned char* wr[FAST_GEMV_R];
    const unsigned char* sr[FAST_GEMV_R];
    UNROLL for (int r = 0; r < FAST_GEMV_R; r++) {
      const i64 n = imin(n0 + r, a.N - 1);
      wr[r] = (const unsigned char*)a.w.p + n * a.w.cols;
      sr[r] = a.w.s + (a.w.fmt == 5 ? (n / 128) * sc : a.w.fmt == 2 ? (n / 32) * sc : n * sc);
    }
    // the activation row (group grp of row 0), or none (error 2, as gemv_x: no products)
    const u32* xq = XQ ? a.xh + grp * (a.Kp / 2) : nullptr;
    const float* xr = nullptr;
    bool ok = true;
    if constexpr (!XQ) {
      const i64 r = a.rows ? a.rows[grp] : grp;
      ok = !a.rows || (r >= 0 && r < a.arows);
      if (ok) xr = a.x + r * a.ldx;
      else *a.err = 2;
    }
    float acc[FAST_GEMV_R][1];
    UNROLL for (int r = 0; r < FAST_GEMV_R; r++) acc[r][0] = 0.0f;
    const int first = 32 * s + l;
    // a stage of S pieces from p0 (this lane's p0, p0 + step, …): load their weight and
    // scale bytes (a piece past the reduction loads p0's again), or sum those that exist
    auto load = [&](auto& raw, auto& u, int p0) {
      constexpr int S = sizeof(u) / sizeof(u[0]);
      UNROLL for (int d = 0; d < S; d++) {
        const int p = p0 + step * d < pieces ? p0 + step * d : p0;
        UNROLL for (int r = 0; r < FAST_GEMV_R; r++) raw[d][r] = ld_stream16(wr[r] + 16 * (i64)p), u[d][r] = sr[r][p >> sh];
      }
    };
    auto sum = [&](const auto& raw, const auto& u, int p0) {
      constexpr int S = sizeof(u) / sizeof(u[0]);
      UNROLL for (int d = 0; d < S; d++) {
        const int p = p0 + step * d;
        if (p >= pieces) break;
        float xv[16];
        if constexpr (XQ) {
          const uint4* q = (const uint4*)(xq + 8 * (i64)p);
          const uint4 h0 = q[0], h1 = q[1];
          const u32 h[8] = {h0.x, h0.y, h0.z, h0.w, h1.x, h1.y, h1.z, h1.w};
          UNROLL for (int j = 0; j < 8; j++) xv[2 * j] = fast_lo(h[j]), xv[2 * j + 1] = fast_hi(h[j]);
        } else {
          const float4* q = (const float4*)(xr + 16 * (i64)p);
          UNROLL for (int j = 0; j < 4; j++) {
            const float4 f = q[j];
            xv[4 * j] = f.x, xv[4 * j + 1] = f.y, xv[4 * j + 2] = f.z, xv[4 * j + 3] = f.w;
          }
        }
        UNROLL for (int r = 0; r < FAST_GEMV_R; r++) {
          GemvRaw o;
          o.a = raw[d][r];
          float wv[16];
          gemv_widen<2>(o, wv);
          float ps = 0.0f;
          UNROLL for (int j = 0; j < 16; j++) ps = fma_fast(wv[j], xv[j], ps);
          acc[r][0] = fma_fast(ps, gemv_scale(u[d][r]), acc[r][0]);
        }
      }
    };
    if constexpr (!PIPE) {
      // a trip of FAST_GEMV_D pieces loaded, then summed
      for (int p0 = first; ok && p0 < pieces; p0 += step * FAST_GEMV_D) {
        uint4 raw[FAST_GEMV_D][FAST_GEMV_R];
        u32 u[FAST_GEMV_D][FAST_GEMV_R];
        load(raw, u, p0);
        sum(raw, u, p0);
      }
    } else {
      // stages of two pieces in two register sets: the next stage's loads issued before
      // this one is summed
      constexpr int S = 2;
      uint4 ra[S][FAST_GEMV_R], rb[S][FAST_GEMV_R];
      u32 ua[S][FAST_GEMV_R], ub[S][FAST_GEMV_R];
      if (ok && first < pieces) load(ra, ua, first);
      for (int p0 = first; ok && p0 < pieces; p0 += 2 * S * step) {
        if (p0 + S * step < pieces) load(rb, ub, p0 + S * step);
        sum(ra, ua, p0);
        if (p0 + S * step >= pieces) break;
        if (p0 + 2 * S * step < pieces) load(ra, ua, p0 + 2 * S * step);
        sum(rb, ub, p0 + S * step);
      }
    }
    gemv_finish<1>(a, n0, KS, w, l, acc, part);
  }
#endif
}
KERNEL(fast_gemv1_fp8, FastGemvArgs) { fast_gemv_one<false>(a, GIDX, GSTRIDE); }
KERNEL(fast_gemv1_fp8_q, FastGemvArgs) { fast_gemv_one<true>(a, GIDX, GSTRIDE); }
KERNEL(fast_gemv1p_fp8, FastGemvArgs) { fast_gemv_one<false, true>(a, GIDX, GSTRIDE); }
KERNEL(fast_gemv1p_fp8_q, FastGemvArgs) { fast_gemv_one<true, true>(a, GIDX, GSTRIDE); }
#ifndef DI_EMULATE
#undef KERNEL_BOUNDS
#define KERNEL_BOUNDS __launch_bounds__(128, 6)
#endif
KERNEL(fast_gemv1b_fp8, FastGemvArgs) { fast_gemv_one<false>(a, GIDX, GSTRIDE); }
KERNEL(fast_gemv1b_fp8_q, FastGemvArgs) { fast_gemv_one<true>(a, GIDX, GSTRIDE); }
#ifndef DI_EMULATE
#undef KERNEL_BOUNDS
#define KERNEL_BOUNDS
#endif
KERNEL(fast_gemm_m4, FastGemmArgs) { fast_gemm_tiles<4, false>(a, GIDX, GSTRIDE); }
KERNEL(fast_gemm_m1_f32, FastGemmArgs) { fast_gemm_tiles<1, true>(a, GIDX, GSTRIDE); }
KERNEL(fast_gemm_m4_f32, FastGemmArgs) { fast_gemm_tiles<4, true>(a, GIDX, GSTRIDE); }

// fast_gemm_blk: the same products for many rows of x (prefill, large batches): a
// launch block of four warps per (128 weight rows, slice, 64 rows of x). Warp w holds
// weight rows 32w..32w+31 as two 16-row tiles, loaded from memory into registers, and
// all 64 rows of x as eight 8-row tiles, so each x fragment read from shared memory
// feeds both weight tiles' mma, and each weight fragment feeds eight x tiles (128 B of
// shared-memory reads a mma, half of a warp with one weight tile). The rows' bf16
// halves, 64 reduction values a step (16 KB), are staged in shared memory by
// asynchronous copies into two buffers: the next step's copies are in flight while the
// warps multiply this step's (a row's 16-byte chunks swizzled by the row's parity, so
// that a quarter-warp's loads hit distinct banks). Every output is the same chain of mma
// as in fast_tile (the same lanes' values in the same k positions, steps and slices;
// for each step q = 0..3: the hi, lo and, for float32 weights, the weight residual's
// mma), so the values are fast_gemm_m4's bit for bit; the emulated device runs fast_tile
// itself over the block's 16-row tiles. Grouped products use it only when a group's
// weight rows are whole blocks of 128 (Go: fastBlockOK).
#define FAST_BLK_ROWS 64
#define FAST_BLK_N 128
// (fast_cp16, fast_cp_commit, fast_cp_wait: numerics.h)
// fast_wprefetch asks for the cache line of weight row r's values from k (a lane's
// fast_wload at the next step) in the L1 cache: a hint, no value depends on it; nothing
// past the weight's rows or K, and nothing off the device.
DEVM void fast_wprefetch(const Weight& w, i64 r, i64 k, i64 N, i64 K) {
#if defined(DI_EMULATE) || defined(DI_LANES)
  (void)w, (void)r, (void)k, (void)N, (void)K;
#else
  if (r >= N || k >= K) return;
  i64 i = r * w.cols + k;
  const char* p = (const char*)w.p + (w.fmt == 0 ? 4 * i : w.fmt == 1 ? 2 * i : w.fmt == 4 ? i / 2 : i);
  asm volatile("prefetch.global.L1 [%0];" ::"l"(p));
#endif
}
// FastFlag: a compile-time flag passed to a generic lambda.
template <bool B>
struct FastFlag {
  static constexpr bool value = B;
};
// FastInt: a compile-time count passed to a generic lambda.
template <int N>
struct FastInt {
  static constexpr int value = N;
};
#ifndef DI_EMULATE
// fast_blk_store: a block-product warp's outputs (weight rows n0.. as two 16-row tiles,
// the live 8-row x tiles from m0; lane g, t's accumulators) through FastGemmStore.
DEVM void fast_blk_store(const FastGemmArgs& a, i64 m0, i64 s, i64 n0, int live, int g, int t, float (&acc)[2][8][4]) {
  FastGemmStore store = {&a, m0, s};
  UNROLL for (int p = 0; p < 2; p++)
    UNROLL for (int j = 0; j < 8; j++) {
      if (j >= live) break;
      UNROLL for (int e = 0; e < 4; e++) {
        i64 n = n0 + 16 * p + g + (e >= 2 ? 8 : 0);
        int c = 8 * j + 2 * t + (e & 1);
        if (n < a.N && m0 + c < a.M) store(0, n, c, acc[p][j][e]);
      }
    }
}
#endif
template <bool F32>
DEVM void fast_gemm_blk_tiles(const FastGemmArgs& a, long long GIDX) {
  i64 blk = GIDX >> 7;
  i64 mb = blk % a.mtiles, s = (blk / a.mtiles) % a.S, nb = blk / (a.mtiles * a.S);
  i64 m0 = mb * FAST_BLK_ROWS, kb = s * a.ks, ke = imin(a.Kp, kb + a.ks);
  i64 grp = a.G > 1 ? (nb * FAST_BLK_N) / (a.N / a.G) : 0;
#ifdef DI_EMULATE
  for (int w = 0; w < FAST_BLK_N / 16; w++)
    for (i64 mt = m0; mt < imin(a.M, m0 + FAST_BLK_ROWS); mt += 32) {
      FastGemmRows rows = {mt, a.M, a.G, grp};
      FastGemmStore store = {&a, mt, s};
      fast_tile<1, 4, F32>(&a.w, nb * FAST_BLK_N + 16 * w, a.N, a.K, kb, ke, a.xh, a.xl, a.Kp / 2, rows, 0, store,
                           a.xexact != 0);
    }
#else
  // [buffer][row][half][16-byte chunk of 64 values' pairs]
  __shared__ uint4 xs[2][FAST_BLK_ROWS * 2 * 8];
  const int tid = (int)(GIDX & 127), warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const i64 P = a.Kp / 2, n0 = nb * FAST_BLK_N + 32 * warp;
  const int live = (int)((imin(a.M - m0, FAST_BLK_ROWS) + 7) / 8);  // activation tiles with rows
  // stage: step k0's halves of the live tiles' rows into xs[buf], as one group of copies
  // (rows past M as zeros). A thread copies chunk sc of half sh of rows sr, sr+8, ...
  // (one a live tile), so its chunk's swizzled place is the same in every row.
  const int sc = tid & 7, sh = (tid >> 3) & 1, sr = tid >> 4, sx = (sr * 2 + sh) * 8 + (sc ^ (sr & 1));
  const u32* sp = sh ? a.xl : a.xh;
  const i64 s0 = ((m0 + sr) * a.G + grp) * P + 4 * sc, sstep = 8 * a.G * P;
  const bool xex = a.xexact != 0;
  auto stage = [&](i64 k0, int buf) {
    for (int it = 0; it < live; it++) {
      bool in = m0 + sr + 8 * it < a.M && !(sh && xex);  // no lo halves for bf16 x
      fast_cp16(&xs[buf][sx + 8 * 2 * 8 * it], in ? sp + s0 + it * sstep + k0 / 2 : a.xh, in);
    }
    fast_cp_commit();
  };
  float acc[2][8][4];
  UNROLL for (int p = 0; p < 2; p++)
    UNROLL for (int j = 0; j < 8; j++) acc[p][j][0] = acc[p][j][1] = acc[p][j][2] = acc[p][j][3] = 0;
  if (kb < ke) stage(kb, 0);
  int buf = 0;  // the buffer of step k0
  for (i64 k0 = kb; k0 < ke; k0 += 64, buf ^= 1) {
    // this step's weights: tile p's rows n0+16p+g (ah[p][0]) and n0+16p+g+8 (ah[p][1])
    i64 k = k0 + 16 * t;
    u32 ah[2][2][8], al[2][2][F32 ? 8 : 1];
    UNROLL for (int p = 0; p < 2; p++) {
      fast_wload<F32>(a.w, n0 + 16 * p + g, k, a.N, a.K, ah[p][0], al[p][0]);
      fast_wload<F32>(a.w, n0 + 16 * p + g + 8, k, a.N, a.K, ah[p][1], al[p][1]);
    }
    // this step's copies landed and seen by every thread, and every warp done with the
    // other buffer (the step before), which then takes the next step's copies
    fast_cp_wait<0>();
    __syncthreads();
    if (k0 + 64 < ke) {
      stage(k0 + 64, buf ^ 1);
      // the next step's weights on their way to L1 while this step multiplies
      if (a.prefetch) UNROLL for (int p = 0; p < 2; p++) {
        fast_wprefetch(a.w, n0 + 16 * p + g, k + 64, a.N, a.K);
        fast_wprefetch(a.w, n0 + 16 * p + g + 8, k + 64, a.N, a.K);
      }
    }
    const uint4* xb = xs[buf];
    // the x tiles; with all eight live, one straight run of loads and mma the compiler
    // may interleave
    auto tiles = [&](auto all, auto ex) {
      UNROLL for (int j = 0; j < 8; j++) {
        if (!decltype(all)::value && j >= live) break;
        int r = 8 * j + g;
        uint4 h0 = xb[(r * 2) * 8 + ((2 * t) ^ (r & 1))], h1 = xb[(r * 2) * 8 + ((2 * t + 1) ^ (r & 1))];
        uint4 l0 = make_uint4(0, 0, 0, 0), l1 = l0;
        if (!decltype(ex)::value)
          l0 = xb[(r * 2 + 1) * 8 + ((2 * t) ^ (r & 1))], l1 = xb[(r * 2 + 1) * 8 + ((2 * t + 1) ^ (r & 1))];
        u32 bh[8] = {h0.x, h0.y, h0.z, h0.w, h1.x, h1.y, h1.z, h1.w};
        u32 bl[8] = {l0.x, l0.y, l0.z, l0.w, l1.x, l1.y, l1.z, l1.w};
        UNROLL for (int q = 0; q < 4; q++) {
          UNROLL for (int p = 0; p < 2; p++) {
            fast_mma(acc[p][j], ah[p][0][2 * q], ah[p][1][2 * q], ah[p][0][2 * q + 1], ah[p][1][2 * q + 1], bh[2 * q],
                     bh[2 * q + 1]);
            if (!decltype(ex)::value)
              fast_mma(acc[p][j], ah[p][0][2 * q], ah[p][1][2 * q], ah[p][0][2 * q + 1], ah[p][1][2 * q + 1], bl[2 * q],
                       bl[2 * q + 1]);
            if (F32)
              fast_mma(acc[p][j], al[p][0][(2 * q) % (F32 ? 8 : 1)], al[p][1][(2 * q) % (F32 ? 8 : 1)],
                       al[p][0][(2 * q + 1) % (F32 ? 8 : 1)], al[p][1][(2 * q + 1) % (F32 ? 8 : 1)], bh[2 * q],
                       bh[2 * q + 1]);
          }
        }
      }
    };
    if (live == 8 && xex) tiles(FastFlag<true>{}, FastFlag<true>{});
    else if (live == 8) tiles(FastFlag<true>{}, FastFlag<false>{});
    else if (xex) tiles(FastFlag<false>{}, FastFlag<true>{});
    else tiles(FastFlag<false>{}, FastFlag<false>{});
  }
  fast_blk_store(a, m0, s, n0, live, g, t, acc);
#endif
}
// The block products' launch bounds: three blocks an SM (at most 168 registers a
// thread) for bf16/FP8 weights, two (255) for float32 weights, whose residual half
// doubles the weight fragments.
#ifndef DI_EMULATE
#undef KERNEL_BOUNDS
#define KERNEL_BOUNDS __launch_bounds__(128, 3)
#endif
KERNEL(fast_gemm_blk, FastGemmArgs) {
  (void)GSTRIDE;
#ifdef DI_EMULATE
  for (i64 b = 0; b < ((a.N + FAST_BLK_N - 1) / FAST_BLK_N) * a.S * a.mtiles; b++) fast_gemm_blk_tiles<false>(a, b << 7);
  (void)GIDX;
#else
  fast_gemm_blk_tiles<false>(a, GIDX);
#endif
}
#ifndef DI_EMULATE
#undef KERNEL_BOUNDS
#define KERNEL_BOUNDS __launch_bounds__(128, 2)
#endif
KERNEL(fast_gemm_blk_f32, FastGemmArgs) {
  (void)GSTRIDE;
#ifdef DI_EMULATE
  for (i64 b = 0; b < ((a.N + FAST_BLK_N - 1) / FAST_BLK_N) * a.S * a.mtiles; b++) fast_gemm_blk_tiles<true>(a, b << 7);
  (void)GIDX;
#else
  fast_gemm_blk_tiles<true>(a, GIDX);
#endif
}
#undef KERNEL_BOUNDS
#define KERNEL_BOUNDS

// fast_gemm_stage_f32: fast_gemm_blk_f32's products (float32 weights; the same launch
// blocks of four warps per (128 weight rows, slice, 64 rows of x), warp w holding weight
// rows 32w..32w+31 and all 64 rows), with the weights staged in shared memory by
// asynchronous copies instead of loaded into registers: fast_gemm_blk_f32 held a step's
// 64 weight values a lane and their split halves (253 registers, two blocks an SM, each
// step's weight loads waited for at its top: run 18a, Nsight Compute, 12.5% occupancy,
// 0.42 eligible warps a scheduler). Here a stage is half a reduction step: h = 0 holds
// the values [16t, 16t+8) of the step for t = 0..3, the ones mma q = 0, 1 read, and h = 1
// the values [16t+8, 16t+16) for q = 2, 3, so that the half-steps in order are the chain's
// own order. A stage is the block's 128 weight rows × 32 float32 values (16 KB, a row's
// 16-byte units swizzled by the row's parity) and x's 64 rows × the two bf16 halves of
// the same 32 values (8 KB, the hi and lo pieces of odd rows swapped); two stages (48
// KB): the next half-step's copies are in flight while the warps multiply this one's. A
// lane reads its two rows' 8 values of a 16-row tile from the stage and splits them into
// bf16 halves there (fast_split16's operations), so a value is split once, by the warp
// that multiplies it. Every output is the same chain of mma as in fast_tile (for each
// step, q = 0..3: the hi, the lo and the weight residual's mma, in the same k positions
// and slices), so the values are fast_gemm_m4_f32's bit for bit. Go binds it for float32
// weights whose rows are whole 16-byte units (cols a multiple of 4), where the copies
// are aligned (fastStageOK).
#ifndef DI_EMULATE
// fast_stage_f32_loop: the half-steps of one block (ALL: its eight x tiles have rows;
// EX: xexact, no lo mma), from shared
// memory ws (two stages of FAST_BLK_N × 8 units) and xs (two of FAST_BLK_ROWS × 8); a
// template so that each case is one straight loop.
template <bool ALL, bool EX>
DEVM void fast_stage_f32_loop(const FastGemmArgs& a, uint4* ws, uint4* xs, int tid, i64 m0, i64 nb0, i64 kb, i64 ke,
                              i64 grp, int live, float (&acc)[2][8][4]) {
  const int warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3, sw = g & 1;
  const i64 P = a.Kp / 2;
  // the weight copies: a thread's unit wv (the values kw0.. of a step's half 0) of rows
  // nb0 + wr0 + 16i, i < wrows
  const int wv = tid & 7, wr0 = tid >> 3, kw0 = 16 * (wv >> 1) + 4 * (wv & 1);
  const float* wsrc = (const float*)a.w.p + (nb0 + wr0) * a.w.cols + kb + kw0;
  const i64 wstride = 16 * a.w.cols;
  const i64 wleft = a.N - nb0 - wr0;
  const int wrows = wleft <= 0 ? 0 : wleft >= 8 * 16 ? 8 : (int)((wleft + 15) / 16);
  uint4* wdst = ws + wr0 * 8 + (wv ^ (wr0 & 1));
  // the x copies: a thread's piece xt of half xhl (0 hi, 1 lo) of rows m0 + xr0 + 16i,
  // i < xrows (no lo halves with EX)
  const int xt = tid & 3, xhl = (tid >> 2) & 1, xr0 = tid >> 3;
  const i64 xleft = a.M - m0 - xr0;
  const int xrows = (EX && xhl) || xleft <= 0 ? 0 : xleft >= 4 * 16 ? 4 : (int)((xleft + 15) / 16);
  const u32* xsrc = (xhl ? a.xl : a.xh) + (xrows > 0 ? ((m0 + xr0) * a.G + grp) * P + kb / 2 + 8 * xt : 0);
  const i64 xstride = 16 * a.G * P;
  uint4* xdst = xs + xr0 * 8 + (xhl ^ (xr0 & 1)) * 4 + xt;
  // stage: half-step u's copies into stage buf, one group (rows past N or M and values
  // past K as zeros)
  auto stage = [&](i64 u, int buf) {
    const i64 koff = 64 * (u >> 1) + 8 * (u & 1);
    const bool kin = kb + koff + kw0 < a.K;
    UNROLL for (int i = 0; i < 8; i++) {
      const bool in = i < wrows && kin;
      fast_cp16(wdst + buf * (FAST_BLK_N * 8) + 16 * 8 * i, in ? (const void*)(wsrc + i * wstride + koff) : a.xh, in);
    }
    UNROLL for (int i = 0; i < 4; i++) {
      const bool in = i < xrows;
      fast_cp16(xdst + buf * (FAST_BLK_ROWS * 8) + 16 * 8 * i, in ? (const void*)(xsrc + i * xstride + koff / 2) : a.xh, in);
    }
    fast_cp_commit();
  };
  // a lane's fragments: weight rows 32·warp + 16p + g (+8), units 2t, 2t+1 (swizzled by
  // the rows' parity, sw); x rows 8j + g, piece t of the hi and lo halves
  const uint4* wl = ws + (32 * warp + g) * 8;
  const uint4* xl = xs + g * 8 + t;
  const int w0 = (2 * t) ^ sw, w1 = (2 * t + 1) ^ sw, xo = sw * 4, lo = (sw ^ 1) * 4;
  const i64 U = 2 * ((ke - kb + 63) / 64);  // half-steps
  if (U > 0) stage(0, 0);
  for (i64 u = 0; u < U; u++) {
    const int buf = (int)(u & 1);
    // this half-step's copies landed and seen by every thread, and every warp done with
    // the other stage (the half-step before), which then takes the next one's copies
    fast_cp_wait<0>();
    __syncthreads();
    if (u + 1 < U) stage(u + 1, buf ^ 1);
    // the A fragments of weight tile p (rows g and g+8, this lane's 8 values), split
    // into bf16 halves (fast_split16's operations)
    const uint4* wb = wl + buf * (FAST_BLK_N * 8);
    auto split = [&](int p, u32 (&ah)[2][4], u32 (&al)[2][4]) {
      UNROLL for (int e = 0; e < 2; e++) {
        const uint4 v0 = wb[(16 * p + 8 * e) * 8 + w0], v1 = wb[(16 * p + 8 * e) * 8 + w1];
        const u32 bits[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
        UNROLL for (int j = 0; j < 4; j++) {
          const float f0 = f32_bits(bits[2 * j]), f1 = f32_bits(bits[2 * j + 1]);
          const u32 hh = fast_rn(f0, f1);
          ah[e][j] = hh;
          al[e][j] = fast_rn(f0 - fast_lo(hh), f1 - fast_hi(hh));
        }
      }
    };
    // tile p's mma with x tile j (q = 2h + f: the hi, the lo and the weight residual's)
    auto mma3 = [&](float* c, const u32 (&ah)[2][4], const u32 (&al)[2][4], uint4 bh, uint4 bl) {
      UNROLL for (int f = 0; f < 2; f++) {
        const u32 b0 = f ? bh.z : bh.x, b1 = f ? bh.w : bh.y, l0 = f ? bl.z : bl.x, l1 = f ? bl.w : bl.y;
        fast_mma(c, ah[0][2 * f], ah[1][2 * f], ah[0][2 * f + 1], ah[1][2 * f + 1], b0, b1);
        if (!EX) fast_mma(c, ah[0][2 * f], ah[1][2 * f], ah[0][2 * f + 1], ah[1][2 * f + 1], l0, l1);
        fast_mma(c, al[0][2 * f], al[1][2 * f], al[0][2 * f + 1], al[1][2 * f + 1], b0, b1);
      }
    };
    const uint4* xb = xl + buf * (FAST_BLK_ROWS * 8);
    u32 ah[2][2][4], al[2][2][4];
    split(0, ah[0], al[0]);
    split(1, ah[1], al[1]);
    UNROLL for (int j = 0; j < 8; j++) {
      if (!ALL && j >= live) break;
      const uint4 bh = xb[64 * j + xo];
      const uint4 bl = EX ? make_uint4(0, 0, 0, 0) : xb[64 * j + lo];
      UNROLL for (int p = 0; p < 2; p++) mma3(acc[p][j], ah[p], al[p], bh, bl);
    }
  }
}
DEVM void fast_gemm_stage_f32_tiles(const FastGemmArgs& a, long long GIDX) {
  i64 blk = GIDX >> 7;
  i64 mb = blk % a.mtiles, s = (blk / a.mtiles) % a.S, nb = blk / (a.mtiles * a.S);
  i64 m0 = mb * FAST_BLK_ROWS, kb = s * a.ks, ke = imin(a.Kp, kb + a.ks);
  i64 grp = a.G > 1 ? (nb * FAST_BLK_N) / (a.N / a.G) : 0;
  // two stages: [stage][weight row][16-byte unit, swizzled], [stage][x row][hi/lo piece]
  __shared__ uint4 ws[2 * FAST_BLK_N * 8];
  __shared__ uint4 xs[2 * FAST_BLK_ROWS * 8];
  const int tid = (int)(GIDX & 127), warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const i64 nb0 = nb * FAST_BLK_N;
  const int live = (int)((imin(a.M - m0, FAST_BLK_ROWS) + 7) / 8);  // activation tiles with rows
  float acc[2][8][4];
  UNROLL for (int p = 0; p < 2; p++)
    UNROLL for (int j = 0; j < 8; j++) acc[p][j][0] = acc[p][j][1] = acc[p][j][2] = acc[p][j][3] = 0;
  const bool xex = a.xexact != 0;
  if (live == 8 && xex) fast_stage_f32_loop<true, true>(a, ws, xs, tid, m0, nb0, kb, ke, grp, live, acc);
  else if (live == 8) fast_stage_f32_loop<true, false>(a, ws, xs, tid, m0, nb0, kb, ke, grp, live, acc);
  else if (xex) fast_stage_f32_loop<false, true>(a, ws, xs, tid, m0, nb0, kb, ke, grp, live, acc);
  else fast_stage_f32_loop<false, false>(a, ws, xs, tid, m0, nb0, kb, ke, grp, live, acc);
  fast_blk_store(a, m0, s, nb0 + 32 * warp, live, g, t, acc);
}
#endif
// The staged kernels: fast_gemm_stage_f32 at four launch blocks an SM (at most 128
// registers a thread; 48 KB of shared memory each) and fast_gemm_stage_f32_b2 at two
// (255), the same code (EnvStageF32; the same values). On the H200 (run 19, ptxas) the
// loop spilled at 128 registers (a 96- to 192-byte stack frame) and at 168 (96 bytes;
// three-block and fenced forms, removed after run 19, as was a form holding one weight
// tile's fragments at a time, which spilled more and was slower); at two blocks it uses
// 210 registers and no stack.
#ifdef DI_EMULATE
#define FAST_STAGE_BODY                                                            \
  (void)GSTRIDE;                                                                   \
  for (i64 b = 0; b < ((a.N + FAST_BLK_N - 1) / FAST_BLK_N) * a.S * a.mtiles; b++) \
    fast_gemm_blk_tiles<true>(a, b << 7);                                          \
  (void)GIDX;
#else
#define FAST_STAGE_BODY \
  (void)GSTRIDE;        \
  fast_gemm_stage_f32_tiles(a, GIDX);
#undef KERNEL_BOUNDS
#define KERNEL_BOUNDS __launch_bounds__(128, 4)
#endif
KERNEL(fast_gemm_stage_f32, FastGemmArgs) { FAST_STAGE_BODY }
#ifndef DI_EMULATE
#undef KERNEL_BOUNDS
#define KERNEL_BOUNDS __launch_bounds__(128, 2)
#endif
KERNEL(fast_gemm_stage_f32_b2, FastGemmArgs) { FAST_STAGE_BODY }
#undef KERNEL_BOUNDS
#define KERNEL_BOUNDS
#undef FAST_STAGE_BODY

// fast_gemm_wide: the block products for bf16 activations (xexact: no lo halves) and
// weights other than float32, with each weight value widened once a launch block: a
// block of four warps per (64 weight rows, slice, 128 rows of x). A step's 64 weight
// rows × 64 values are widened by the block's threads into shared memory (8 KB; each
// thread two pieces of 16 values, their bits loaded from memory before the step before
// multiplies, so the loads are in flight during its mma), and the 128 rows' bf16
// values staged by asynchronous copies into two buffers (32 KB), as fast_gemm_blk does.
// Warp w multiplies all 64 weight rows (four 16-row tiles) with x's rows 32w..32w+31
// (four 8-row tiles), its fragments read from shared memory by 16-byte loads (a row's
// 16-byte chunks swizzled by the row's parity: a quarter-warp's loads hit distinct
// banks). fast_gemm_blk's warps widen their own 32 weight rows for 64 rows of x; here
// a widened value feeds 128 rows, and four warps share one widening. Every output is
// the same chain of mma as in fast_tile (for each step, q = 0..3, the hi mma on the
// same lanes' values in the same k positions), so the values are fast_gemm_m4's bit
// for bit. Go binds it only with xexact (the lo halves are never read) and, for grouped
// products, groups of whole blocks of 64 weight rows (fastWideOK).
#define FAST_WIDE_ROWS 128
#define FAST_WIDE_N 64
DEVM void fast_gemm_wide_tiles(const FastGemmArgs& a, long long GIDX) {
  i64 blk = GIDX >> 7;
  i64 mb = blk % a.mtiles, s = (blk / a.mtiles) % a.S, nb = blk / (a.mtiles * a.S);
  i64 m0 = mb * FAST_WIDE_ROWS, kb = s * a.ks, ke = imin(a.Kp, kb + a.ks);
  i64 grp = a.G > 1 ? (nb * FAST_WIDE_N) / (a.N / a.G) : 0;
#ifdef DI_EMULATE
  for (int w = 0; w < FAST_WIDE_N / 16; w++)
    for (i64 mt = m0; mt < imin(a.M, m0 + FAST_WIDE_ROWS); mt += 32) {
      FastGemmRows rows = {mt, a.M, a.G, grp};
      FastGemmStore store = {&a, mt, s};
      fast_tile<1, 4, false>(&a.w, nb * FAST_WIDE_N + 16 * w, a.N, a.K, kb, ke, a.xh, a.xl, a.Kp / 2, rows, 0, store, true);
    }
#else
  // [buffer][row][16-byte chunk of a step's 64 values, swizzled]
  __shared__ uint4 xs[2][FAST_WIDE_ROWS * 8];
  // the widened weights in fragment order: [16-row tile i][chunk c][half][g ^ 2(c/2)],
  // each a uint4 {row g pair 2·half, row g+8 pair 2·half, row g pair 2·half+1, row g+8
  // pair 2·half+1} of the chunk's four pairs — an mma's four A registers, read by one
  // 16-byte load (the xor: a quarter-warp's loads and stores hit distinct banks)
  __shared__ uint4 ws[FAST_WIDE_N * 8];
  const int tid = (int)(GIDX & 127), warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const i64 P = a.Kp / 2, n0 = nb * FAST_WIDE_N;
  // this warp's x tiles with rows (rows 32·warp + 8j ..)
  const i64 wrows = a.M - m0 - 32 * warp;
  const int live = wrows <= 0 ? 0 : wrows >= 32 ? 4 : (int)((wrows + 7) / 8);
  // stage: step k0's values of the block's rows into xs[buf], one group of copies (rows
  // past M as zeros): a thread copies chunk sc of rows sr, sr+16, ... (xin of them
  // exist), from xsrc on by xstep a row
  const int sc = tid & 7, sr = tid >> 3;
  const i64 xleft = a.M - m0 - sr;
  const int xin = xleft <= 0 ? 0 : (int)((xleft + 15) / 16);
  const u32* xsrc = xin > 0 ? a.xh + ((m0 + sr) * a.G + grp) * P + 4 * sc : a.xh;
  const i64 xstep = 16 * a.G * P;
  uint4* xdst = &xs[0][sr * 8 + (sc ^ (sr & 1))];
  auto stage = [&](i64 k0, int buf) {
    const u32* src = xsrc + k0 / 2;
    UNROLL for (int it = 0; it < FAST_WIDE_ROWS / 16; it++) {
      bool in = it < xin;
      fast_cp16(xdst + buf * (FAST_WIDE_ROWS * 8) + 16 * 8 * it, in ? src : a.xh, in);
      src += xstep;
    }
    fast_cp_commit();
  };
  // the widening: a thread's pieces are rows g and g+8 (wr, wr + 8) of weight tile wi,
  // values 16·wt.. (chunks 2wt, 2wt+1)
  const int wt = tid & 3, wg = (tid >> 2) & 7, wi = tid >> 5;
  const i64 wr = n0 + 16 * wi + wg;
  // FP8 weights (formats 2, 3, 5) whose rows are whole 16-value pieces take the direct
  // loads: the rows' bytes from wp[p] and their scale bytes from sp[p] (one a 2^ssh
  // values); other formats and the edges take fast_wraw / fast_wload
  const int fmt = (int)a.w.fmt;
  const bool fp8 = (fmt == 2 || fmt == 3 || fmt == 5) && (a.w.cols & 15) == 0;
  const int ssh = fmt == 5 ? 7 : 5;
  const unsigned char* wp[2];
  const unsigned char* sp[2];
  UNROLL for (int p = 0; p < 2; p++) {
    i64 r = wr + 8 * p;
    wp[p] = (const unsigned char*)a.w.p + r * a.w.cols + 16 * wt;
    sp[p] = a.w.s + (fmt == 5 ? (r / 128) * ((a.w.cols + 127) / 128) : fmt == 2 ? (r / 32) * ((a.w.cols + 31) / 32)
                                                                              : r * ((a.w.cols + 31) / 32));
  }
  FastRaw raw[2];
  bool whole[2];
  auto fetch = [&](i64 k0) {
    UNROLL for (int p = 0; p < 2; p++) {
      const i64 k = k0 + 16 * wt;
      if (fp8 && wr + 8 * p < a.N && k + 16 <= a.K) {
        raw[p].a = *(const uint4*)(wp[p] + k0);
        raw[p].u = sp[p][k >> ssh];
        whole[p] = true;
      } else {
        whole[p] = fast_wraw(a.w, wr + 8 * p, k, a.N, a.K, raw[p]);
      }
    }
  };
  auto widen = [&](i64 k0) {
    u32 hi[2][8];
    UNROLL for (int p = 0; p < 2; p++) {
      u32 none[1];
      if (whole[p]) {
        if (fp8) e4m3_widen16(raw[p].a, raw[p].u, hi[p]);
        else fast_wwiden(fmt, raw[p], hi[p]);
      } else {
        fast_wload<false>(a.w, wr + 8 * p, k0 + 16 * wt, a.N, a.K, hi[p], none);
      }
    }
    UNROLL for (int h = 0; h < 2; h++)
      UNROLL for (int half = 0; half < 2; half++) {
        const int c = 2 * wt + h, q = 4 * h + 2 * half;
        ws[((wi * 8 + c) * 2 + half) * 8 + (wg ^ (2 * wt))] = make_uint4(hi[0][q], hi[1][q], hi[0][q + 1], hi[1][q + 1]);
      }
  };
  float acc[4][4][4];
  UNROLL for (int i = 0; i < 4; i++)
    UNROLL for (int j = 0; j < 4; j++) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0;
  if (kb < ke) {
    stage(kb, 0);
    fetch(kb);
    widen(kb);
  }
  int buf = 0;  // the buffer of step k0
  for (i64 k0 = kb; k0 < ke; k0 += 64, buf ^= 1) {
    // step k0's copies landed and its weights widened, seen by every thread; every warp
    // done with the other buffer (the step before), which takes the next step's copies
    fast_cp_wait<0>();
    __syncthreads();
    const bool more = k0 + 64 < ke;
    if (more) {
      stage(k0 + 64, buf ^ 1);
      fetch(k0 + 64);
    }
    // fragments: a lane's 16-byte chunk c = 2t + h (pairs 4h..4h+3 of its 32 bytes)
    // feeds mma q = 2h (half 0) and q = 2h + 1 (half 1)
    const uint4* xb = xs[buf] + (32 * warp + g) * 8;
    const int sw = g & 1;  // the parity of every x row this lane reads
    auto step = [&](auto nl) {
      constexpr int L = decltype(nl)::value;
      UNROLL for (int h = 0; h < 2; h++) {
        const int c = 2 * t + h;
        uint4 b[4];
        UNROLL for (int j = 0; j < L; j++) b[j] = xb[8 * 8 * j + (c ^ sw)];
        const uint4* wb = ws + (c * 2) * 8 + (g ^ (2 * t));
        UNROLL for (int i = 0; i < 4; i++) {
          uint4 f0 = wb[i * 8 * 2 * 8], f1 = wb[i * 8 * 2 * 8 + 8];
          UNROLL for (int j = 0; j < L; j++) {
            fast_mma(acc[i][j], f0.x, f0.y, f0.z, f0.w, b[j].x, b[j].y);
            fast_mma(acc[i][j], f1.x, f1.y, f1.z, f1.w, b[j].z, b[j].w);
          }
        }
      }
    };
    switch (live) {
      case 4: step(FastInt<4>{}); break;
      case 3: step(FastInt<3>{}); break;
      case 2: step(FastInt<2>{}); break;
      case 1: step(FastInt<1>{}); break;
      default: break;
    }
    // every warp done with ws before it takes the next step's weights
    __syncthreads();
    if (more) widen(k0 + 64);
  }
  FastGemmStore store = {&a, m0, s};
  UNROLL for (int i = 0; i < 4; i++)
    UNROLL for (int j = 0; j < 4; j++) {
      if (j >= live) break;
      UNROLL for (int e = 0; e < 4; e++) {
        i64 n = n0 + 16 * i + g + (e >= 2 ? 8 : 0);
        int c = 32 * warp + 8 * j + 2 * t + (e & 1);
        if (n < a.N && m0 + c < a.M) store(0, n, c, acc[i][j][e]);
      }
    }
#endif
}
// three launch blocks an SM (at most 168 registers a thread; 40 KB of shared memory each)
#ifndef DI_EMULATE
#undef KERNEL_BOUNDS
#define KERNEL_BOUNDS __launch_bounds__(128, 3)
#endif
KERNEL(fast_gemm_wide, FastGemmArgs) {
  (void)GSTRIDE;
#ifdef DI_EMULATE
  for (i64 b = 0; b < ((a.N + FAST_WIDE_N - 1) / FAST_WIDE_N) * a.S * a.mtiles; b++) fast_gemm_wide_tiles(a, b << 7);
  (void)GIDX;
#else
  fast_gemm_wide_tiles(a, GIDX);
#endif
}
#undef KERNEL_BOUNDS
#define KERNEL_BOUNDS

// ---- the float32 LM head on wgmma (sm_90a) ----
// fast_gemm_wg_f32 (the default outside batch-invariant mode since run 23b;
// DEEPINFER_CUDA_HEAD_WG=0 keeps the mma.sync kernels): products of float32 weights and bf16-valued activations (xexact: V4.1's LM
// head) with G = 1, K a multiple of 64 and rows of K values, on Hopper's warpgroup
// tensor-core instruction. A launch block is one warpgroup (128 threads) per (64
// weight rows, slice, 128 rows of x); x-tiles fastest, so the blocks that share a
// weight tile run together; a slice's sums go to part (fast_sum adds them) as
// FastGemmStore's. Each 64-value step: the x rows' bf16 values (128 rows × 128 bytes,
// the 128-byte swizzle wgmma's descriptors name) copied by cp.async a step ahead into
// one of two buffers (32 KB); each warp's 16 weight rows loaded as float32 pairs a step
// ahead into registers, split there into bf16 hi and lo = bf16(w − hi) in the A
// fragment layout, and multiplied from registers: per 16 values, wgmma m64n128k16 with
// the hi fragments, then with the lo ones, into the same float32 accumulators. Not the
// chain of the mma.sync kernels (the tensor cores' own order inside a 16-value step):
// near their values (TestHeadWGNearStaged), not equal; so not used in batch-invariant
// mode, where a row's value must not depend on the step's row count.
#define WG_BN 128
#ifdef DI_EMULATE
template <bool PIPE, int XS = 2, int WGS = 1>
DEVM void wg_f32_body(const FastGemmArgs& a, i64 GIDX, i64 GSTRIDE) {
  // the emulated device (both forms): each product a float32 sum, per 16 values the x·w_hi products
  // then the x·w_lo ones, k in order (the order the DI_LANES build's wgmma stand-in
  // sums in): near the device's values, as the device's are near fast_gemm_m4's
  const i64 P = a.Kp / 2;
  for (i64 i = GIDX; i < a.S * a.M * a.N; i += GSTRIDE) {
    const i64 sl = i / (a.M * a.N), m = i / a.N % a.M, n = i % a.N;
    const float* wr = (const float*)a.w.p + n * a.w.cols;
    float acc = 0;
    for (i64 k0 = sl * a.ks; k0 < imin(a.K, sl * a.ks + a.ks); k0 += 16) {
      u32 h[8], l[8];
      for (int j = 0; j < 8; j++) {
        h[j] = fast_rn(wr[k0 + 2 * j], wr[k0 + 2 * j + 1]);
        l[j] = fast_rn(wr[k0 + 2 * j] - fast_lo(h[j]), wr[k0 + 2 * j + 1] - fast_hi(h[j]));
      }
      for (int half = 0; half < 2; half++)
        for (int j = 0; j < 8; j++) {
          const u32 x2 = a.xh[m * P + k0 / 2 + j], w2 = half ? l[j] : h[j];
          acc += fast_lo(x2) * fast_lo(w2);
          acc += fast_hi(x2) * fast_hi(w2);
        }
    }
    FastGemmStore{&a, m, sl}(0, n, 0, acc);
  }
}
#else
// wg_desc: a wgmma shared-memory matrix descriptor for a K-major tile at addr (1024-byte
// aligned, rows of 128 bytes, the 128-byte swizzle: 8-row groups 1024 bytes apart).
DEV u64 wg_desc(u32 addr) {
  return (u64)((addr & 0x3FFFF) >> 4) | ((u64)1 << 16) | ((u64)(1024 >> 4) << 32) | ((u64)1 << 62);
}
// With DI_LANES (lanes_test.go's host build of the device branch) the wgmma
// instructions, the shared addresses and the proxy fence are the harness's stand-ins:
// a warpgroup's collective operations, the products read from shared memory through
// the descriptors when a wait lets them complete.
#ifdef DI_LANES
DEV void wg_proxy_fence() {}
DEV void wg_fence() { lanes_wg_fence(); }
DEV void wg_commit() { lanes_wg_commit(); }
DEV void wg_wait0() { lanes_wg_wait(0); }
DEV void wg_wait1() { lanes_wg_wait(1); }
DEV void nbar_sync(int id, int n) { lanes_nbar(id, n, true); }
DEV void nbar_arrive(int id, int n) { lanes_nbar(id, n, false); }
DEVM void wg_m64n128(float (&d)[64], const u32 (&a)[4], u64 desc) { lanes_wg_mma(d, a, 0, desc); }
DEVM void wg_ss_m64n128(float (&d)[64], u64 da, u64 db) { lanes_wg_mma(d, nullptr, da, db); }
DEVM void wg_ss_m64n64(float (&d)[32], u64 da, u64 db) { lanes_wg_mma_n64(d, da, db); }
#define WG_KEEP(d)
#define WG_KEEPN(d, n)
#else
// wg_proxy_fence: this thread's earlier writes to shared memory (stores, landed
// asynchronous copies) seen by the tensor cores' reads (the async proxy)
DEV void wg_proxy_fence() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
DEV void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
DEV void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
DEV void wg_wait0() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }
// wg_wait1: every product group but the last committed complete
DEV void wg_wait1() { asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory"); }
// nbar_sync, nbar_arrive: named barrier id (1-15) of n threads: wait for the phase to
// complete, or count this thread in it and go on (its earlier shared-memory writes seen
// by the threads the phase releases)
DEV void nbar_sync(int id, int n) { asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(n) : "memory"); }
DEV void nbar_arrive(int id, int n) { asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(n) : "memory"); }
// WG_KEEP: the accumulators as written by the products just waited for (nothing reads
// them before the wait)
#define WG_KEEP(d) WG_KEEPN(d, 64)
#define WG_KEEPN(d, n) UNROLL for (int j_ = 0; j_ < (n); j_++) asm volatile("" : "+f"(d[j_])::"memory")
// the 64 float32 accumulators of a warpgroup's m64n128 product: the registers in the
// instruction, and the asm operands (the first 64)
#define WG_D64_REGS                                                                     \
  "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"                              \
  "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"                    \
  "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"                    \
  "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63"
// (the 32 of an m64n64 product)
#define WG_D32_REGS                                                                     \
  "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"                              \
  "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31"
#define WG_D8_OUT(d, i)                                                                  \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
      "+f"(d[i + 6]), "+f"(d[i + 7])
#define WG_D64_OUT(d)                                                                    \
  WG_D8_OUT(d, 0), WG_D8_OUT(d, 8), WG_D8_OUT(d, 16), WG_D8_OUT(d, 24), WG_D8_OUT(d, 32), \
      WG_D8_OUT(d, 40), WG_D8_OUT(d, 48), WG_D8_OUT(d, 56)
// wg_m64n128: d += a (registers: this warp's 16 rows × 16 values, mma.sync's A layout)
// × the 16 values of 128 x rows the descriptor names
DEVM void wg_m64n128(float (&d)[64], const u32 (&a)[4], u64 desc) {
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %69, 0;\n"
      " wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
      WG_D64_REGS
      "}, {%64, %65, %66, %67}, %68, p, 1, 1, 0;\n}\n"
      : WG_D64_OUT(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(1));
}
// wg_ss_m64n128: d += the 64 rows × 16 values descriptor da names × the 16 values of
// the 128 rows db names
DEVM void wg_ss_m64n128(float (&d)[64], u64 da, u64 db) {
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %66, 0;\n"
      " wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
      WG_D64_REGS
      "}, %64, %65, p, 1, 1, 0, 0;\n}\n"
      : WG_D64_OUT(d)
      : "l"(da), "l"(db), "r"(1));
}
// wg_ss_m64n64: the same with the 64 rows db names (32 accumulators a thread)
DEVM void wg_ss_m64n64(float (&d)[32], u64 da, u64 db) {
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %34, 0;\n"
      " wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {" WG_D32_REGS "}, %32, %33, p, 1, 1, 0, 0;\n}\n"
      : WG_D8_OUT(d, 0), WG_D8_OUT(d, 8), WG_D8_OUT(d, 16), WG_D8_OUT(d, 24)
      : "l"(da), "l"(db), "r"(1));
}
#endif
// wg_rows_copy: step k of ROWS rows (from r0, rows of ld 16-bit values at base) into a
// buffer of the wgmma kernels: 8 pieces of 16 bytes a row, piece c of row r at piece
// c ^ (r & 7) (the 128-byte swizzle the descriptors name); rows past nrows zero; one
// group of copies. The x rows' halves (wg_xcopy) and the bf16 weight rows (wg_wcopy).
// (THREADS: the block's threads sharing the copies, 128 or 256; COMMIT false: the
// copies join the group the caller commits next)
template <int ROWS = WG_BN, int THREADS = 128, bool COMMIT = true>
DEVM void wg_rows_copy(const unsigned short* base, i64 ld, i64 nrows, unsigned short* dst, i64 r0, i64 k, int tid) {
  UNROLL for (int i = 0; i < ROWS * 8 / THREADS; i++) {
    const int p = tid + THREADS * i, r = p >> 3, c = p & 7;
    const bool in = r0 + r < nrows;
    fast_cp16(&dst[r * 64 + ((c ^ (r & 7)) << 3)], base + (in ? (r0 + r) * ld + k + 8 * c : 0), in);
  }
  if (COMMIT) fast_cp_commit();
}
// wg_xcopy: the x rows' hi halves at step k, ROWS rows from m0, into a buffer xb (one
// group; wg_xcopy_grp: with G groups, group grp's values of each row, x's rows being
// (m·G + grp) · Kp values in)
template <int ROWS = WG_BN, int THREADS = 128>
DEVM void wg_xcopy(const FastGemmArgs& a, unsigned short* xb, i64 m0, i64 k, int tid) {
  wg_rows_copy<ROWS, THREADS>((const unsigned short*)a.xh, a.Kp, a.M, xb, m0, k, tid);
}
DEVM void wg_xcopy_grp(const FastGemmArgs& a, unsigned short* xb, i64 m0, i64 k, int tid, i64 grp) {
  wg_rows_copy((const unsigned short*)a.xh + grp * a.Kp, a.G * a.Kp, a.M, xb, m0, k, tid);
}
// wg_store: a wgmma block's 4·NJ accumulators a thread (an m64n(8·NJ) product) into the
// product: d[4j + q] is row r0 + 16·warp + g (+ 8 for q ≥ 2) and column c0 + 8j + 2t +
// (q & 1), the rows x rows (XROWS: wg_r_body's) or weight rows (wg_f32_body's,
// wg_fp8_body's)
template <bool XROWS, int NJ = 16>
DEVM void wg_store(const FastGemmArgs& a, i64 sl, i64 r0, i64 c0, int warp, int g, int t, const float (&d)[4 * NJ]) {
  UNROLL for (int j = 0; j < NJ; j++) {
    UNROLL for (int q = 0; q < 4; q++) {
      const i64 r = r0 + 16 * warp + g + (q >= 2 ? 8 : 0), c = c0 + 8 * j + 2 * t + (q & 1);
      const i64 m = XROWS ? r : c, n = XROWS ? c : r;
      if (n < a.N && m < a.M) FastGemmStore{&a, m, sl}(0, n, 0, d[4 * j + q]);
    }
  }
}
// (XS: x buffers, a ring of XS steps, each step's x rows copied XS − 1 steps ahead;
// WGS: warpgroups a block, each its own 64 weight rows against the block's x rows)
template <bool PIPE, int XS = 2, int WGS = 1>
DEVM void wg_f32_body(const FastGemmArgs& a, i64 GIDX, i64 GSTRIDE) {
  (void)GSTRIDE;
  static_assert(XS == 2 || (PIPE && XS == 3), "wg_f32_body: a ring of three x buffers with two fragment sets");
  __shared__ __align__(1024) unsigned short xs[XS][WG_BN * 64];
  const int tid = (int)threadIdx.x, q = WGS == 1 ? 0 : tid >> 7, wt = WGS == 1 ? tid : tid & 127;
  const int warp = wt >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const i64 mtiles = (a.M + WG_BN - 1) / WG_BN, blk = GIDX / (128 * WGS);
  const i64 m0 = blk % mtiles * WG_BN, sl = blk / mtiles % a.S, nb = blk / (mtiles * a.S) * (64 * WGS), n0 = nb + 64 * q;
  if (nb >= a.N) return;  // (a warpgroup past N still copies x rows for the other one)
  const i64 kb = sl * a.ks, steps = (imin(a.K, kb + a.ks) - kb) / 64;
  // this thread's two weight rows (clamped: rows past N are loaded, not stored)
  const float* w0 = (const float*)a.w.p + imin(n0 + 16 * warp + g, a.N - 1) * a.w.cols;
  const float* w1 = (const float*)a.w.p + imin(n0 + 16 * warp + g + 8, a.N - 1) * a.w.cols;
  // the step's weight pairs: [16-value piece s][row 0/1][pair 2t or 2t + 8]
  float2 wv[4][2][2];
  auto wload = [&](i64 k) {
    UNROLL for (int s = 0; s < 4; s++) {
      const i64 c = k + 16 * s + 2 * t;
      wv[s][0][0] = *(const float2*)(w0 + c), wv[s][0][1] = *(const float2*)(w0 + c + 8);
      wv[s][1][0] = *(const float2*)(w1 + c), wv[s][1][1] = *(const float2*)(w1 + c + 8);
    }
  };
  auto xcopy = [&](i64 k, int b) { wg_xcopy<WG_BN, 128 * WGS>(a, xs[b], m0, k, tid); };
  float d[64];
  UNROLL for (int i = 0; i < 64; i++) d[i] = 0.0f;
  u32 base[XS];
  UNROLL for (int b = 0; b < XS; b++) base[b] = smem_addr(&xs[b][0]);
  // split: wv's pairs as the A fragments, bf16 hi and lo = bf16(w − hi); fragment
  // register j: rows g (j even) or g + 8 (odd), values 2t.. (j < 2) or 2t + 8..
  auto split = [&](u32 (&hi)[4][4], u32 (&lo)[4][4]) {
    UNROLL for (int s = 0; s < 4; s++) {
      UNROLL for (int j = 0; j < 4; j++) {
        const float2 v = wv[s][j & 1][j >> 1];
        hi[s][j] = fast_rn(v.x, v.y);
        lo[s][j] = fast_rn(v.x - fast_lo(hi[s][j]), v.y - fast_hi(hi[s][j]));
      }
    }
  };
  // the step's x rows landed and seen by the tensor cores; every warp's products of the
  // step before done (its buffer takes the copies of the step XS − 1 ahead; XS > 2: an
  // empty group past the end, so that every step's wait counts the same groups)
  int xb = 0;  // (XS > 2) step i's x buffer, i mod XS
  auto enter = [&](i64 i) {
    fast_cp_wait<XS - 2>();
    wg_proxy_fence();
    __syncthreads();
    if constexpr (XS == 2) {
      if (i + 1 < steps) xcopy(kb + 64 * (i + 1), (int)(i & 1) ^ 1);
    } else {
      const int pb = xb == 0 ? XS - 1 : xb - 1;
      if (i + XS - 1 < steps) xcopy(kb + 64 * (i + XS - 1), pb);
      else fast_cp_commit();
    }
  };
  auto issue = [&](i64 i, const u32 (&hi)[4][4], const u32 (&lo)[4][4]) {
    wg_fence();
    u32 bx;
    if constexpr (XS == 2) bx = base[i & 1];
    else bx = base[0] + (u32)xb * (WG_BN * 128), xb = xb + 1 == XS ? 0 : xb + 1;
    const u64 desc = wg_desc(bx);
    UNROLL for (int s = 0; s < 4; s++) {
      wg_m64n128(d, hi[s], desc + 2 * s);  // + 32 bytes a 16-value piece
      wg_m64n128(d, lo[s], desc + 2 * s);
    }
    wg_commit();
  };
  if (steps > 0) {
    xcopy(kb, 0);
    wload(kb);
  }
  UNROLL for (int s = 1; s < XS - 1; s++) {
    if (s < steps) xcopy(kb + 64 * s, s);
    else fast_cp_commit();
  }
  if constexpr (!PIPE) {
    // a step: split its weights, load the next step's, multiply, wait
    for (i64 i = 0; i < steps; i++) {
      enter(i);
      u32 hi[4][4], lo[4][4];
      split(hi, lo);
      if (i + 1 < steps) wload(kb + 64 * (i + 1));
      issue(i, hi, lo);
      wg_wait0();
      WG_KEEP(d);
    }
  } else {
    // two sets of fragments: while step i's products run (on one set), step i + 1's
    // weights are split into the other and step i + 2's loaded
    u32 h0[4][4], l0[4][4], h1[4][4], l1[4][4];
    if (steps > 0) {
      split(h0, l0);
      if (steps > 1) wload(kb + 64);
    }
    auto step = [&](i64 i, const u32 (&ch)[4][4], const u32 (&cl)[4][4], u32 (&nh)[4][4], u32 (&nl)[4][4]) {
      enter(i);
      issue(i, ch, cl);
      if (i + 1 < steps) {
        split(nh, nl);
        if (i + 2 < steps) wload(kb + 64 * (i + 2));
      }
      wg_wait0();
      WG_KEEP(d);
    };
    for (i64 i = 0; i < steps; i += 2) {
      step(i, h0, l0, h1, l1);
      if (i + 1 < steps) step(i + 1, h1, l1, h0, l0);
    }
  }
  wg_store<false>(a, sl, n0, m0, warp, g, t, d);
}
#endif
KERNEL(fast_gemm_wg_f32, FastGemmArgs) { wg_f32_body<false>(a, GIDX, GSTRIDE); }
// fast_gemm_wg_f32p: the same products in the same order (the same values), with two
// sets of A fragments: step i + 1's weights split, and step i + 2's loaded, while step
// i's products run (V4.1's LM head by default; DEEPINFER_CUDA_HEAD_WG=1 keeps
// fast_gemm_wg_f32)
KERNEL(fast_gemm_wg_f32p, FastGemmArgs) { wg_f32_body<true>(a, GIDX, GSTRIDE); }
// fast_gemm_wg_f32p3w: fast_gemm_wg_f32p with the x rows copied two steps ahead into a
// ring of three buffers (48 KB) and in launch blocks of two warpgroups (256 threads, 128
// weight rows against one copy of the x rows: half the x bytes read from L2): the same
// products in the same order (DEEPINFER_CUDA_HEAD_WG=pair; run 40 on an H100: 1.665 →
// 1.622 ms at V4.1 batch 256, 0.973 → 0.960 at 64, one profiled step each: not the
// default). The same two changes to the wide FP8 products lost there (removed).
#ifndef DI_EMULATE
#undef KERNEL_BOUNDS
#define KERNEL_BOUNDS __launch_bounds__(256, 1)
#endif
KERNEL(fast_gemm_wg_f32p3w, FastGemmArgs) { wg_f32_body<true, 3, 2>(a, GIDX, GSTRIDE); }
#undef KERNEL_BOUNDS
#define KERNEL_BOUNDS

// fast_gemm_wg_fp8: fast_gemm_wide's products (bf16 activations, more than fastWideMin
// rows) for FP8 weights (formats 2, 3 and 5) with G = 1, rows of K values, K a multiple
// of 64, on wgmma with both operands in shared memory. A launch block is one warpgroup
// per (64 weight rows, slice, 128 rows of x), x-tiles fastest, as fast_gemm_wg_f32's.
// Each 64-value step: the x rows' bf16 values copied by cp.async a step ahead into one
// of two buffers (32 KB, the 128-byte swizzle); the 64 weight rows' FP8 bytes loaded a
// step ahead into registers (a thread: 32 values of one row, two 16-byte loads and a
// scale byte), widened (e4m3_widen16: exact) while the step's products run, and stored
// into the other of two weight buffers (16 KB, the same swizzle); per 16 values one
// wgmma m64n128k16 reading both from shared memory. Near fast_gemm_wide's values (the
// same bf16 operands; the tensor cores' own order inside a 16-value step), not equal:
// not used in batch-invariant mode (DEEPINFER_CUDA_WIDE_WG=0 keeps fast_gemm_wide).
#ifdef DI_EMULATE
template <bool AHEAD2, int BN = WG_BN, int WGS = 1>
DEVM void wg_fp8_body(const FastGemmArgs& a, i64 GIDX, i64 GSTRIDE) {
  // the emulated device: each product as the widened pairs' float32 sum, k in order (a
  // weight row's slice widened once, into wl and wh, for every row of x)
  (void)GIDX, (void)GSTRIDE;
  const i64 P = a.Kp / 2;
  float* wl = new float[a.ks / 2 + 8];
  float* wh = new float[a.ks / 2 + 8];
  for (i64 sl = 0; sl < a.S; sl++)
    for (i64 n = 0; n < a.N; n++) {
      const unsigned char* wr = (const unsigned char*)a.w.p + n * a.w.cols * (a.w.fmt == 1 ? 2 : 1);
      const i64 k0 = sl * a.ks, np = (imax(imin(a.K, k0 + a.ks), k0) - k0 + 15) / 16 * 8;
      for (i64 k = k0; k < imin(a.K, k0 + a.ks); k += 16) {
        u32 h[8];
        if (a.w.fmt == 1) {
          memcpy(h, wr + 2 * k, 32);  // bf16 weights (fast_gemm_wg_bf16w): the pairs as they are
        } else {
          uint4 q;
          memcpy(&q, wr + k, 16);
          e4m3_widen16(q, fast_fp8_scale(a.w, n, k), h);
        }
        for (int j = 0; j < 8; j++) wl[(k - k0) / 2 + j] = fast_lo(h[j]), wh[(k - k0) / 2 + j] = fast_hi(h[j]);
      }
      // (groups: fast_gemm_wg_bf16w's; the FP8 kernels take one group)
      const i64 grp = a.G > 1 ? n / (a.N / a.G) : 0;
      for (i64 m = 0; m < a.M; m++) {
        const u32* x = a.xh + (m * a.G + grp) * P + k0 / 2;
        float acc = 0;
        for (i64 p = 0; p < np; p++) {
          acc += fast_lo(x[p]) * wl[p];
          acc += fast_hi(x[p]) * wh[p];
        }
        FastGemmStore{&a, m, sl}(0, n, 0, acc);
      }
    }
  delete[] wl;
  delete[] wh;
}
// (fast_gemm_wg_bf16w: the same loop, the weight pairs as they are)
DEVM void wg_bf16w_body(const FastGemmArgs& a, i64 GIDX, i64 GSTRIDE) { wg_fp8_body<true>(a, GIDX, GSTRIDE); }
#else
// wg_align1k: p (dynamic shared memory) rounded up to the next 1,024-byte shared address,
// where a tile in the 128-byte swizzle starts. The DI_LANES harness aligns the host
// address instead: its descriptor windows start at the first address a descriptor
// names, which must be a tile's.
DEVM unsigned char* wg_align1k(unsigned char* p) {
#ifdef DI_LANES
  return (unsigned char*)(((uintptr_t)p + 1023) & ~(uintptr_t)1023);
#else
  return p + ((1024 - (smem_addr(p) & 1023)) & 1023);
#endif
}
// WgBlock: a wgmma products block's place (wg_fp8_body's and wg_bf16w_body's launch
// blocks: 64 weight rows from n0, slice sl, BN x rows from m0, x-tiles fastest), its
// reduction's start kb and 64-value steps, and its group (G > 1: each group's N / G
// weight rows a multiple of 64); false for a block past the weight rows
struct WgBlock {
  i64 m0, sl, n0, kb, steps, grp;
};
// (WGS: 64·WGS weight rows from n0, each of WGS warpgroups 64 of them; TPB: the block's
// threads)
template <int BN, int WGS = 1, int TPB = 128 * WGS>
DEVM bool wg_block(const FastGemmArgs& a, i64 GIDX, WgBlock& o) {
  const i64 mtiles = (a.M + BN - 1) / BN, blk = GIDX / TPB;
  o.m0 = blk % mtiles * BN, o.sl = blk / mtiles % a.S, o.n0 = blk / (mtiles * a.S) * (64 * WGS);
  if (o.n0 >= a.N) return false;
  o.kb = o.sl * a.ks, o.steps = (imin(a.K, o.kb + a.ks) - o.kb) / 64;
  o.grp = a.G > 1 ? o.n0 / (a.N / a.G) : 0;
  return true;
}
// WgFP8Raw: one thread's weight bytes of a step (32 FP8 codes, their scale byte)
struct WgFP8Raw {
  uint4 a, b;
  u32 u;
};
// (BN: the x rows a block takes, 128 or 64 — wgmma m64n128k16 or m64n64k16; WGS: the
// warpgroups a block, 1, or 2 sharing one copy of the x rows, each its own 64 weight
// rows, in 64 KB of dynamic shared memory)
template <bool AHEAD2, int BN = WG_BN, int WGS = 1>
DEVM void wg_fp8_body(const FastGemmArgs& a, i64 GIDX, i64 GSTRIDE) {
  (void)GSTRIDE;
  static_assert(BN == 128 || BN == 64, "wg_fp8_body: 128 or 64 x rows a block");
  static_assert(WGS == 1 || (WGS == 2 && BN == 128), "wg_fp8_body: two warpgroups with 128 x rows");
  // xs: x rows, two steps; ws: widened weights, two steps (WGS = 2: each step's 128
  // rows, warpgroup q's 64 from row 64q)
  unsigned short(*xs)[BN * 64];
  unsigned short(*ws)[WGS * 64 * 64];
  if constexpr (WGS == 1) {
    __shared__ __align__(1024) unsigned short xs1[2][BN * 64];
    __shared__ __align__(1024) unsigned short ws1[2][64 * 64];
    xs = xs1, ws = ws1;
  } else {
    DYN_SHARED(wg2_sm);
    unsigned char* sm = wg_align1k(wg2_sm);
    xs = (unsigned short(*)[BN * 64])sm;
    ws = (unsigned short(*)[WGS * 64 * 64])(sm + 2 * BN * 128);
  }
  const int tid = (int)threadIdx.x, q = WGS == 1 ? 0 : tid >> 7, wt = WGS == 1 ? tid : tid & 127;
  WgBlock blk;
  if (!wg_block<BN, WGS>(a, GIDX, blk)) return;  // (a warpgroup past N still widens rows and copies x rows for the other)
  const i64 m0 = blk.m0, sl = blk.sl, n0 = blk.n0 + 64 * q, kb = blk.kb, steps = blk.steps;
  // this thread's weight piece: row wr of the tile (clamped: rows past N are loaded, not
  // stored), values 32·wh.. of each step, and its scale bytes (one a 2^ssh values)
  const int wr = wt >> 1, wh = wt & 1, fmt = (int)a.w.fmt, ssh = fmt == 5 ? 7 : 5;
  const i64 row = imin(n0 + wr, a.N - 1);
  const unsigned char* wp = (const unsigned char*)a.w.p + row * a.w.cols + 32 * wh;
  const unsigned char* sp = a.w.s + (fmt == 5 ? (row / 128) * ((a.w.cols + 127) / 128)
                                     : fmt == 2 ? (row / 32) * ((a.w.cols + 31) / 32) : row * ((a.w.cols + 31) / 32));
  // a step's weight bytes as loaded: two sets, so that with AHEAD2 step i + 2's are in
  // flight while step i + 1's are widened (set j holds the steps of parity j ^ 1 there)
  WgFP8Raw set0, set1;
  auto wfetch = [&](i64 k, WgFP8Raw& r) {
    r.a = *(const uint4*)(wp + k);
    r.b = *(const uint4*)(wp + k + 16);
    r.u = sp[(k + 32 * wh) >> ssh];
  };
  // the widened 32 values into weight buffer b: pieces 4·wh .. 4·wh + 3 of row wr (8
  // values each) at piece c ^ (wr & 7)
  auto wstore = [&](int b, const WgFP8Raw& r) {
    u32 h[16];
    e4m3_widen16(r.a, r.u, h);
    e4m3_widen16(r.b, r.u, h + 8);
    UNROLL for (int c = 0; c < 4; c++)
      *(uint4*)&ws[b][(64 * q + wr) * 64 + (((4 * wh + c) ^ (wr & 7)) << 3)] = make_uint4(h[4 * c], h[4 * c + 1], h[4 * c + 2], h[4 * c + 3]);
  };
  auto xcopy = [&](i64 k, int b) { wg_xcopy<BN, 128 * WGS>(a, xs[b], m0, k, tid); };
  float d[BN / 2];
  UNROLL for (int i = 0; i < BN / 2; i++) d[i] = 0.0f;
  u32 xbase[2], wbase[2];
  UNROLL for (int b = 0; b < 2; b++) xbase[b] = smem_addr(&xs[b][0]), wbase[b] = smem_addr(&ws[b][64 * 64 * q]);
  if (steps > 0) {
    xcopy(kb, 0);
    wfetch(kb, set0);
    wstore(0, set0);
  }
  if (AHEAD2) {
    if (steps > 1) wfetch(kb + 64, set1);
    if (steps > 2) wfetch(kb + 128, set0);
  }
  // step i; nx: the set holding step i + 1's weight bytes (AHEAD2: loaded two steps
  // before, refilled with step i + 3's once widened; else loaded here, after the barrier)
  auto step = [&](i64 i, WgFP8Raw& nx) {
    const int b = (int)(i & 1);
    fast_cp_wait<0>();
    // this thread's stores to the weight buffer and its copies seen by the tensor cores
    wg_proxy_fence();
    __syncthreads();  // step i's x rows and weights in place; every warp's step i − 1 products done
    const bool more = i + 1 < steps;
    if (more) {
      xcopy(kb + 64 * (i + 1), b ^ 1);
      if (!AHEAD2) wfetch(kb + 64 * (i + 1), nx);
    }
    wg_fence();
    const u64 da = wg_desc(wbase[b]), db = wg_desc(xbase[b]);
    UNROLL for (int s = 0; s < 4; s++) {  // + 32 bytes a 16-value piece
      if constexpr (BN == 128) wg_ss_m64n128(d, da + 2 * s, db + 2 * s);
      else wg_ss_m64n64(d, da + 2 * s, db + 2 * s);
    }
    wg_commit();
    // the next step's weights widened while these products run (buffer b ^ 1 was last
    // read by step i − 1's, waited for)
    if (more) wstore(b ^ 1, nx);
    if (AHEAD2 && i + 3 < steps) wfetch(kb + 64 * (i + 3), nx);
    wg_wait0();
    WG_KEEPN(d, BN / 2);
  };
  if (AHEAD2) {
    for (i64 i = 0; i < steps; i += 2) {
      step(i, set1);
      if (i + 1 < steps) step(i + 1, set0);
    }
  } else {
    for (i64 i = 0; i < steps; i++) step(i, set0);
  }
  const int warp = wt >> 5, g = (tid & 31) >> 2, t = tid & 3;
  wg_store<false, BN / 8>(a, sl, n0, m0, warp, g, t, d);
}
// wg_bf16w_body: the products of bf16 weights (format 1) as wg_fp8_body's blocks (64
// weight rows, slice, 128 rows of x; G groups of a multiple of 64 weight rows, a block's
// x values its group's), both operands copied by cp.async a step ahead into two buffers
// each (the weights need no widening): per 16 values one wgmma m64n128k16
DEVM void wg_bf16w_body(const FastGemmArgs& a, i64 GIDX, i64 GSTRIDE) {
  (void)GSTRIDE;
  __shared__ __align__(1024) unsigned short xs[2][WG_BN * 64];
  __shared__ __align__(1024) unsigned short ws[2][64 * 64];
  const int tid = (int)threadIdx.x;
  WgBlock blk;
  if (!wg_block<WG_BN>(a, GIDX, blk)) return;
  const i64 m0 = blk.m0, sl = blk.sl, n0 = blk.n0, kb = blk.kb, steps = blk.steps, grp = blk.grp;
  // step k's x rows and 64 weight rows (rows past N zero) into buffers b: two groups
  auto copy = [&](i64 k, int b) {
    wg_xcopy_grp(a, xs[b], m0, k, tid, grp);
    wg_rows_copy<64>((const unsigned short*)a.w.p, a.w.cols, a.N, ws[b], n0, k, tid);
  };
  float d[64];
  UNROLL for (int i = 0; i < 64; i++) d[i] = 0.0f;
  u32 xbase[2], wbase[2];
  UNROLL for (int b = 0; b < 2; b++) xbase[b] = smem_addr(&xs[b][0]), wbase[b] = smem_addr(&ws[b][0]);
  if (steps > 0) copy(kb, 0);
  for (i64 i = 0; i < steps; i++) {
    const int b = (int)(i & 1);
    fast_cp_wait<0>();
    wg_proxy_fence();
    __syncthreads();  // step i's operands in place; every warp's step i − 1 products done
    if (i + 1 < steps) copy(kb + 64 * (i + 1), b ^ 1);
    wg_fence();
    const u64 da = wg_desc(wbase[b]), db = wg_desc(xbase[b]);
    UNROLL for (int s = 0; s < 4; s++) wg_ss_m64n128(d, da + 2 * s, db + 2 * s);  // + 32 bytes a 16-value piece
    wg_commit();
    wg_wait0();
    WG_KEEP(d);
  }
  const int warp = tid >> 5, g = (tid & 31) >> 2, t = tid & 3;
  wg_store<false>(a, sl, n0, m0, warp, g, t, d);
}
#endif
KERNEL(fast_gemm_wg_fp8, FastGemmArgs) { wg_fp8_body<false>(a, GIDX, GSTRIDE); }
// fast_gemm_wg_fp8a: the same products in the same order (the same values), each
// thread's weight bytes loaded two steps ahead (two sets of registers) instead of one
// (loaded after a step's barrier, widened after its products are issued: a load's
// latency in every step)
KERNEL(fast_gemm_wg_fp8a, FastGemmArgs) { wg_fp8_body<true>(a, GIDX, GSTRIDE); }
// fast_gemm_wg_fp8n: fast_gemm_wg_fp8a in blocks of 64 x rows (wgmma m64n64k16; x
// buffers of 8 KB, 32 KB of shared memory a block), for products of at most 64 rows,
// where the 128-row block copies and multiplies zero rows for half its x tile
// (the default there since run 39: 0.998 → 0.809 ms at V4.1 batch 64 on an H100; its
// 256-row form on m64n256k16 lost at batch 256, 1.90 against 1.71 ms, and was removed;
// DEEPINFER_CUDA_WG_N64=0 keeps fast_gemm_wg_fp8a). The same products of each output in
// the same order on the host's lanes; on the device wgmma's order inside a 16-value
// step, which TestWGFP8NearWide compares.
KERNEL(fast_gemm_wg_fp8n, FastGemmArgs) { wg_fp8_body<true, 64>(a, GIDX, GSTRIDE); }
// fast_gemm_wg_fp8a2: fast_gemm_wg_fp8a in launch blocks of two warpgroups (256
// threads, 64 KB of dynamic shared memory, at most 128 registers a thread for two blocks
// a multiprocessor, 16 warps against fast_gemm_wg_fp8a's 12): 128 weight rows against
// one copy of a step's 128 x rows (DEEPINFER_CUDA_WG_FP8=a2, opt-in). Each warpgroup
// runs fast_gemm_wg_fp8a's products of its 64 rows in the same order: the same values.
#ifndef DI_EMULATE
#undef KERNEL_BOUNDS
#define KERNEL_BOUNDS __launch_bounds__(256, 2)
#endif
KERNEL(fast_gemm_wg_fp8a2, FastGemmArgs) { wg_fp8_body<true, WG_BN, 2>(a, GIDX, GSTRIDE); }
#undef KERNEL_BOUNDS
#define KERNEL_BOUNDS

// fast_gemm_wg_fp8p: fast_gemm_wg_fp8a's products with the widening off the products'
// warps (DEEPINFER_CUDA_WG_FP8=p, opt-in). A launch block is three warpgroups per (128
// weight rows, slice, 128 x rows): warpgroup 0 the producer, 1 and 2 the consumers of
// weight rows 0-63 and 64-127. The producer fills a ring of WGP_S stages in dynamic
// shared memory (a step's 128 x rows by cp.async, WGP_P steps ahead, and its 128 weight
// rows' FP8 codes widened to bf16 there: each thread one weight row, its 64 codes loaded
// two steps ahead into registers) and marks a stage full on named barrier 1 + s; each
// consumer waits for it, issues the step's four wgmma m64n128k16 on its 64 rows, and
// once the step before's products are done (wgmma.wait_group 1) marks that step's stage
// empty on barrier 1 + WGP_S + s, which the producer waits for before filling it again.
// No __syncthreads in the step loop. Each consumer's products are fast_gemm_wg_fp8a's for
// its rows in the same order on the same widened values: the same values.
#define WGP_S 4  // stages in the ring
#define WGP_P 2  // steps the x copies run ahead of the widening
#define WGP_STAGE (2 * WG_BN * 128)  // bytes a stage: x rows, then weight rows (16 KB each)
// (BF16: bf16 weights, fast_gemm_wg_bf16w's products, in groups of a multiple of 128
// weight rows too: the producer copies the weight rows by cp.async with the x rows, one
// group a step, instead of widening them; fast_gemm_wg_bf16wp)
#ifdef DI_EMULATE
template <bool BF16 = false>
DEVM void wg_fp8p_body(const FastGemmArgs& a, i64 GIDX, i64 GSTRIDE) { wg_fp8_body<true>(a, GIDX, GSTRIDE); }
#else
template <bool BF16 = false>
DEVM void wg_fp8p_body(const FastGemmArgs& a, i64 GIDX, i64 GSTRIDE) {
  (void)GSTRIDE;
  // (a stage is emptied by the consumers' step after the one that read it, so the
  // producer, WGP_P steps ahead with its copies, needs WGP_P + 2 stages)
  static_assert(WGP_P >= 1 && WGP_P + 2 <= WGP_S && 2 * WGP_S <= 15, "wg_fp8p_body: the ring and its barriers");
  DYN_SHARED(wgp_sm);
  unsigned char* sm = wg_align1k(wgp_sm);
  const int tid = (int)threadIdx.x, q = tid >> 7, wt = tid & 127;
  WgBlock blk;
  if (!wg_block<WG_BN, 2, 384>(a, GIDX, blk)) return;
  const i64 m0 = blk.m0, sl = blk.sl, nb = blk.n0, kb = blk.kb, steps = blk.steps, grp = blk.grp;
  const int NT = 384;  // the threads of a barrier's phase: all of the block's
  auto xs = [&](i64 i) { return (unsigned short*)(sm + (i % WGP_S) * WGP_STAGE); };
  auto ws = [&](i64 i) { return (unsigned short*)(sm + (i % WGP_S) * WGP_STAGE + WG_BN * 128); };
  if (q == 0) {
    // the producer: thread wt widens weight row wr = wt of the block (clamped: rows past N
    // are widened, not stored) into every stage, 64 codes a step
    const int wr = wt, fmt = (int)a.w.fmt, ssh = fmt == 5 ? 7 : 5;
    const i64 row = imin(nb + wr, a.N - 1);
    const unsigned char* wp = (const unsigned char*)a.w.p + row * a.w.cols;
    const unsigned char* sp = a.w.s + (fmt == 5 ? (row / 128) * ((a.w.cols + 127) / 128)
                                       : fmt == 2 ? (row / 32) * ((a.w.cols + 31) / 32) : row * ((a.w.cols + 31) / 32));
    struct Raw {
      uint4 c[4];
      u32 u0, u1;
    };
    Raw set0, set1;
    auto fetch = [&](i64 k, Raw& r) {
      UNROLL for (int j = 0; j < 4; j++) r.c[j] = *(const uint4*)(wp + k + 16 * j);
      r.u0 = sp[k >> ssh], r.u1 = sp[(k + 32) >> ssh];
    };
    // step i's x rows (group grp's values: x's rows are (m·G + grp)·Kp values in) and,
    // with BF16, its weight rows into its stage (one group of copies; an empty group past
    // the end, so that every wait below counts the same groups)
    auto xcopy = [&](i64 i) {
      if (i >= steps) {
        fast_cp_commit();
        return;
      }
      if (BF16) wg_rows_copy<WG_BN, 128, false>((const unsigned short*)a.w.p, a.w.cols, a.N, ws(i), nb, kb + 64 * i, wt);
      wg_rows_copy<WG_BN, 128>((const unsigned short*)a.xh + grp * a.Kp, a.G * a.Kp, a.M, xs(i), m0, kb + 64 * i, wt);
    };
    auto fill = [&](i64 i, const Raw& r) {
      u32 h[32];
      e4m3_widen16(r.c[0], r.u0, h);
      e4m3_widen16(r.c[1], r.u0, h + 8);
      e4m3_widen16(r.c[2], r.u1, h + 16);
      e4m3_widen16(r.c[3], r.u1, h + 24);
      unsigned short* w = ws(i);
      UNROLL for (int c = 0; c < 8; c++)
        *(uint4*)&w[wr * 64 + ((c ^ (wr & 7)) << 3)] = make_uint4(h[4 * c], h[4 * c + 1], h[4 * c + 2], h[4 * c + 3]);
    };
    UNROLL for (int j = 0; j < WGP_P; j++) xcopy(j);  // (the ring's first uses: no wait)
    if (!BF16 && steps > 0) fetch(kb, set0);
    if (!BF16 && steps > 1) fetch(kb + 64, set1);
    // step i: its stage was emptied before step i − WGP_P's x copies were issued (or is
    // in its first use)
    auto step = [&](i64 i, Raw& cur) {
      const i64 j = i + WGP_P;
      if (j < steps && j >= WGP_S) nbar_sync(1 + WGP_S + (int)(j % WGP_S), NT);  // step j − WGP_S's products done
      xcopy(j);
      if (!BF16) fill(i, cur);
      fast_cp_wait<WGP_P>();  // step i's x rows landed (steps i + 1 .. i + WGP_P's may not have)
      wg_proxy_fence();
      nbar_arrive(1 + (int)(i % WGP_S), NT);
      // (after the fence, which CUDA 12.4 lowers with a MEMBAR.ALL.CTA that waits for
      // this thread's loads in flight: step i + 2's codes get the next step to land)
      if (!BF16 && i + 2 < steps) fetch(kb + 64 * (i + 2), cur);
    };
    for (i64 i = 0; i < steps; i += 2) {
      step(i, set0);
      if (i + 1 < steps) step(i + 1, set1);
    }
    fast_cp_wait<0>();  // (the empty groups past the end)
    return;
  }
  // a consumer: weight rows 64·(q − 1) .. of the block against its 128 x rows
  float d[64];
  UNROLL for (int i = 0; i < 64; i++) d[i] = 0.0f;
  for (i64 i = 0; i < steps; i++) {
    // (the stage's own address: the DI_LANES harness maps shared arrays in windows of
    // 64 KB, which the ring exceeds)
    const u32 st = smem_addr(sm + (i % WGP_S) * WGP_STAGE);
    nbar_sync(1 + (int)(i % WGP_S), NT);  // step i's stage full
    wg_fence();
    const u64 da = wg_desc(st + WG_BN * 128 + (u32)(q - 1) * 64 * 128), db = wg_desc(st);
    UNROLL for (int s = 0; s < 4; s++) wg_ss_m64n128(d, da + 2 * s, db + 2 * s);  // + 32 bytes a 16-value piece
    wg_commit();
    wg_wait1();  // step i − 1's products done: its stage may be filled again
    WG_KEEP(d);
    if (i >= 1 && i - 1 + WGP_S < steps) nbar_arrive(1 + WGP_S + (int)((i - 1) % WGP_S), NT);
  }
  wg_wait0();
  WG_KEEP(d);
  const int warp = wt >> 5, g = (tid & 31) >> 2, t = tid & 3;
  wg_store<false>(a, sl, nb + 64 * (q - 1), m0, warp, g, t, d);
}
#endif
#ifndef DI_EMULATE
#undef KERNEL_BOUNDS
#define KERNEL_BOUNDS __launch_bounds__(384, 1)
#endif
KERNEL(fast_gemm_wg_fp8p, FastGemmArgs) { wg_fp8p_body(a, GIDX, GSTRIDE); }
// fast_gemm_wg_bf16wp: fast_gemm_wg_bf16w's products in fast_gemm_wg_fp8p's blocks, the
// producer copying the bf16 weight rows with the x rows (DEEPINFER_CUDA_WG_BF16W=p,
// opt-in; each group's weight rows a multiple of 128): the same values.
KERNEL(fast_gemm_wg_bf16wp, FastGemmArgs) { wg_fp8p_body<true>(a, GIDX, GSTRIDE); }
#undef KERNEL_BOUNDS
#define KERNEL_BOUNDS
// fast_gemm_wg_bf16w: fast_gemm_wide's products of bf16 weights and bf16 activations
// (V4.1's wo_a, in groups) on wgmma, both operands copied into shared memory
// (the default since run 39: 0.332 → 0.226 ms at V4.1 batch 64 and 0.483 → 0.386 at
// 256 on an H100; DEEPINFER_CUDA_WG_BF16W=0 keeps fast_gemm_wide). The emulated device
// sums as fast_gemm_wg_fp8's loop does, with the weight pairs as they are (wg_bf16w_body).
KERNEL(fast_gemm_wg_bf16w, FastGemmArgs) { wg_bf16w_body(a, GIDX, GSTRIDE); }
// fast_gemm_wg_bf16w4: the same code bounded to four launch blocks a multiprocessor (at
// most 128 registers a thread; fast_gemm_wg_bf16w takes 180, two blocks): the same
// products in the same order, the same values (DEEPINFER_CUDA_WG_BF16W=4, opt-in)
#ifndef DI_EMULATE
#undef KERNEL_BOUNDS
#define KERNEL_BOUNDS __launch_bounds__(128, 4)
#endif
KERNEL(fast_gemm_wg_bf16w4, FastGemmArgs) { wg_bf16w_body(a, GIDX, GSTRIDE); }
#undef KERNEL_BOUNDS
#define KERNEL_BOUNDS

// fast_gemm_wg_bf16 and fast_gemm_wg_fp8r: products of bf16 weights (format 1) or FP8
// weights (formats 2, 3, 5) and activations in two bf16 halves (fast_split's hi and lo:
// V4's, whose activations are float32) with G = 1, rows of K values, K a multiple of
// 64 and more than 32 rows, on wgmma with the roles of fast_gemm_wg_f32 swapped: here
// the x rows are the A operand, from registers (their hi and lo pairs are already the
// fragments: nothing to split), and the weight rows the B operand in shared memory. A
// launch block is one warpgroup per (128 weight rows, slice, 64 rows of x), x-tiles
// fastest, so the blocks that share a weight tile run together. Each 64-value step: the
// 128 weight rows' bf16 values (128 bytes a row) in one of two buffers (32 KB, the
// 128-byte swizzle) a step ahead — bf16 weights copied by cp.async, FP8 weights loaded
// into registers (a thread: one row's 64 codes and scale bytes) and widened there
// (e4m3_widen16: exact) while the step before runs; each warp's 16 x rows' pairs for the
// step after loaded into the other of two register sets while the step's products run;
// per 16 values wgmma m64n128k16 with the hi fragments, then with the lo ones (left out
// with xexact), into the same float32 accumulators. Not the mma.sync chain's order
// (the tensor cores' own order inside a 16-value step): near fast_gemm_blk's values,
// not equal; not used in batch-invariant mode (DEEPINFER_CUDA_WG_BF16=0 and
// DEEPINFER_CUDA_WG_FP8R=0 keep fast_gemm_blk). fast_gemm_wg_fp8r reads x's pairs in
// wgr_pos's order (fast_split_wg), so that a thread loads a row's fragments of a step in
// two 16-byte words; fast_gemm_wg_bf16 reads fast_split's order, a 4-byte load a
// fragment register.
#define WGB_MROWS 64
#ifdef DI_EMULATE
template <bool F8, bool FRAG, bool AHEAD = false>
DEVM void wg_r_body(const FastGemmArgs& a, i64 GIDX, i64 GSTRIDE) {
  // the emulated device: each product a float32 sum, per 16 values the x_hi·w products
  // then the x_lo·w ones, k in order (the DI_LANES build's wgmma stand-in's order)
  const i64 P = a.Kp / 2;
  for (i64 i = GIDX; i < a.S * a.M * a.N; i += GSTRIDE) {
    const i64 sl = i / (a.M * a.N), m = i / a.N % a.M, n = i % a.N;
    float acc = 0;
    for (i64 k0 = sl * a.ks; k0 < imin(a.K, sl * a.ks + a.ks); k0 += 16) {
      u32 w2[8];
      if constexpr (F8) {
        uint4 q;
        memcpy(&q, (const unsigned char*)a.w.p + n * a.w.cols + k0, 16);
        e4m3_widen16(q, fast_fp8_scale(a.w, n, k0), w2);
      } else {
        const unsigned short* wr = (const unsigned short*)a.w.p + n * a.w.cols + k0;
        for (int j = 0; j < 8; j++) w2[j] = (u32)wr[2 * j] | (u32)wr[2 * j + 1] << 16;
      }
      for (int half = 0; half < (a.xexact ? 1 : 2); half++) {
        const u32* x = (half ? a.xl : a.xh) + m * P;  // (FRAG: pairs in wgr_pos's order)
        for (int j = 0; j < 8; j++) {
          const u32 x2 = x[FRAG ? wgr_pos(k0 / 2 + j) : k0 / 2 + j];
          acc += fast_lo(x2) * fast_lo(w2[j]);
          acc += fast_hi(x2) * fast_hi(w2[j]);
        }
      }
    }
    FastGemmStore{&a, m, sl}(0, n, 0, acc);
  }
}
#else
// wg_wcopy: step k of the 128 bf16 weight rows from n0 into a buffer wb (wg_rows_copy)
DEVM void wg_wcopy(const FastGemmArgs& a, unsigned short* wb, i64 n0, i64 k, int tid) {
  wg_rows_copy((const unsigned short*)a.w.p, a.w.cols, a.N, wb, n0, k, tid);
}
template <bool F8, bool FRAG, bool AHEAD = false>
DEVM void wg_r_body(const FastGemmArgs& a, i64 GIDX, i64 GSTRIDE) {
  (void)GSTRIDE;
  // (AHEAD, bf16 weights: three buffers, each step's copies issued two steps ahead)
  constexpr bool A3 = AHEAD && !F8;
  __shared__ __align__(1024) unsigned short ws[A3 ? 3 : 2][WG_BN * 64];
  // (AHEAD, FP8 weights: each thread's row's 64 codes a step copied by cp.async into
  // two stages — [stage][16-byte piece][thread], read back by the thread alone — two
  // steps ahead, its scale bytes into one of two register sets)
  constexpr bool R2 = AHEAD && F8;
  __shared__ __align__(16) uint4 wraw[R2 ? 2 : 1][4][R2 ? 128 : 1];
  const int tid = (int)threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const i64 mtiles = (a.M + WGB_MROWS - 1) / WGB_MROWS, blk = GIDX / 128;
  const i64 m0 = blk % mtiles * WGB_MROWS, sl = blk / mtiles % a.S, n0 = blk / (mtiles * a.S) * WG_BN;
  if (n0 >= a.N) return;
  const i64 kb = sl * a.ks, steps = (imin(a.K, kb + a.ks) - kb) / 64, P = a.Kp / 2;
  const bool lo = !a.xexact;
  // FP8: this thread's weight row (clamped: rows past N are loaded, not stored), its
  // step's 64 codes and the scale bytes of its two halves (one a 2^ssh values)
  const int fmt = (int)a.w.fmt, ssh = fmt == 5 ? 7 : 5;
  const i64 wrow = imin(n0 + tid, a.N - 1);
  const unsigned char* wp = (const unsigned char*)a.w.p + wrow * a.w.cols;
  const unsigned char* sp = a.w.s + (fmt == 5 ? (wrow / 128) * ((a.w.cols + 127) / 128)
                                     : fmt == 2 ? (wrow / 32) * ((a.w.cols + 31) / 32) : wrow * ((a.w.cols + 31) / 32));
  uint4 raw[4];
  u32 su0 = 0, su1 = 0;
  auto wfetch = [&](i64 k) {
    UNROLL for (int c = 0; c < 4; c++) raw[c] = *(const uint4*)(wp + k + 16 * c);
    su0 = sp[k >> ssh], su1 = sp[(k + 32) >> ssh];
  };
  // the widened 64 values into weight buffer b: row tid's 8 pieces (8 values each) at
  // piece c ^ (tid & 7)
  auto wstore = [&](int b, const uint4 (&rw)[4], u32 s0, u32 s1) {
    UNROLL for (int c = 0; c < 4; c++) {
      u32 h[8];
      e4m3_widen16(rw[c], c < 2 ? s0 : s1, h);
      UNROLL for (int e = 0; e < 2; e++)
        *(uint4*)&ws[b][tid * 64 + (((2 * c + e) ^ (tid & 7)) << 3)] = make_uint4(h[4 * e], h[4 * e + 1], h[4 * e + 2], h[4 * e + 3]);
    }
  };
  // R2: step k's codes into stage rb (one group of copies) and its scale bytes into sc
  auto rcopy = [&](i64 k, int rb, u32 (&sc)[2]) {
    UNROLL for (int c = 0; c < 4; c++) fast_cp16(&wraw[rb][c][R2 ? tid : 0], wp + k + 16 * c, true);
    fast_cp_commit();
    sc[0] = sp[k >> ssh], sc[1] = sp[(k + 32) >> ssh];
  };
  // this thread's two x rows (clamped: rows past M are loaded, not stored), as pairs
  const i64 r0 = imin(m0 + 16 * warp + g, a.M - 1) * P, r1 = imin(m0 + 16 * warp + g + 8, a.M - 1) * P;
  // xload: step k's fragments, [16-value piece s][register j: row g (j even) or g + 8
  // (odd), pairs t (j < 2) or t + 4], hi and (with lo) lo. FRAG: the pairs in wgr_pos's
  // order (fast_split_wg), so a row's are pairs 8t .. 8t + 7 of the step, (s, h) at
  // 2s + h: two 16-byte loads a row and half; else fast_split's order, a 4-byte load a
  // register
  auto frag = [&](const u32* x, i64 k, u32 (&f)[4][4]) {
    if constexpr (FRAG) {
      const uint4* p0 = (const uint4*)(x + r0 + k / 2 + 8 * t);
      const uint4* p1 = (const uint4*)(x + r1 + k / 2 + 8 * t);
      const uint4 a0 = p0[0], b0 = p0[1], a1 = p1[0], b1 = p1[1];
      f[0][0] = a0.x, f[0][2] = a0.y, f[1][0] = a0.z, f[1][2] = a0.w, f[2][0] = b0.x, f[2][2] = b0.y, f[3][0] = b0.z, f[3][2] = b0.w;
      f[0][1] = a1.x, f[0][3] = a1.y, f[1][1] = a1.z, f[1][3] = a1.w, f[2][1] = b1.x, f[2][3] = b1.y, f[3][1] = b1.z, f[3][3] = b1.w;
    } else {
      UNROLL for (int s = 0; s < 4; s++) {
        const i64 c = k / 2 + 8 * s + t;
        f[s][0] = x[r0 + c], f[s][1] = x[r1 + c], f[s][2] = x[r0 + c + 4], f[s][3] = x[r1 + c + 4];
      }
    }
  };
  auto xload = [&](i64 k, u32 (&h)[4][4], u32 (&l)[4][4]) {
    frag(a.xh, k, h);
    if (lo) frag(a.xl, k, l);
  };
  float d[64];
  UNROLL for (int i = 0; i < 64; i++) d[i] = 0.0f;
  const u32 base0 = smem_addr(&ws[0][0]);  // (the buffers one after another)
  // step i: its weights in place and seen by the tensor cores, every warp done with the
  // other buffer (step i + 1's weights go there: copied, or fetched now and widened
  // while the products run); its products from the current set, the next step's x
  // into the other set while they run
  // (A3: step i's buffer i % 3; its copies landed when one group, step i + 1's, is left
  // in flight; step i + 2's go into the buffer step i − 1 read — every step commits a
  // group, empty past the last)
  // (R2: sc holds step i + 1's scale bytes, loaded two steps before, and is refilled
  // with step i + 3's once they are used)
  auto step = [&](i64 i, const u32 (&ch)[4][4], const u32 (&cl)[4][4], u32 (&nh)[4][4], u32 (&nl)[4][4], u32 (&sc)[2]) {
    const int b = A3 ? (int)(i % 3) : (int)(i & 1);
    const bool more = i + 1 < steps;
    if constexpr (A3) fast_cp_wait<1>();
    else if constexpr (!F8) fast_cp_wait<0>();
    wg_proxy_fence();
    __syncthreads();
    if constexpr (A3) {
      if (i + 2 < steps) wg_wcopy(a, ws[(i + 2) % 3], n0, kb + 64 * (i + 2), tid);
      else fast_cp_commit();
    } else if (more && !R2) {
      if constexpr (F8) wfetch(kb + 64 * (i + 1));
      else wg_wcopy(a, ws[b ^ 1], n0, kb + 64 * (i + 1), tid);
    }
    wg_fence();
    const u64 desc = wg_desc(base0 + (u32)b * (WG_BN * 64 * 2));
    UNROLL for (int s = 0; s < 4; s++) {
      wg_m64n128(d, ch[s], desc + 2 * s);  // + 32 bytes a 16-value piece
      if (lo) wg_m64n128(d, cl[s], desc + 2 * s);
    }
    wg_commit();
    if constexpr (R2) {
      // step i + 1's codes landed when step i + 2's group alone is left in flight
      if (more) {
        fast_cp_wait<1>();
        uint4 rw[4];
        UNROLL for (int c = 0; c < 4; c++) rw[c] = wraw[(i + 1) & 1][c][tid];
        wstore(b ^ 1, rw, sc[0], sc[1]);
      }
      if (i + 3 < steps) rcopy(kb + 64 * (i + 3), (int)((i + 1) & 1), sc);
      else fast_cp_commit();
    } else if (more && F8) {
      wstore(b ^ 1, raw, su0, su1);
    }
    if (more) xload(kb + 64 * (i + 1), nh, nl);
    wg_wait0();
    WG_KEEP(d);
  };
  u32 h0[4][4], l0[4][4], h1[4][4], l1[4][4], sc0[2] = {0, 0}, sc1[2] = {0, 0};
  if (steps > 0) {
    if constexpr (F8) {
      wfetch(kb);
      wstore(0, raw, su0, su1);
      if constexpr (R2) {
        // steps 1 and 2 into stages 1 and 0 (a group each, empty past the last step)
        if (steps > 1) rcopy(kb + 64, 1, sc1);
        else fast_cp_commit();
        if (steps > 2) rcopy(kb + 128, 0, sc0);
        else fast_cp_commit();
      }
    } else {
      wg_wcopy(a, ws[0], n0, kb, tid);
      if constexpr (A3) {
        if (steps > 1) wg_wcopy(a, ws[1], n0, kb + 64, tid);
        else fast_cp_commit();
      }
    }
    xload(kb, h0, l0);
  }
  for (i64 i = 0; i < steps; i += 2) {
    step(i, h0, l0, h1, l1, sc1);
    if (i + 1 < steps) step(i + 1, h1, l1, h0, l0, sc0);
  }
  wg_store<true>(a, sl, m0, n0, warp, g, t, d);
}
#endif
// (run 25d on the H200, each against the other order in the same call: the FP8 kernel
// 1.35 → 1.09 ms at V4's batch 256 with x in wgr_pos's order, the bf16 one 1.69 → 1.76
// ms, so each keeps the order it was faster with)
KERNEL(fast_gemm_wg_bf16, FastGemmArgs) { wg_r_body<false, false>(a, GIDX, GSTRIDE); }
KERNEL(fast_gemm_wg_fp8r, FastGemmArgs) { wg_r_body<true, true>(a, GIDX, GSTRIDE); }
// fast_gemm_wg_bf16a: fast_gemm_wg_bf16's products in the same order (the same values),
// its weight rows copied two steps ahead into three buffers (48 KB) instead of one step
// ahead into two (slower on the H200, run 31: DEEPINFER_CUDA_WG_AHEAD=all only)
KERNEL(fast_gemm_wg_bf16a, FastGemmArgs) { wg_r_body<false, false, true>(a, GIDX, GSTRIDE); }
// fast_gemm_wg_fp8ra: fast_gemm_wg_fp8r's products in the same order (the same values),
// each thread's codes copied by cp.async into shared memory two steps ahead (16 KB) and
// its scale bytes loaded two steps ahead, instead of loaded into registers right before
// they are widened (slower on the H200, run 31: DEEPINFER_CUDA_WG_AHEAD=all only)
KERNEL(fast_gemm_wg_fp8ra, FastGemmArgs) { wg_r_body<true, true, true>(a, GIDX, GSTRIDE); }

// fast_sum: y = the S slices' sums, added in slice order.
KERNEL(fast_sum, FastGemmArgs) {
  for (i64 i = GIDX; i < a.M * a.N; i += GSTRIDE) {
    const i64 m = qdiv(i, a.N), n = qmod(i, a.N);
    float v = 0;
    for (i64 s = 0; s < a.S; s++) v += a.part[(s * a.M + m) * a.N + n];
    a.y[m * a.ldy + n] = a.out_bf16 ? q_bf16(v) : v;
  }
}
// fast_sum4: fast_sum with a work item per four adjacent values of a row (N and ldy
// multiples of 4, part and y 16-byte aligned: Go checks), the slices' 16-byte pieces
// loaded four slices at a time before they are added: each value the same sum in slice
// order, so the same values (run 45b: fast_sum's 34 launches 0.47 ms of V4.1's batch-256
// step, a value's slices one dependent load after another).
KERNEL(fast_sum4, FastGemmArgs) {
  const i64 N4 = a.N / 4;
  for (i64 i = GIDX; i < a.M * N4; i += GSTRIDE) {
    const i64 m = qdiv(i, N4), n = qmod(i, N4) * 4;
    float v[4] = {0, 0, 0, 0};
    i64 s = 0;
    for (; s + 4 <= a.S; s += 4) {
      float4 p[4];
      UNROLL for (int j = 0; j < 4; j++) p[j] = *(const float4*)(a.part + ((s + j) * a.M + m) * a.N + n);
      UNROLL for (int j = 0; j < 4; j++) v[0] += p[j].x, v[1] += p[j].y, v[2] += p[j].z, v[3] += p[j].w;
    }
    for (; s < a.S; s++) {
      const float4 p = *(const float4*)(a.part + (s * a.M + m) * a.N + n);
      v[0] += p.x, v[1] += p.y, v[2] += p.z, v[3] += p.w;
    }
    float4 r;
    r.x = a.out_bf16 ? q_bf16(v[0]) : v[0];
    r.y = a.out_bf16 ? q_bf16(v[1]) : v[1];
    r.z = a.out_bf16 ? q_bf16(v[2]) : v[2];
    r.w = a.out_bf16 ? q_bf16(v[3]) : v[3];
    *(float4*)(a.y + m * a.ldy + n) = r;
  }
}

// The routed experts in the fast mode: moe_count and moe_group list each expert's slots
// as in the exact mode; fast_moe_up computes w1·x and w3·x of an expert's slots (x's
// halves a row per token), fast_moe_act sums the slices and applies the SwiGLU (V4.1:
// bf16 rounding of both products, the routing weight), fast_moe_down computes w2·h (h's
// halves a row per slot), fast_moe_dsum sums its slices; moe_out then sums a token's
// slots as in the exact mode. A warp tile is (expert, 16 weight rows, slice); it walks
// the expert's slots 8 at a time.
struct FastMoEArgs {
  const u32* xh; const u32* xl; const Weight* tab; const i64* counts; const i64* off; const int* list;
  const int* ids; const float* wts; float* part; float* out; int* act;
  i64 slots; i64 k; i64 E; i64 N; i64 K; i64 Kp; i64 S; i64 ks; i64 nact; i64 v41; double limit;
  i64 xexact;  // the activations are bf16 already (fast_split's xexact): no lo mma
  // the fp8 numerics' e4m3 tiles (tensorcore_fp4.cu fp4_e4_tiles): the activations' E4M3
  // codes (K a row) and piece scales (K/32 a row), fast_quant_split's; null for the others
  const unsigned char* xq;
  const float* xe;
};
struct FastMoERows {
  const int* list;
  i64 base, n, div;  // the expert's slots list[base..base+n), x's row = slot / div
  DEVM i64 operator()(int c) const { return c < n ? (i64)list[base + c] / div : -1; }
};
struct FastMoEStore {
  float* part;
  const int* list;
  i64 base, S, s, slots, N;
  DEVM void operator()(int plane, i64 n, int c, float v) const {
    part[((plane * S + s) * slots + list[base + c]) * N + n] = v;
  }
};
// fast_moe_active: act[j] = the j-th expert with slots, in id order (-1 past the last);
// the tiles' launch covers min(E, slots) experts. One warp (32 work items): 32 experts
// a pass, each active one placed by a ballot after the active ones of the lower lanes
// and passes. (A work item a j, each scanning the counts up to its j-th active expert,
// took ~36 µs a launch at any batch in run 22c.)
KERNEL(fast_moe_active, FastMoEArgs) {
  (void)GSTRIDE;
#ifdef DI_EMULATE
  if (GIDX != 0) return;
  i64 j = 0;
  for (i64 e = 0; e < a.E; e++)
    if (a.counts[e] > 0) a.act[j++] = (int)e;
  for (; j < a.E; j++) a.act[j] = -1;
#else
  if (GIDX >= 32) return;
  const int lane = (int)GIDX;
  i64 run = 0;
  for (i64 e0 = 0; e0 < a.E; e0 += 32) {
    const i64 e = e0 + lane;
    const bool on = e < a.E && a.counts[e] > 0;
    const u32 m = __ballot_sync(0xffffffffu, on);
    if (on) a.act[run + __popc(m & ((1u << lane) - 1))] = (int)e;
    run += __popc(m);
  }
  for (i64 j = run + lane; j < a.E; j += 32) a.act[j] = -1;
#endif
}

// fast_moe_tiles: the warp tiles of the active experts (NW 2: w1 and w3 into planes 0
// and 1 of part; NW 1: w2 into plane 0), one activation tile of 8 slots at a time (an
// expert serves a few slots at decode).
template <int NW, bool F32>
DEVM void fast_moe_tiles(const FastMoEArgs& a, long long GIDX, long long GSTRIDE) {
  i64 ntiles = (a.N + 15) / 16;
  i64 items = a.nact * ntiles * a.S * 32;
  for (i64 i = GIDX; i < items; i += GSTRIDE) {
    i64 tile = i >> 5;
    i64 s = tile % a.S, nt = (tile / a.S) % ntiles;
    int e = a.act[tile / (a.S * ntiles)];
    if (e < 0) continue;
    i64 n = a.counts[e];
    i64 kb = s * a.ks, ke = imin(a.Kp, kb + a.ks);
    Weight w[2];
    w[0] = NW == 2 ? a.tab[e] : a.tab[a.E + e];
    w[1] = a.tab[2 * a.E + e];
    for (i64 c0 = 0; c0 < n; c0 += 8) {
      FastMoERows rows = {a.list, a.off[e] + c0, n - c0, NW == 2 ? a.k : 1};
      FastMoEStore store = {a.part, a.list, a.off[e] + c0, a.S, s, a.slots, a.N};
      fast_tile<NW, 1, F32>(w, nt * 16, a.N, a.K, kb, ke, a.xh, a.xl, a.Kp / 2, rows, (int)(i & 31), store,
                            a.xexact != 0);
    }
  }
}
KERNEL(fast_moe_up, FastMoEArgs) { fast_moe_tiles<2, false>(a, GIDX, GSTRIDE); }
KERNEL(fast_moe_up_f32, FastMoEArgs) { fast_moe_tiles<2, true>(a, GIDX, GSTRIDE); }
KERNEL(fast_moe_down, FastMoEArgs) { fast_moe_tiles<1, false>(a, GIDX, GSTRIDE); }
KERNEL(fast_moe_down_f32, FastMoEArgs) { fast_moe_tiles<1, true>(a, GIDX, GSTRIDE); }

// fast_moe_act: h[slot, r] = swiglu of the summed slices (moe_hidden's function).
KERNEL(fast_moe_act, FastMoEArgs) {
  float limit = (float)a.limit;
  for (i64 i = GIDX; i < a.slots * a.N; i += GSTRIDE) {
    const i64 sl = qdiv(i, a.N), r = qmod(i, a.N);
    int e = a.ids[sl];
    if (e < 0 || e >= a.E) continue;
    float g = 0, u = 0;
    for (i64 s = 0; s < a.S; s++) {
      g += a.part[(s * a.slots + sl) * a.N + r];
      u += a.part[((a.S + s) * a.slots + sl) * a.N + r];
    }
    if (a.v41) {
      g = q_bf16(g);
      u = q_bf16(u);
    }
    float v = moe_swiglu(g, u, limit);
    if (a.v41) v *= a.wts[sl];
    a.out[i] = v;
  }
}

// fast_moe_dsum: y[slot, o] = the summed slices of w2·h.
KERNEL(fast_moe_dsum, FastMoEArgs) {
  for (i64 i = GIDX; i < a.slots * a.N; i += GSTRIDE) {
    const i64 sl = qdiv(i, a.N), o = qmod(i, a.N);
    int e = a.ids[sl];
    if (e < 0 || e >= a.E) continue;
    float v = 0;
    for (i64 s = 0; s < a.S; s++) v += a.part[(s * a.slots + sl) * a.N + o];
    a.out[i] = v;
  }
}

// ---- a probe of wgmma's e4m3 products (TestWGE4M3Probe; no program launches it) ----
// The question it answers before any FP8 tile is written (docs/perf/moe.md, the FP4
// tiles' ceiling): how exactly the tensor cores sum one k32 step of e4m3 products into
// float32. One warpgroup: d[s] = A[:, 32s..32s+31] · B[:, 32s..32s+31]ᵀ for s = 0..3,
// each step alone (scale-d 0), A 64 rows and B 8 rows of 128 e4m3 codes (K-major, as
// wgmma's e4m3 form requires). The emulated device gives the exact sums rounded once.
struct WgProbeArgs {
  const unsigned char* a;  // 64 × 128 codes
  const unsigned char* b;  // 8 × 128 codes
  float* d;                // [4][64][8]
  i64 rs;                  // A from registers (mma.m16n8k32's 8-bit A layout a warp) instead of shared memory
};
KERNEL(wg_e4m3_probe, WgProbeArgs) {
#ifdef DI_EMULATE
  for (i64 i = GIDX; i < 4 * 64 * 8; i += GSTRIDE) {
    const int s = (int)(i / 512), r = (int)(i / 8 % 64), c = (int)(i % 8);
    double v = 0;  // (exact: 32 products of e4m3 values span fewer than 53 bits)
    for (int k = 0; k < 32; k++) v += (double)e4m3_f32(a.a[r * 128 + 32 * s + k]) * e4m3_f32(a.b[c * 128 + 32 * s + k]);
    a.d[i] = (float)v;
  }
#elif !defined(DI_LANES)
  __shared__ __align__(1024) unsigned char sa[64 * 128];
  __shared__ __align__(1024) unsigned char sb[8 * 128];
  if (GIDX >= 128) return;  // block 0 alone (one warpgroup; the others have no work)
  const int tid = (int)GIDX, warp = tid >> 5, g = (tid & 31) >> 2, t = tid & 3;
  // the 128-byte swizzle wg_desc names: row r's 16-byte piece c at piece c ^ (r & 7)
  for (int p = tid; p < 64 * 8; p += 128) {
    const int r = p >> 3, c = p & 7;
    *(uint4*)&sa[r * 128 + ((c ^ (r & 7)) << 4)] = *(const uint4*)&a.a[r * 128 + 16 * c];
  }
  if (tid < 8 * 8) {
    const int r = tid >> 3, c = tid & 7;
    *(uint4*)&sb[r * 128 + ((c ^ (r & 7)) << 4)] = *(const uint4*)&a.b[r * 128 + 16 * c];
  }
  wg_proxy_fence();
  __syncthreads();
  const u64 da = wg_desc(smem_addr(sa)), db = wg_desc(smem_addr(sb));
  for (int s = 0; s < 4; s++) {  // + 32 bytes a step of 32 codes
    float d0 = 0, d1 = 0, d2 = 0, d3 = 0;
    wg_fence();
    if (a.rs) {
      // rows 16·warp + g and + 8, bytes 4t.. and 16 + 4t.. of the step's 32
      const unsigned char* r0 = a.a + (16 * warp + g) * 128 + 32 * s + 4 * t;
      const u32 a0 = *(const u32*)r0, a1 = *(const u32*)(r0 + 8 * 128), a2 = *(const u32*)(r0 + 16),
                a3 = *(const u32*)(r0 + 8 * 128 + 16);
      asm volatile(
          "{\n .reg .pred p;\n setp.ne.b32 p, %9, 0;\n"
          " wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 {%0, %1, %2, %3}, {%4, %5, %6, %7}, %8, p, 1, 1;\n}\n"
          : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
          : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(db + 2 * s), "r"(0));
    } else {
      asm volatile(
          "{\n .reg .pred p;\n setp.ne.b32 p, %6, 0;\n"
          " wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 {%0, %1, %2, %3}, %4, %5, p, 1, 1;\n}\n"
          : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
          : "l"(da + 2 * s), "l"(db + 2 * s), "r"(0));
    }
    wg_commit();
    wg_wait0();
    float* o = a.d + s * 512 + (16 * warp + g) * 8 + 2 * t;  // rows g and g + 8, columns 2t, 2t + 1
    o[0] = d0, o[1] = d1, o[64] = d2, o[65] = d3;
  }
#endif
}

// fast_gemm_wg_e4m3: the fp8 numerics' products of MXFP8 activations (fast_quant_split's
// E4M3 codes xq, M rows of K, and their scales xe, one a 32-value piece) and FP8 weights
// of 32 × 32 blocks (format 2), wgmma's e4m3 form: a launch block (one warpgroup) takes
// 64 weight rows from n0, slice sl and 128 x rows from m0 (fast_gemm_wg_fp8's blocks,
// x-tiles fastest), in steps of 128 values, both operands copied by cp.async a step ahead
// into two buffers each (the 128-byte swizzle wg_desc names) and the x scales beside them.
// Each 32-value block is one wgmma m64n128k32 from zero, its sums scaled by the weight
// block's and the x piece's scales (powers of two) and added to float32 accumulators by
// one fused multiply-add each: d = fma(block sum, 2^(ew − 127) · sx, d), blocks in order.
// The tensor cores sum a block's 32 exact products at their FP8 precision (not float32's:
// DeepSeek-V3's report puts it near 14 bits); the emulated device sums each block exactly
// and rounds it once, so the two differ by that, and TestWGE4M3GemmNearExact bounds it.
// Needs K a multiple of 32, the slices' length of 128 (a slice's last step may hold fewer
// blocks), N of 64, weight rows of K bytes (ops_fast.go).
// Dynamic shared memory: WGE4_SHARED(BN) bytes (ops_fast.go's wgE4M3Shared).
struct WgE4M3Args {
  FastGemmArgs f;
  const unsigned char* xq;
  const float* xe;
};
#if !defined(DI_EMULATE) && !defined(DI_LANES)
// wg_e4m3_m64n128: d = the 64 rows × 32 codes da names × the 32 codes of the 128 rows db
// names (scale-d 0: d's old values not read)
DEVM void wg_e4m3_m64n128(float (&d)[64], u64 da, u64 db) {
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %66, 0;\n"
      " wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {"
      WG_D64_REGS
      "}, %64, %65, p, 1, 1;\n}\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3]), "=f"(d[4]), "=f"(d[5]), "=f"(d[6]), "=f"(d[7]),
        "=f"(d[8]), "=f"(d[9]), "=f"(d[10]), "=f"(d[11]), "=f"(d[12]), "=f"(d[13]), "=f"(d[14]), "=f"(d[15]),
        "=f"(d[16]), "=f"(d[17]), "=f"(d[18]), "=f"(d[19]), "=f"(d[20]), "=f"(d[21]), "=f"(d[22]), "=f"(d[23]),
        "=f"(d[24]), "=f"(d[25]), "=f"(d[26]), "=f"(d[27]), "=f"(d[28]), "=f"(d[29]), "=f"(d[30]), "=f"(d[31]),
        "=f"(d[32]), "=f"(d[33]), "=f"(d[34]), "=f"(d[35]), "=f"(d[36]), "=f"(d[37]), "=f"(d[38]), "=f"(d[39]),
        "=f"(d[40]), "=f"(d[41]), "=f"(d[42]), "=f"(d[43]), "=f"(d[44]), "=f"(d[45]), "=f"(d[46]), "=f"(d[47]),
        "=f"(d[48]), "=f"(d[49]), "=f"(d[50]), "=f"(d[51]), "=f"(d[52]), "=f"(d[53]), "=f"(d[54]), "=f"(d[55]),
        "=f"(d[56]), "=f"(d[57]), "=f"(d[58]), "=f"(d[59]), "=f"(d[60]), "=f"(d[61]), "=f"(d[62]), "=f"(d[63])
      : "l"(da), "l"(db), "r"(0));
}
// wg_e4m3_m64n64: the same with the 64 rows db names (32 accumulators a thread)
DEVM void wg_e4m3_m64n64(float (&d)[32], u64 da, u64 db) {
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %34, 0;\n"
      " wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 {" WG_D32_REGS "}, %32, %33, p, 1, 1;\n}\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3]), "=f"(d[4]), "=f"(d[5]), "=f"(d[6]), "=f"(d[7]),
        "=f"(d[8]), "=f"(d[9]), "=f"(d[10]), "=f"(d[11]), "=f"(d[12]), "=f"(d[13]), "=f"(d[14]), "=f"(d[15]),
        "=f"(d[16]), "=f"(d[17]), "=f"(d[18]), "=f"(d[19]), "=f"(d[20]), "=f"(d[21]), "=f"(d[22]), "=f"(d[23]),
        "=f"(d[24]), "=f"(d[25]), "=f"(d[26]), "=f"(d[27]), "=f"(d[28]), "=f"(d[29]), "=f"(d[30]), "=f"(d[31])
      : "l"(da), "l"(db), "r"(0));
}
// cp4: an asynchronous copy of 4 bytes (zeros when !in)
DEV void wg_cp4(void* dst, const void* src, bool in) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(smem_addr(dst)), "l"(src), "r"(in ? 4 : 0) : "memory");
}
#endif
// the buffers: x codes 2 × BN rows × 128 bytes, weight codes 2 × 64 × 128, x scales 2 ×
// 4 × BN floats, and 1 KB to align the first to 1024 bytes
// (BN: the x rows a block takes, 128 or 64 — wgmma m64n128k32 or m64n64k32)
#define WGE4_SHARED(BN) (2 * (BN) * 128 + 2 * 8192 + 2 * (BN) * 16 + 1024)
// Q (the _e4m3p and _e4m3q forms, blocks of 64 x rows; _e4m3w, 128): a step's 32-value blocks issued Q
// at a time into Q sets of block sums, one wait for the Q, then each scaled and added in
// block order, so that the tensor cores' latency is waited for once a Q blocks instead of
// once a block (run 48: each block's wgmma, wait and scaling a serial chain). The same
// wgmma a block, the same scaling and the same order: the same values bit for bit.
template <int BN, int Q = 1>
DEVM void wg_e4m3_body(const WgE4M3Args& a, i64 GIDX, i64 GSTRIDE) {
  static_assert(BN == 128 || BN == 64, "wg_e4m3_body: 128 or 64 x rows a block");
  static_assert(Q == 1 || Q == 2 || (BN == 64 && Q == 4), "wg_e4m3_body: 2 blocks at once, or 4 with 64 x rows");
  const FastGemmArgs& f = a.f;
  (void)f, (void)GIDX, (void)GSTRIDE;
#ifdef DI_EMULATE
  const i64 sc = (f.w.cols + 31) / 32;
  for (i64 it = GIDX; it < f.S * f.M * f.N; it += GSTRIDE) {
    const i64 n = it % f.N, m = it / f.N % f.M, sl = it / (f.N * f.M);
    const i64 kb = sl * f.ks, ke = imin(f.K, kb + f.ks);
    const unsigned char* wr = (const unsigned char*)f.w.p + n * f.w.cols;
    const unsigned char* xr = a.xq + m * f.K;
    float d = 0;
    for (i64 k = kb; k < ke; k += 32) {
      double bs = 0;  // (exact: 32 products of E4M3 values span fewer than 53 bits)
      for (int u = 0; u < 32; u++) bs += (double)e4m3_f32(xr[k + u]) * e4m3_f32(wr[k + u]);
      const float c = ue8m0_f32(f.w.s[(n / 32) * sc + k / 32]) * a.xe[m * (f.K / 32) + k / 32];
      d = fmaf((float)bs, c, d);
    }
    FastGemmStore{&f, m, sl}(0, n, 0, d);
  }
#elif !defined(DI_LANES)
  DYN_SHARED(wge4_sm);
  unsigned char* sm = wge4_sm + ((1024 - (smem_addr(wge4_sm) & 1023)) & 1023);
  unsigned char* xs = sm;                            // [2][BN × 128]
  unsigned char* ws = sm + 2 * BN * 128;             // [2][64 × 128]
  float* xsc = (float*)(sm + 2 * BN * 128 + 2 * 8192);  // [2][4][BN]: step piece s, x row
  const int tid = (int)threadIdx.x, warp = tid >> 5, g = (tid & 31) >> 2, t = tid & 3;
  const i64 mtiles = (f.M + BN - 1) / BN, blk = GIDX / 128;
  const i64 m0 = blk % mtiles * BN, sl = blk / mtiles % f.S, n0 = blk / (mtiles * f.S) * 64;
  if (n0 >= f.N) return;
  // (steps of 128 values; the slice's last may hold fewer of its 32-value blocks)
  const i64 kb = sl * f.ks, ke = imin(f.K, kb + f.ks), steps = (ke - kb + 127) / 128, KS = f.K / 32;
  const unsigned char* wp = (const unsigned char*)f.w.p;
  // this warp's 16 weight rows lie in one 32-row scale block: its 4 bytes of a step
  const unsigned char* wsc = f.w.s + ((n0 + 16 * warp) / 32) * ((f.w.cols + 31) / 32);
  // a thread's copies: row tid/8 (+ 16 a piece) of each operand, its 16-byte piece tid % 8
  // (at piece (tid % 8) ^ (row % 8) in the buffer: the rows 16 apart share the swizzle),
  // and row tid's four x scales; sources as offsets from a base a step
  const int cr = tid >> 3, cc = tid & 7;
  const u32 dpos = (u32)cr * 128 + ((u32)(cc ^ (cr & 7)) << 4);
  const unsigned char* xsrc = a.xq + (m0 + cr) * f.K + 16 * cc;
  const unsigned char* wsrc = wp + (n0 + cr) * f.w.cols + 16 * cc;
  const i64 xstep = 16 * f.K, wstep = 16 * f.w.cols;
  u32 xin = 0;  // bit i: x row m0 + cr + 16i exists
  UNROLL for (int i = 0; i < BN / 16; i++) xin |= (u32)(m0 + cr + 16 * i < f.M) << i;
  const bool ein = tid < BN && m0 + tid < f.M;
  const float* esrc = a.xe + (ein ? (m0 + tid) * KS : 0);
  auto copy = [&](i64 k, int b) {
    const bool kin = k + 16 * cc < ke;  // (past the slice: zeros, never read by a product)
    unsigned char* xb = xs + b * BN * 128 + dpos;
    UNROLL for (int i = 0; i < BN / 16; i++) {
      const bool in = kin && ((xin >> i) & 1);
      fast_cp16(xb + 2048 * i, in ? xsrc + i * xstep + k : a.xq, in);
    }
    unsigned char* wb = ws + b * 8192 + dpos;
    UNROLL for (int i = 0; i < 4; i++) fast_cp16(wb + 2048 * i, kin ? wsrc + i * wstep + k : wp, kin);
    if (tid < BN) {
      UNROLL for (int s = 0; s < 4; s++) {
        const bool in = ein && k + 32 * s < ke;
        wg_cp4(xsc + b * 4 * BN + s * BN + tid, in ? esrc + k / 32 + s : a.xe, in);
      }
    }
    fast_cp_commit();
  };
  auto wscale = [&](i64 k) {
    const unsigned char* p = wsc + k / 32;
    u32 u = 0;
    UNROLL for (int s = 0; s < 4; s++) u |= k + 32 * s < ke ? (u32)p[s] << (8 * s) : 0u;
    return u;
  };
  float d[BN / 2];
  UNROLL for (int i = 0; i < BN / 2; i++) d[i] = 0.0f;
  const u32 xbase = smem_addr(xs), wbase = smem_addr(ws);
  u32 wnext = 0;
  if (steps > 0) copy(kb, 0), wnext = wscale(kb);
  for (i64 i = 0; i < steps; i++) {
    const int b = (int)(i & 1);
    fast_cp_wait<0>();
    wg_proxy_fence();
    __syncthreads();  // step i's operands in place; every warp done with step i − 1's
    const u32 wcur = wnext;
    if (i + 1 < steps) copy(kb + 128 * (i + 1), b ^ 1), wnext = wscale(kb + 128 * (i + 1));
    const u64 da = wg_desc(wbase + 8192 * b), db = wg_desc(xbase + BN * 128 * b);
    const float* sx = xsc + b * 4 * BN + 2 * t;
    const i64 nb = imin(4, (ke - kb - 128 * i) / 32);  // the step's blocks
    if constexpr (Q > 1) {
      UNROLL for (int s0 = 0; s0 < 4; s0 += Q) {
        if (s0 >= nb) break;
        float dq[Q][BN / 2];
        wg_fence();
        UNROLL for (int q = 0; q < Q; q++)
          if (s0 + q < nb) {
            if constexpr (BN == 128) wg_e4m3_m64n128(dq[q], da + 2 * (s0 + q), db + 2 * (s0 + q));
            else wg_e4m3_m64n64(dq[q], da + 2 * (s0 + q), db + 2 * (s0 + q));
          }
        wg_commit();
        wg_wait0();
        UNROLL for (int q = 0; q < Q; q++) {
          WG_KEEPN(dq[q], BN / 2);
          if (s0 + q >= nb) break;
          const float sw = ue8m0_f32((unsigned char)(wcur >> (8 * (s0 + q))));
          UNROLL for (int j = 0; j < BN / 8; j++) {
            const float2 x2 = *(const float2*)(sx + (s0 + q) * BN + 8 * j);
            const float c0 = sw * x2.x, c1 = sw * x2.y;
            d[4 * j] = fmaf(dq[q][4 * j], c0, d[4 * j]);
            d[4 * j + 1] = fmaf(dq[q][4 * j + 1], c1, d[4 * j + 1]);
            d[4 * j + 2] = fmaf(dq[q][4 * j + 2], c0, d[4 * j + 2]);
            d[4 * j + 3] = fmaf(dq[q][4 * j + 3], c1, d[4 * j + 3]);
          }
        }
      }
    }
    // (Q > 1: no blocks left for this loop)
    UNROLL for (int s = 0; s < (Q == 1 ? 4 : 0); s++) {  // + 32 bytes a 32-code block
      if (s >= nb) break;
      const float sw = ue8m0_f32((unsigned char)(wcur >> (8 * s)));
      // (the 64-row form: the block's multipliers loaded and formed before its products'
      // wait, which every later memory access must follow; the 128-row form has no
      // registers for them)
      float cm[BN / 4];  // (a pair of columns' multipliers a j)
      if constexpr (BN == 64) {
        UNROLL for (int j = 0; j < BN / 8; j++) {
          const float2 x2 = *(const float2*)(sx + s * BN + 8 * j);
          cm[2 * j] = sw * x2.x, cm[2 * j + 1] = sw * x2.y;
        }
      }
      float dt[BN / 2];
      wg_fence();
      if constexpr (BN == 128) wg_e4m3_m64n128(dt, da + 2 * s, db + 2 * s);
      else wg_e4m3_m64n64(dt, da + 2 * s, db + 2 * s);
      wg_commit();
      wg_wait0();
      WG_KEEPN(dt, BN / 2);
      UNROLL for (int j = 0; j < BN / 8; j++) {
        float c0, c1;
        if constexpr (BN == 64) {
          c0 = cm[2 * j], c1 = cm[2 * j + 1];
        } else {
          const float2 x2 = *(const float2*)(sx + s * BN + 8 * j);
          c0 = sw * x2.x, c1 = sw * x2.y;
        }
        d[4 * j] = fmaf(dt[4 * j], c0, d[4 * j]);
        d[4 * j + 1] = fmaf(dt[4 * j + 1], c1, d[4 * j + 1]);
        d[4 * j + 2] = fmaf(dt[4 * j + 2], c0, d[4 * j + 2]);
        d[4 * j + 3] = fmaf(dt[4 * j + 3], c1, d[4 * j + 3]);
      }
    }
  }
  wg_store<false, BN / 8>(f, sl, n0, m0, warp, g, t, d);
#endif
}
// (three blocks a multiprocessor: at most 168 registers a thread)
#undef KERNEL_BOUNDS
#define KERNEL_BOUNDS __launch_bounds__(128, 3)
KERNEL(fast_gemm_wg_e4m3, WgE4M3Args) { wg_e4m3_body<128>(a, GIDX, GSTRIDE); }
#undef KERNEL_BOUNDS
#define KERNEL_BOUNDS
// fast_gemm_wg_e4m3n: the same in blocks of 64 x rows (wgmma m64n64k32; steps of at most
// 64 rows, where a 128-row block would copy, multiply and scale zero rows for half of it):
// the same block sums in the same order, the same values
KERNEL(fast_gemm_wg_e4m3n, WgE4M3Args) { wg_e4m3_body<64>(a, GIDX, GSTRIDE); }
// fast_gemm_wg_e4m3p / _e4m3q (DEEPINFER_CUDA_WG_E4M3=p / q): fast_gemm_wg_e4m3n with a
// step's blocks issued two / four at a time (wg_e4m3_body's Q): the same values. _e4m3p
// keeps three blocks a multiprocessor (64 + 32 block sums and accumulators a thread);
// _e4m3q's 128 + 32 take two.
#undef KERNEL_BOUNDS
#define KERNEL_BOUNDS __launch_bounds__(128, 3)
KERNEL(fast_gemm_wg_e4m3p, WgE4M3Args) { wg_e4m3_body<64, 2>(a, GIDX, GSTRIDE); }
#undef KERNEL_BOUNDS
#define KERNEL_BOUNDS __launch_bounds__(128, 2)
KERNEL(fast_gemm_wg_e4m3q, WgE4M3Args) { wg_e4m3_body<64, 4>(a, GIDX, GSTRIDE); }
// fast_gemm_wg_e4m3w (=w): fast_gemm_wg_e4m3 (128 x rows) with a step's blocks two at a
// time (128 + 64 block sums and accumulators a thread: two blocks a multiprocessor)
KERNEL(fast_gemm_wg_e4m3w, WgE4M3Args) { wg_e4m3_body<128, 2>(a, GIDX, GSTRIDE); }
#undef KERNEL_BOUNDS
#define KERNEL_BOUNDS
