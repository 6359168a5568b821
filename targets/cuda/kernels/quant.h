// quant.h: the quant package's scalar codecs (bf16 rounding, E4M3/E2M1 encoding, the
// power-of-two scale) and Go's min/max builtins on floats, ported bit for bit for every
// kernel file that quantizes as the cpu target does.

// go_max32/go_min32/go_max64 are Go's max and min on floats: a NaN argument wins, and
// max(-0, 0) = 0, min(-0, 0) = -0.
DEV float go_max32(float a, float b) {
  if (a != a) return a;
  if (b != b) return b;
  if (a == b) return (bits_f32(a) >> 31) ? b : a;
  return a > b ? a : b;
}
DEV float go_min32(float a, float b) {
  if (a != a) return a;
  if (b != b) return b;
  if (a == b) return (bits_f32(a) >> 31) ? a : b;
  return a < b ? a : b;
}
DEV double go_max64(double a, double b) {
  if (a != a) return a;
  if (b != b) return b;
  if (a == b) return (bits_f64(a) >> 63) ? b : a;
  return a > b ? a : b;
}

// q_bf16 is quant.BF16: round to the nearest bfloat16, ties to even; NaN stays.
DEV float q_bf16(float x) {
  u32 b = bits_f32(x);
  if ((b & 0x7fffffffu) > 0x7f800000u) return x;
  b += 0x7fffu + ((b >> 16) & 1u);
  return f32_bits(b & ~0xffffu);
}

// q_round_e4m3 is quant.RoundE4M3 (|v| <= 448 after the caller's clamp).
DEV float q_round_e4m3(float v) {
  u32 b = bits_f32(v);
  u32 a = b & 0x7fffffffu;
  if (a < 0x3c800000u) return (float)(rint((double)v * 512) / 512);
  a += 0x7ffffu + ((a >> 20) & 1u);
  a &= ~0xfffffu;
  if (a > 0x43e00000u) a = 0x43e00000u;
  return f32_bits((b & 0x80000000u) | a);
}

// q_enc_e4m3 is quant.EncodeE4M3.
DEV unsigned char q_enc_e4m3(float x) {
  if (x != x) return 0x7f;
  unsigned char sign = (bits_f32(x) >> 31) ? 0x80 : 0;
  double a = fabs((double)x);
  if (a >= 448) return sign | 0x7e;
  if (a < 1.0 / 64) return sign | (unsigned char)rint(a * 512);
  int ex;
  double frac = frexp(a, &ex);
  int e = ex - 1;
  double m = rint((2 * frac - 1) * 8);
  if (m == 8) {
    m = 0;
    e++;
  }
  if (e + 7 > 15 || (e + 7 == 15 && m == 7)) return sign | 0x7e;
  return sign | (unsigned char)((e + 7) << 3) | (unsigned char)m;
}

// q_enc_e2m1 is quant.EncodeE2M1 (a nibble).
DEV unsigned char q_enc_e2m1(float x) {
  unsigned char sign = (bits_f32(x) >> 31) ? 8 : 0;
  double a = fabs((double)x);
  double code;
  if (a != a) return sign | 7;
  if (a >= 6) code = 7;
  else if (a < 2) code = rint(a * 2);
  else if (a < 4) code = 4 + rint(a - 2);
  else code = 6 + rint((a - 4) / 2);
  return sign | (unsigned char)code;
}

// q_pow2ceil is quant.Pow2Ceil.
DEV float q_pow2ceil(float x) {
  u32 b = bits_f32(x);
  int e = (int)((b >> 23) & 0xff) - 127;
  if (b & 0x7fffffu) e++;
  if (e < -126) e = -126;
  if (e > 127) e = 127;
  return f32_bits((u32)(e + 127) << 23);
}

// mxfp8_scale: an MXFP8 group's scale for its largest magnitude amax,
// 2^⌈log2(max(amax, 1e-4)/448)⌉ (a power of two from 2^-22 on).
DEV float mxfp8_scale(float amax) { return q_pow2ceil(go_max32(amax, f32_bits(0x38d1b717u)) * f32_bits(0x3b124925u)); }

// dense_mxfp8_group fake-quantizes g values in place to MXFP8 (quant.MXFP8.FakeQuant of
// one group): scale mxfp8_scale(amax), codes E4M3. It returns the scale.
DEV float dense_mxfp8_group(float* v, i64 g) {
  float amax = 0;
  for (i64 i = 0; i < g; i++) amax = go_max32(amax, (float)fabs((double)v[i]));
  float s = mxfp8_scale(amax);
  for (i64 i = 0; i < g; i++)
    v[i] = q_round_e4m3(go_min32(go_max32(v[i] / s, -448.0f), 448.0f)) * s;
  return s;
}

// e4m3_code: the E4M3 code of f, a value E4M3 holds exactly (an MXFP8 value over its
// scale): sign, then 2^(e − 7)·(1 + m/8) from 2^-6 on, m·2^-9 below; e4m3_f32 of it is f.
// An infinite f (a value quantized past float's range: 448 times a scale of 2^127) is
// ±448, whose value times that scale is the infinity again; NaN is the NaN code.
DEV unsigned char e4m3_code(float f) {
  const u32 u = bits_f32(f), sg = (u >> 24) & 0x80, a = u & 0x7fffffffu;
  if (a == 0) return (unsigned char)sg;
  if (a >= 0x7f800000u) return (unsigned char)(sg | (a == 0x7f800000u ? 0x7e : 0x7f));
  const int e = (int)(a >> 23) - 127;
  if (e >= -6) return (unsigned char)(sg | (u32)(e + 7) << 3 | ((a >> 20) & 7));
  return (unsigned char)(sg | (u32)(f32_bits(a) * 512.0f));
}

// q_act_piece writes the values [lo, lo + chunk) ∩ [0, n) of an activation row of n
// values to v[0, …) as the cpu's quantizeActs leaves them: a copy (mode 0), bf16 (1),
// bf16 then MXFP8 over a whole piece (2). It returns how many it wrote.
DEV i64 q_act_piece(const float* x, i64 n, i64 lo, i64 chunk, i64 mode, float* v) {
  i64 hi = imin(lo + chunk, n);
  for (i64 i = lo; i < hi; i++) v[i - lo] = mode == 0 ? x[i] : q_bf16(x[i]);
  if (mode == 2 && hi - lo == chunk) dense_mxfp8_group(v, chunk);
  return hi > lo ? hi - lo : 0;
}

#ifndef DI_EMULATE
// q_act_lanes32 gives v[j] the value at lane of piece p0 + j (32 values; j < N) of an
// activation row of n values as the cpu's quantizeActs leaves it: a copy (mode 0), bf16
// (1), bf16 then MXFP8 over whole pieces (2; each piece's maximum across the warp, an
// order-free maximum); 0 past n. The N loads are in flight together and the N maxima's
// shuffles interleaved. Every lane of the warp calls it with the same p0 (dense_quant
// and fast_quant_split through q_act_lane32, fast_quant_split's wide form with N = 4).
// (sc, where given: each whole piece's MXFP8 scale, mode 2.)
template <int N>
DEVM void q_act_lanes32(const float* x, i64 n, i64 p0, int lane, i64 mode, float* v, float* sc = nullptr) {
  _Pragma("unroll") for (int j = 0; j < N; j++) {
    const i64 c = (p0 + j) * 32 + lane;
    v[j] = c < n ? x[c] : 0.0f;
  }
  if (mode == 0) return;
  _Pragma("unroll") for (int j = 0; j < N; j++) v[j] = q_bf16(v[j]);
  if (mode != 2) return;
  float amax[N];
  _Pragma("unroll") for (int j = 0; j < N; j++) amax[j] = go_max32(0.0f, (float)fabs((double)v[j]));
  _Pragma("unroll") for (int off = 16; off >= 1; off >>= 1) {
    _Pragma("unroll") for (int j = 0; j < N; j++) amax[j] = go_max32(amax[j], __shfl_xor_sync(0xffffffffu, amax[j], off));
  }
  _Pragma("unroll") for (int j = 0; j < N; j++) {
    if ((p0 + j) * 32 + 32 > n) continue;
    const float s = mxfp8_scale(amax[j]);
    v[j] = q_round_e4m3(go_min32(go_max32(v[j] / s, -448.0f), 448.0f)) * s;
    if (sc) sc[j] = s;
  }
}

// q_act_lane32 is q_act_lanes32 for one piece p.
DEVM float q_act_lane32(const float* x, i64 n, i64 p, int lane, i64 mode) {
  float v;
  q_act_lanes32<1>(x, n, p, lane, mode, &v);
  return v;
}
#endif

// The experts' SwiGLU (moe.cu, tensorcore.cu).
DEV float moe_silu(float x) { return x / (1 + (float)exp((double)(-x))); }

// moe_swiglu is the cpu's clamped SwiGLU of one value.
DEV float moe_swiglu(float g, float u, float limit) {
  if (limit > 0) {
    g = go_min32(g, limit);
    u = go_max32(go_min32(u, limit), -limit);
  }
  return moe_silu(g) * u;
}

// softmax_block64 is softmax_block (below) on a block of 64 keys for NH heads at once, a
// warp's lane taking keys lane and lane + 32 of each (the device's form: the heads'
// chains of loads, shuffles and exponentials in flight together): head h's logits at
// pr[h][e·ks], the block's valid keys vr, its rescale to *bsc[h] (lane 0), its running
// maximum m[h] and sum s[h]. Each head's operations are softmax_block's: the same
// maximum, rescale, probabilities and their bf16 roundings; the block's sum is
// cascade_sum's for 64 terms, whose lane (k, l) is (0 + x[8k + l]) + x[32 + 8k + l]
// (two terms a lane, no level of the cascade closes) and whose fold adds the lanes
// k = 1..3 into lane k = 0 in order and then those 8 from 0 in order — the lane's own two
// probabilities, three shuffles down and eight broadcasts, instead of cascade_lane's
// loops, 32 shuffles and cascade_fold (the same additions in the same order, so the same
// value bit for bit). The unrounded probabilities are not stored (only cascade_lane
// reads them back).
#ifndef DI_EMULATE
template <int NH>
DEVM void softmax_block64(float* const* pr, i64 ks, const unsigned char* vr, int lane, float* const* bsc, float* m,
                          float* s) {
  const bool v0 = vr[lane] != 0, v1 = vr[lane + 32] != 0;
  float x0[NH], x1[NH], bm[NH];
  UNROLL_BY(4) for (int h = 0; h < NH; h++) {
    x0[h] = pr[h][lane * ks], x1[h] = pr[h][(lane + 32) * ks];
    bm[h] = m[h];
    if (v0) bm[h] = go_max32(bm[h], x0[h]);
    if (v1) bm[h] = go_max32(bm[h], x1[h]);
  }
  for (int off = 16; off >= 1; off >>= 1) {
    UNROLL_BY(4) for (int h = 0; h < NH; h++) bm[h] = go_max32(bm[h], __shfl_xor_sync(0xffffffffu, bm[h], off));
  }
  float sc[NH], vv[NH];
  UNROLL_BY(4) for (int h = 0; h < NH; h++) {
    const bool live = bm[h] != -F32_INF;  // (the warp's lanes alike)
    sc[h] = live ? (float)exp((double)(m[h] - bm[h])) : 0.0f;
    if (lane == 0) *bsc[h] = live ? sc[h] : -1.0f;  // (−1: the block changes nothing)
    if (live) m[h] = bm[h];
    float p0 = 0, p1 = 0;
    if (live && v0) p0 = (float)exp((double)(x0[h] - m[h])), pr[h][lane * ks] = q_bf16(p0);
    if (live && v1) p1 = (float)exp((double)(x1[h] - m[h])), pr[h][(lane + 32) * ks] = q_bf16(p1);
    vv[h] = (0.0f + p0) + p1;  // cascade lane (lane / 8, lane % 8)
  }
  UNROLL_BY(4) for (int h = 0; h < NH; h++) {
    float f = vv[h] + __shfl_down_sync(0xffffffffu, vv[h], 8);  // lanes 0..7: lanes k = 0..3 in order
    f = f + __shfl_down_sync(0xffffffffu, vv[h], 16);
    f = f + __shfl_down_sync(0xffffffffu, vv[h], 24);
    float fin = 0;
    UNROLL_BY(8) for (int l = 0; l < 8; l++) fin = fin + __shfl_sync(0xffffffffu, f, l);
    if (bm[h] != -F32_INF) s[h] = s[h] * sc[h] + fin;
  }
}
#endif

// softmax_block is one block of bl keys of the blocked online softmax of one (row,
// head) (cpu: blockSoftmax), a warp's lanes taking keys lane, lane + 32, … (the emulated
// device: lane 0, every key): the block's maximum over its valid keys (vr), the
// rescale (*bsc, written by lane 0; −1 where the block changes nothing), each valid
// key's probability (ps[e], and its bf16 rounding in place of its logit at pr[e·ks]; 0
// in ps for the others), the block's sum in cascade order (cascade_sum's 32 lanes one a
// lane, folded by every lane: the same value bit for bit), and the running maximum m and
// sum. csa_attn_softmax (csa41.cu) runs it block after block from global scratch,
// csa_tc_fused (tensorcore_attn.cu) from shared memory.
// (FAST false: the device's general form for a block of 64 too, the check of
// softmax_block64 on host fibers.)
template <bool FAST = true>
DEVM void softmax_block(float* pr, i64 ks, const unsigned char* vr, float* ps, i64 bl, int lane, float* bsc, float& m,
                        float& sum) {
#ifdef DI_EMULATE
  const int step = 1;
#else
  const int step = 32;
  if (FAST && bl == 64) {
    softmax_block64<1>(&pr, ks, vr, lane, &bsc, &m, &sum);
    return;
  }
#endif
  float bm = m;
  for (i64 e = lane; e < bl; e += step)
    if (vr[e]) bm = go_max32(bm, pr[e * ks]);
#ifndef DI_EMULATE
  for (int off = 16; off >= 1; off >>= 1) bm = go_max32(bm, __shfl_xor_sync(0xffffffffu, bm, off));
#endif
  if (bm == -F32_INF) {
    if (lane == 0) *bsc = -1;  // the block changes nothing
    return;
  }
  const float sc = (float)exp((double)(m - bm));
  m = bm;
  if (lane == 0) *bsc = sc;
  for (i64 e = lane; e < bl; e += step) {
    float* s = pr + e * ks;
    if (!vr[e]) {
      ps[e] = 0;
      continue;
    }
    const float pe = (float)exp((double)(*s - m));
    ps[e] = pe;
    *s = q_bf16(pe);
  }
  float bsum;
  FRow sr = {ps};
#ifdef DI_EMULATE
  bsum = cascade_sum(sr, bl);
#else
  // (until run 17 lane 0 ran cascade_sum alone, its 128 accumulators in local memory)
  __syncwarp();
  const float mine = cascade_lane(sr, bl, lane >> 3, lane & 7);
  float lv[32];
  UNROLL_BY(32) for (int c = 0; c < 32; c++) lv[c] = __shfl_sync(0xffffffffu, mine, c);
  bsum = cascade_fold(sr, bl, lv);
#endif
  sum = sum * sc + bsum;
}
