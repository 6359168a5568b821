// tensorcore_fp4.cu: the routed experts' products in the fast numerics mode when the
// experts are FP4 (e2m1 codes, a UE8M0 scale per 32 values of a row): a launch block
// (four warps) per (active expert, block of weight rows, slice of the reduction).
//
// What differs from tensorcore.cu's fast_moe_up/down (which every other format uses):
//   - the FP4 codes are widened by integer operations, not per value: a code's sign,
//     exponent and mantissa bits are placed at bf16's (fp4_pair), which reads the code
//     scaled by 2^-126 (0.5, the one subnormal code, lands on a bf16 subnormal), and one
//     bf16x2 multiply by 2^126·scale (fp4_m1, fp4_m2) gives the weight exactly;
//   - a lane loads 32 consecutive codes of a row (16 bytes, one scale) per step of 128
//     reduction values, and the reduction inside those 32 is permuted: bf16 pair u = 4w + j
//     of a lane holds its values 8w + j and 8w + j + 4 (fp4_pair's order). The
//     activations are split into halves in the same order once (fast_split_fp4), so the
//     products are the same, only summed in another order;
//   - the slots' activation halves are staged in shared memory once per block and pass of
//     FP4_KC values (in the pipelined tiles: copied a step ahead), and each warp reads its
//     slots' pairs from there (swizzled so that a quarter-warp's 16-byte loads hit
//     distinct banks);
//   - the device kernels fast_moe_up_fp4/fast_moe_down_fp4 (fp4_pipe) copy each lane's
//     weight bytes (two steps ahead) and the activation halves (one step ahead) into
//     shared memory with cp.async; the _reg kernels (fp4_tiles, DEEPINFER_CUDA_FP4_PIPE=0)
//     load the next step's weights into registers. Both give the same values (the same
//     decode and chain of mma; only the loads differ).
// A slot's sum depends only on the weight shapes (slices, steps, mma order), never on
// the other slots of the step. The emulated device computes each block's values in
// plain loops from the same widened weights and the same activation pairs, each mma's
// 16 products summed in k order in float32.

#define FP4_KC 512     // reduction values staged a pass
#define FP4_STEPS 4    // FP4_KC / 128
#define FP4_SLOTS 16   // slots staged a pass (two activation tiles of 8)

// fp4_pair: codes j and j+4 of the eight in q (code i in bits 4i..4i+3) as a bf16 pair,
// low half code j, each 2^-126 times its e2m1 value.
DEV u32 fp4_pair(u32 q, int j) {
  u32 x = q >> (4 * j);
  return ((x & 0x00070007u) << 6) | ((x & 0x00080008u) << 12);
}
// fp4_m1, fp4_m2: bf16 pairs whose product is 2^126 · 2^(u−127), u a UE8M0 scale byte;
// m2 is 1 unless u > 128 (and NaN for 0xff, as ue8m0_f32).
DEV u32 fp4_m1(u32 u) {
  u32 b = ((u < 128 ? u : 128) + 126) << 7;
  return b * 0x10001u;  // b | b << 16 (b < 2^16)
}
DEV u32 fp4_m2(u32 u) {
  u32 b = u == 255 ? 0x7fc0u : ((u > 128 ? u - 128 : 0) + 127) << 7;
  return b | (b << 16);
}

// fast_split_fp4: as fast_split, but each 32 values of a row in fp4_pair's order: pair
// u = 4w + j of a 32-value chunk holds values 8w + j and 8w + j + 4. Kp is a multiple
// of 128; values at or past K are 0.
KERNEL(fast_split_fp4, FastSplitArgs) {
  i64 P = a.Kp / 2;
  for (i64 i = GIDX; i < a.M * P; i += GSTRIDE) {
    const i64 m = qdiv(i, P), p = qmod(i, P);
    i64 u = p & 15, k = (p >> 4) * 32 + 8 * (u >> 2) + (u & 3);
    const float* xr = a.x + m * a.ldx;
    float v0 = k < a.K ? xr[k] : 0.0f, v1 = k + 4 < a.K ? xr[k + 4] : 0.0f;
    fast_pair(a.xh, a.xl, i, v0, v1, a.xexact, a.err);
  }
}

// fp4_block is a launch block's place: its expert, its first weight row, its slice.
struct Fp4Block {
  int e;
  i64 r0, kb, ke, s;
};
// fp4_where: block blk of the launch. NW 2 (w1 and w3): 64 weight rows a block, a warp
// 16 rows of both; NW 1 (w2): 128 rows a block, a warp two tiles of 16.
template <int NW>
DEVM Fp4Block fp4_where(const FastMoEArgs& a, i64 blk) {
  const i64 RB = NW == 2 ? 64 : 128;
  i64 nrg = (a.N + RB - 1) / RB;
  Fp4Block b;
  b.s = blk % a.S;
  b.r0 = ((blk / a.S) % nrg) * RB;
  b.e = a.act[blk / (a.S * nrg)];
  b.kb = b.s * a.ks;
  b.ke = imin(a.Kp, b.kb + a.ks);
  return b;
}
// fp4_weight: stream p's weight (NW 2: w1, w3; NW 1: w2 twice) of expert e.
template <int NW>
DEVM Weight fp4_weight(const FastMoEArgs& a, int e, int p) {
  if (NW == 1) return a.tab[a.E + e];
  return p == 0 ? a.tab[e] : a.tab[2 * a.E + e];
}
// fp4_store: a sum of weight row n for the expert's slot c (of list[base..]) into part.
DEVM void fp4_store(const FastMoEArgs& a, int plane, i64 s, i64 slot, i64 n, float v) {
  a.part[((plane * a.S + s) * a.slots + slot) * a.N + n] = v;
}

#ifndef DI_EMULATE
// fp4_streams: a lane's two streams of block b's warp (NW 2: w1 and w3, 16 rows each;
// NW 1: two 16-row tiles of w2): the code and scale rows of its rows g and g+8 (row 0's
// where a row is past N, then not ok), and each stream's first row.
template <int NW>
DEVM void fp4_streams(const FastMoEArgs& a, const Fp4Block& b, int warp, int g, const unsigned char** wa,
                      const unsigned char** wb, const unsigned char** sa, const unsigned char** sb, bool* oka,
                      bool* okb, i64* rt0) {
  const int RT = NW == 2 ? 1 : 2;
  UNROLL for (int p = 0; p < 2; p++) {
    Weight w = fp4_weight<NW>(a, b.e, p);
    rt0[p] = b.r0 + warp * 16 * RT + (NW == 2 ? 0 : 16 * p);
    i64 ra = rt0[p] + g, rb = ra + 8;
    oka[p] = ra < a.N, okb[p] = rb < a.N;
    wa[p] = (const unsigned char*)w.p + (oka[p] ? ra : 0) * (w.cols / 2);
    wb[p] = (const unsigned char*)w.p + (okb[p] ? rb : 0) * (w.cols / 2);
    sa[p] = w.s + (oka[p] ? ra : 0) * (w.cols / 32);
    sb[p] = w.s + (okb[p] ? rb : 0) * (w.cols / 32);
  }
}
#endif

// fp4_sw: where chunk w4 (of four 16-byte chunks) of pair group t of slot c sits among
// its group's four places in the staged activations: w4 XOR a lane constant, so that a
// quarter-warp's 16-byte loads (slots of both parities, t = 0..3) hit distinct banks, and
// so that a lane's four places are its first one's index XOR w4 (fp4_step).
DEV int fp4_sw(int w4, int t, int c) { return w4 ^ ((t >> 1) | ((c & 1) << 1)); }
// fp4_xl: lane (g, t)'s index of chunk 0 of its group in slot g of a staged step whose
// slots are cs uint4s apart (fp4_step's xl), computed once a kernel: on the device behind
// an opaque move, so that the compiler keeps it in a register (or spills it) instead of
// forming it again from the thread index before every load (~12 instructions each time,
// four times a step, at the tiles' 128-register bound).
DEV int fp4_xl(int g, int t, int cs) {
  int v = g * cs + t * 4 + fp4_sw(0, t, g);
#if !defined(DI_EMULATE) && !defined(DI_LANES)
  asm volatile("mov.b32 %0, %0;" : "+r"(v));
#endif
  return v;
}

#ifndef DI_EMULATE
// fp4_step: one step's arithmetic of a warp's two streams (the device tiles, register
// and pipelined): the lane's 4 × 32 codes of rows g and g+8 (ca, cb) widened with their
// scales (m1, and m2 when a scale of the warp exceeds 128: big), then for each live
// activation tile j the slots' halves from shared memory (slot c's at xs[c·cs + half·16
// + t·4 + fp4_sw(w4, t, c)]: for c = 8j + g the lane's index xl = fp4_xl(g, t, cs) XOR
// w4, plus 8j·cs; cs a multiple of 4) and the mma chain: for w4 = 0..3, hi then lo for
// pairs 0-1, hi then lo for pairs 2-3.
template <int J>
DEVM void fp4_step(float (&acc)[2][J][4], const uint4* ca, const uint4* cb, const u32* m1a, const u32* m1b,
                   const u32* m2a, const u32* m2b, bool big, const uint4* xs, int cs, int live, int xl,
                   bool xexact) {
  UNROLL for (int w4 = 0; w4 < 4; w4++) {
    u32 da[2][4], db[2][4];
    UNROLL for (int p = 0; p < 2; p++) {
      u32 xa = w4 == 0 ? ca[p].x : w4 == 1 ? ca[p].y : w4 == 2 ? ca[p].z : ca[p].w;
      u32 xb = w4 == 0 ? cb[p].x : w4 == 1 ? cb[p].y : w4 == 2 ? cb[p].z : cb[p].w;
      UNROLL for (int j = 0; j < 4; j++) {
        da[p][j] = bf2_mul(fp4_pair(xa, j), m1a[p]);
        db[p][j] = bf2_mul(fp4_pair(xb, j), m1b[p]);
      }
      if (big) {
        UNROLL for (int j = 0; j < 4; j++) {
          da[p][j] = bf2_mul(da[p][j], m2a[p]);
          db[p][j] = bf2_mul(db[p][j], m2b[p]);
        }
      }
    }
    UNROLL for (int j = 0; j < J; j++) {
      if (j >= live) break;
      const int at = (xl ^ w4) + j * 8 * cs;  // slot 8j + g: the same parity as g
      uint4 bh = xs[at];
      if (xexact) {  // bf16 activations: no lo halves
        UNROLL for (int p = 0; p < 2; p++) {
          fast_mma(acc[p][j], da[p][0], db[p][0], da[p][1], db[p][1], bh.x, bh.y);
          fast_mma(acc[p][j], da[p][2], db[p][2], da[p][3], db[p][3], bh.z, bh.w);
        }
        continue;
      }
      uint4 bl = xs[at + 16];
      UNROLL for (int p = 0; p < 2; p++) {
        fast_mma(acc[p][j], da[p][0], db[p][0], da[p][1], db[p][1], bh.x, bh.y);
        fast_mma(acc[p][j], da[p][0], db[p][0], da[p][1], db[p][1], bl.x, bl.y);
        fast_mma(acc[p][j], da[p][2], db[p][2], da[p][3], db[p][3], bh.z, bh.w);
        fast_mma(acc[p][j], da[p][2], db[p][2], da[p][3], db[p][3], bl.z, bl.w);
      }
    }
  }
}
#endif

#ifndef DI_EMULATE
// fp4_load_regs: step h's codes (16 bytes of each of the lane's rows g and g+8, both
// streams) and scale bytes into registers (the register and wide tiles); zeros and
// scale 127 past K or N.
DEVM void fp4_load_regs(i64 kb, int t, int K, int h, const unsigned char* const* wa, const unsigned char* const* wb,
                        const unsigned char* const* sa, const unsigned char* const* sb, const bool* oka, const bool* okb,
                        uint4* qa, uint4* qb, u32* ua, u32* ub) {
  int kl = (int)kb + 128 * h + 32 * t;
  UNROLL for (int p = 0; p < 2; p++) {
    bool ina = oka[p] && kl < K, inb = okb[p] && kl < K;
    qa[p] = ina ? *(const uint4*)(wa[p] + kl / 2) : make_uint4(0, 0, 0, 0);
    qb[p] = inb ? *(const uint4*)(wb[p] + kl / 2) : make_uint4(0, 0, 0, 0);
    ua[p] = ina ? sa[p][kl / 32] : 127;
    ub[p] = inb ? sb[p][kl / 32] : 127;
  }
}
// Fp4Rows8: a lane's place in the weights for the tiles that keep only rows g's pointers
// (the _rega, _reg8 and _reg8a tiles, and the wide tiles): rows g+8's codes and scales lie 8 rows on (every
// expert weight has its K values a row: r8 = 8 · K/2 code bytes, s8 = 8 · K/32 scale bytes
// on), so a lane holds four 64-bit row pointers fewer; the row pointers start at the
// lane's first step (kb + 32t), and hk is the steps before K (the same condition as
// fp4_load_regs' kl < K), so that a step's loads are its offsets from them (64 code
// bytes and 4 scale bytes a step) instead of each step's 64-bit index arithmetic.
struct Fp4Rows8 {
  const unsigned char* w[2];  // rows g's codes of step 0
  const unsigned char* s[2];  // rows g's scale bytes of step 0
  int r8, s8, hk;
};
DEVM Fp4Rows8 fp4_rows8(i64 kb, int t, int K, int cols, const unsigned char* const* wa, const unsigned char* const* sa) {
  Fp4Rows8 r;
  const int k0 = (int)kb + 32 * t;  // (kb a multiple of 128: k0 / 2 and k0 / 32 exact)
  r.r8 = 4 * cols, r.s8 = cols / 4;
  r.hk = k0 < K ? (K - k0 + 127) / 128 : 0;
  UNROLL for (int p = 0; p < 2; p++) r.w[p] = wa[p] + k0 / 2, r.s[p] = sa[p] + k0 / 32;
  return r;
}
// fp4_rows8t: Fp4Rows8 for weights in the tiled layout (fmt 6, DEEPINFER_CUDA_FP4_TILED;
// fp4_tile_at): lane (g, t)'s 16 code bytes of rows g and g+8 at a step lie 512 bytes
// apart in the step's 1,024-byte tile of the 16-row group, at 16 · (4g + t), and the
// next step's tile 1,024 bytes on; its two scale bytes (rows g, g+8) are one 16-bit word
// at 2 · (4g + t) of the tile's 64 scale bytes. So a warp's load of one half of a step is
// 512 contiguous bytes (four whole 128-byte lines), where the row layout's is 64 bytes
// of each of eight rows. (r8 and s8 are not read: the offsets are constants.)
template <int NW>
DEVM Fp4Rows8 fp4_rows8t(const FastMoEArgs& a, const Fp4Block& b, const i64* rt0, const bool* oka, int g, int t,
                         int K) {
  Fp4Rows8 r;
  const int k0 = (int)b.kb + 32 * t;
  r.r8 = 512, r.s8 = 1;
  r.hk = k0 < K ? (K - k0 + 127) / 128 : 0;
  UNROLL for (int p = 0; p < 2; p++) {
    Weight w = fp4_weight<NW>(a, b.e, p);
    const i64 tile = (oka[p] ? rt0[p] / 16 : 0) * (w.cols / 128) + b.kb / 128;
    r.w[p] = (const unsigned char*)w.p + tile * 1024 + 16 * (4 * g + t);
    r.s[p] = w.s + tile * 64 + 2 * (4 * g + t);
  }
  return r;
}
// fp4_load_regs8: fp4_load_regs for the Fp4Rows8 tiles: the same bytes (okb implies oka,
// so rows g's pointers are then row g's). TL: the tiled layout's places (fp4_rows8t).
template <bool TL = false>
DEVM void fp4_load_regs8(const Fp4Rows8& r, int h, const bool* oka, const bool* okb, uint4* qa, uint4* qb, u32* ua,
                         u32* ub) {
  const bool in = h < r.hk;
  const u32 off = (TL ? 1024u : 64u) * (u32)h, soff = (TL ? 64u : 4u) * (u32)h;
  UNROLL for (int p = 0; p < 2; p++) {
    const bool ina = oka[p] && in, inb = okb[p] && in;
    qa[p] = ina ? *(const uint4*)(r.w[p] + off) : make_uint4(0, 0, 0, 0);
    qb[p] = inb ? *(const uint4*)(r.w[p] + (TL ? 512 : r.r8) + off) : make_uint4(0, 0, 0, 0);
    if constexpr (TL) {
      const u32 v = ina ? (u32) * (const unsigned short*)(r.s[p] + soff) : 0x7f7fu;
      ua[p] = v & 255u;
      ub[p] = inb ? v >> 8 : 127;
    } else {
      ua[p] = ina ? r.s[p][soff] : 127;
      ub[p] = inb ? r.s[p][r.s8 + soff] : 127;
    }
  }
}
// fp4_scales: a step's multipliers for the lane's scale bytes (fp4_m1), and whether any
// lane of the warp has a byte over 128; only then their fp4_m2 too (m2a, m2b are read
// only when it returns true; every tile kernel).
DEVM bool fp4_scales(const u32* ua, const u32* ub, u32* m1a, u32* m1b, u32* m2a, u32* m2b) {
  bool big = false;
  UNROLL for (int p = 0; p < 2; p++) {
    m1a[p] = fp4_m1(ua[p]), m1b[p] = fp4_m1(ub[p]);
    big = big || ua[p] > 128 || ub[p] > 128;
  }
  big = __any_sync(0xffffffffu, big);
  if (big) {  // (rare: scales over 2^1)
    UNROLL for (int p = 0; p < 2; p++) m2a[p] = fp4_m2(ua[p]), m2b[p] = fp4_m2(ub[p]);
  }
  return big;
}
// fp4_store_pass: a pass's sums (J activation tiles of 8 slots) into part: lane (g, t)'s
// c0, c1 are weight row g, slots 2t, 2t+1; c2, c3 row g+8 (every tile kernel).
template <int NW, int J>
DEVM void fp4_store_pass(const FastMoEArgs& a, const Fp4Block& b, const i64* rt0, i64 base, i64 c0, int nc, int live,
                         int g, int t, const float (&acc)[2][J][4]) {
  UNROLL for (int j = 0; j < J; j++) {
    if (j >= live) break;
    UNROLL for (int e = 0; e < 4; e++) {
      int c = 8 * j + 2 * t + (e & 1);
      if (c >= nc) continue;
      i64 slot = a.list[base + c0 + c];
      UNROLL for (int p = 0; p < 2; p++) {
        i64 r = rt0[p] + g + (e >= 2 ? 8 : 0);
        if (r < a.N) fp4_store(a, NW == 2 ? p : 0, b.s, slot, r, acc[p][j][e]);
      }
    }
  }
}
#endif

// fp4_codes_at, fp4_scale_at: where the 16 code bytes and the scale byte of values
// [k, k + 32) of row r lie (k a multiple of 32): in the row layout (fmt 4) at r · cols/2 +
// k/2 and r · cols/32 + k/32; in the tiled one (fmt 6, TL; DEEPINFER_CUDA_FP4_TILED) in
// the 16-row × 128-value tile (r / 16, k / 128), 1,024 code bytes and 64 scale bytes a
// tile, tiles in row-group order then along K: row r % 16 = 8·h8 + g and k % 128 = 32·t
// at codes 512·h8 + 16·(4g + t), scale 2·(4g + t) + h8 (fp4_rows8t; Go's tileFP4).
template <bool TL>
DEVM const unsigned char* fp4_codes_at(const Weight& w, i64 r, i64 k) {
  if constexpr (!TL) return (const unsigned char*)w.p + r * (w.cols / 2) + k / 2;
  const i64 tile = (r / 16) * (w.cols / 128) + k / 128;
  const i64 g = r & 7, h8 = (r >> 3) & 1, t = (k >> 5) & 3;
  return (const unsigned char*)w.p + tile * 1024 + 512 * h8 + 16 * (4 * g + t);
}
template <bool TL>
DEVM const unsigned char* fp4_scale_at(const Weight& w, i64 r, i64 k) {
  if constexpr (!TL) return w.s + r * (w.cols / 32) + k / 32;
  const i64 tile = (r / 16) * (w.cols / 128) + k / 128;
  const i64 g = r & 7, h8 = (r >> 3) & 1, t = (k >> 5) & 3;
  return w.s + tile * 64 + 2 * (4 * g + t) + h8;
}

// The emulated tiles: each weight row's pairs of the slice widened once (wl, wh), then
// summed with every slot's activations in the device's order: mma i of step k0 takes
// pairs 2i and 2i + 1 of each lane t's 32 values, hi halves then lo, its sum added to
// the output's; the lo halves' products only where the activations have them.
#ifdef DI_EMULATE
template <int NW, bool TL = false>
DEVM void fp4_tiles(const FastMoEArgs& a, i64 blocks) {
  const int RT = NW == 2 ? 1 : 2;
  const i64 P = a.Kp / 2;
  const i64 div = NW == 2 ? a.k : 1;
  float* wl = nullptr;
  float* wh = nullptr;
  i64 cap = 0;
  for (i64 blk = 0; blk < blocks; blk++) {
    Fp4Block b = fp4_where<NW>(a, blk);
    if (b.e < 0) continue;
    i64 n = a.counts[b.e], base = a.off[b.e];
    const i64 steps = (b.ke - b.kb + 127) / 128, np = 64 * steps;  // the slice's pairs
    if (np > cap) {
      delete[] wl;
      delete[] wh;
      cap = np, wl = new float[cap], wh = new float[cap];
    }
    for (int warp = 0; warp < 4; warp++)
      for (int p = 0; p < 2; p++) {
        Weight w = fp4_weight<NW>(a, b.e, p);
        int plane = NW == 2 ? p : 0;
        i64 rt0 = b.r0 + warp * 16 * RT + (NW == 2 ? 0 : 16 * p);
        for (i64 r = rt0; r < rt0 + 16 && r < a.N; r++) {
          for (i64 q0 = 0; q0 < np; q0 += 16) {  // lane t's 16 pairs of step k0
            const i64 kl = b.kb + 2 * q0;
            u32 m1 = fp4_m1(127), m2 = fp4_m2(127);
            if (kl < a.K) {
              u32 sc = *fp4_scale_at<TL>(w, r, kl);
              m1 = fp4_m1(sc), m2 = fp4_m2(sc);
            }
            for (int u = 0; u < 16; u++) {
              u32 q = 0;
              if (kl < a.K) memcpy(&q, fp4_codes_at<TL>(w, r, kl) + 4 * (u >> 2), 4);
              u32 wp = bf2_mul(bf2_mul(fp4_pair(q, u & 3), m1), m2);
              wl[q0 + u] = fast_lo(wp), wh[q0 + u] = fast_hi(wp);
            }
          }
          for (i64 c = 0; c < n; c++) {
            i64 slot = a.list[base + c], m = slot / div;
            const u32* xh = a.xh + m * P + b.kb / 2;
            const u32* xl = a.xl + m * P + b.kb / 2;
            float acc = 0;
            for (i64 s = 0; s < steps; s++)
              for (int i = 0; i < 8; i++) {  // mma i: pairs 2i and 2i+1 of each lane t
                float dh = 0, dl = 0;
                for (int t = 0; t < 4; t++)
                  for (int v = 0; v < 2; v++) {
                    const i64 q = 64 * s + 16 * t + 2 * i + v;
                    dh += wl[q] * fast_lo(xh[q]);
                    dh += wh[q] * fast_hi(xh[q]);
                    if (!a.xexact) {
                      dl += wl[q] * fast_lo(xl[q]);
                      dl += wh[q] * fast_hi(xl[q]);
                    }
                  }
                acc += dh;
                if (!a.xexact) acc += dl;
              }
            fp4_store(a, plane, b.s, slot, r, acc);
          }
        }
      }
  }
  delete[] wl;
  delete[] wh;
}
#else
// fp4_stage_async: this thread's cp.async copies of the slots' halves (XE: the hi ones
// only) of the stage of ST steps from step h0 into buffer (h0 / ST) & 1 of xs (XE: the two
// buffers interleaved a step; otherwise BUF uint4s apart), zeros for slots past nc, steps
// past the slice and lo halves of bf16 activations; one commit group (the AX register
// tiles and the bulk-copy tiles).
template <bool XE, int ST, int BUF>
DEVM void fp4_stage_async(const FastMoEArgs& a, const Fp4Block& b, uint4* xs, const i64* srow, i64 P, int tid, int live,
                          int nc, int nsteps, int h0) {
  const int ns = min(ST, nsteps - h0), buf = (h0 / ST) & 1;
  const int total = live * 8 * ST * (XE ? 1 : 2) * 16;
  for (int i = tid; i < total; i += 128) {
    const int c4 = i & 3, tt = (i >> 2) & 3, half = XE ? 0 : (i >> 4) & 1;
    const int q = i >> (XE ? 4 : 5), hh = q & (ST - 1), c = q / ST;
    const bool in = c < nc && hh < ns && !(half && a.xexact);
    const u32* src = in ? (half ? a.xl : a.xh) + srow[c] * P + (b.kb + 128 * (h0 + hh)) / 2 + tt * 16 + c4 * 4 : a.xh;
    const int pos = fp4_sw(c4, tt, c);
    const int at = XE ? ((c * ST + hh) * 2 + buf) * 16 : buf * BUF + ((c * ST + hh) * 2 + half) * 16;
    fast_cp16(&xs[at + tt * 4 + pos], src, in);
  }
  fast_cp_commit();
}
// XE: the activations are bf16 values (a.xexact, which Go guarantees for these
// kernels), known when compiled, so the lo halves' staging, loads and mma are not in the
// kernel at all (fast_moe_*_fp4_regx); the same operations on every value the others
// compute. (Run 21c timed a form loading the weights two steps ahead at three blocks a
// multiprocessor: slower, removed; docs/perf/moe.md.)
// R8 (the _rega and _reg8 tiles): rows g+8 found from rows g (fp4_load_regs8), the same
// loads.
// AX (the _rega and _reg8a tiles; R8 only): the slots' halves of each stage copied by
// cp.async one stage ahead, so that a stage's copies are in flight while the last
// stage's steps run instead of a stage loading its halves through registers between two
// barriers. XE (_rega): stages of FP4_STEPS steps, the hi halves only, the second buffer
// in the places of xs the lo halves would take (XE never reads them); otherwise (_reg8a):
// stages of two steps, both halves, xs' two halves of its room the two buffers. The same
// halves in the same places of the buffer read (zeros for slots past nc, steps past the
// slice and lo halves of bf16 activations), so the same values.
// TL (the _regt tiles, DEEPINFER_CUDA_FP4_TILED): _rega's with the weights in the tiled
// layout (fp4_rows8t); the same values.
template <int NW, bool XE = false, bool R8 = false, bool AX = false, bool TL = false>
DEVM void fp4_tiles(const FastMoEArgs& a, i64 GIDX) {
  static_assert(!TL || R8, "the tiled layout is read by the Fp4Rows8 loads only");
  static_assert(!AX || R8, "the async staging is compiled with the rows g+8 found from rows g only");
  // ST: steps a stage; BUF (AX without XE): one buffer's uint4s
  constexpr int ST = AX && !XE ? 2 : FP4_STEPS, BUF = FP4_SLOTS * ST * 2 * 16;
  static_assert(!AX || XE || 2 * BUF <= FP4_SLOTS * FP4_STEPS * 2 * 16, "two stage buffers fit xs");
  __shared__ uint4 xs[FP4_SLOTS * FP4_STEPS * 2 * 16];
  Fp4Block b = fp4_where<NW>(a, GIDX >> 7);
  if (b.e < 0) return;  // the whole block
  const int tid = (int)(GIDX & 127), warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const i64 P = a.Kp / 2;
  const i64 div = NW == 2 ? a.k : 1;
  const i64 n = a.counts[b.e], base = a.off[b.e];
  const int nsteps = (int)((b.ke - b.kb) / 128), K = (int)a.K;
  __shared__ i64 srow[FP4_SLOTS];  // the x row of each staged slot
  // the warp's two streams (weight, 16-row tile): this lane's rows g and g+8
  const unsigned char *wa[2], *wb[2], *sa[2], *sb[2];
  bool oka[2], okb[2];
  i64 rt0[2];
  fp4_streams<NW>(a, b, warp, g, wa, wb, sa, sb, oka, okb, rt0);
  const int xl = fp4_xl(g, t, ST * 2 * 16);  // (fp4_step)
  Fp4Rows8 r8;
  if constexpr (TL) r8 = fp4_rows8t<NW>(a, b, rt0, oka, g, t, K);
  else if constexpr (R8) r8 = fp4_rows8(b.kb, t, K, (int)fp4_weight<NW>(a, b.e, 0).cols, wa, sa);
  for (i64 c0 = 0; c0 < n; c0 += FP4_SLOTS) {
    const int nc = (int)imin(FP4_SLOTS, n - c0), live = (nc + 7) / 8;
    float acc[2][2][4];
    UNROLL for (int p = 0; p < 2; p++) UNROLL for (int j = 0; j < 2; j++) UNROLL for (int e = 0; e < 4; e++) acc[p][j][e] = 0;
    uint4 qa[2], qb[2];
    u32 ua[2], ub[2];
    auto load = [&](int h) {
      if constexpr (R8) {
        fp4_load_regs8<TL>(r8, h, oka, okb, qa, qb, ua, ub);
      } else {
        fp4_load_regs(b.kb, t, K, h, wa, wb, sa, sb, oka, okb, qa, qb, ua, ub);
      }
    };
    // stage_async (AX): this thread's copies of the stage starting at step h0
    auto stage_async = [&](int h0) { fp4_stage_async<XE, ST, BUF>(a, b, xs, srow, P, tid, live, nc, nsteps, h0); };
    if constexpr (AX) {
      __syncthreads();  // the last pass's reads of srow and xs are done
      // every thread (no branch before the barrier): entry tid % FP4_SLOTS, the last
      // slot's row past nc, each entry the same value from eight threads
      const int ci = tid & (FP4_SLOTS - 1);
      srow[ci] = a.list[base + c0 + imin(ci, nc - 1)] / div;
      __syncthreads();  // srow written
      if (nsteps > 0) stage_async(0);
    }
    if (nsteps > 0) load(0);
    UNROLL_BY(2) for (int h = 0; h < nsteps; h++) {
      if (AX && (h & (ST - 1)) == 0) {
        fast_cp_wait<0>();  // this thread's copies of this stage (the only group in flight)
        __syncthreads();    // every thread's; every warp done with the last stage's buffer
        if (h + ST < nsteps) stage_async(h + ST);
      } else if (!AX && (h & (FP4_STEPS - 1)) == 0) {
        // stage the slots' pairs of the next FP4_KC values (zeros for slots past nc
        // and steps past the slice)
        int ns = min(FP4_STEPS, nsteps - h);
        if (h == 0 && tid < nc) srow[tid] = a.list[base + c0 + tid] / div;
        __syncthreads();
        // (XE: the hi halves only; the lo halves' places are never read)
        int total = live * 8 * FP4_STEPS * (XE ? 1 : 2) * 16;
        for (int i = tid; i < total; i += 128) {
          int c4 = i & 3, tt = (i >> 2) & 3, half = XE ? 0 : (i >> 4) & 1;
          int hh = (i >> (XE ? 4 : 5)) & (FP4_STEPS - 1), c = i >> (XE ? 6 : 7);
          uint4 v = make_uint4(0, 0, 0, 0);
          if (c < nc && hh < ns && !(half && a.xexact)) {
            const u32* src = (half ? a.xl : a.xh) + srow[c] * P + (b.kb + 128 * (h + hh)) / 2 + tt * 16 + c4 * 4;
            v = *(const uint4*)src;
          }
          int pos = fp4_sw(c4, tt, c);
          xs[((c * FP4_STEPS + hh) * 2 + half) * 16 + tt * 4 + pos] = v;
        }
        __syncthreads();
      }
      uint4 ca[2] = {qa[0], qa[1]}, cb[2] = {qb[0], qb[1]};
      u32 m1a[2], m1b[2], m2a[2], m2b[2];
      const bool big = fp4_scales(ua, ub, m1a, m1b, m2a, m2b);
      if (h + 1 < nsteps) load(h + 1);
      const int hs = h & (ST - 1), buf = AX ? (h / ST) & 1 : 0;
      fp4_step(acc, ca, cb, m1a, m1b, m2a, m2b, big, xs + (XE ? (hs * 2 + buf) * 16 : buf * BUF + hs * 2 * 16),
               ST * 2 * 16, live, xl, XE || a.xexact != 0);
    }
    fp4_store_pass<NW>(a, b, rt0, base, c0, nc, live, g, t, acc);
  }
  if constexpr (AX) fast_cp_wait<0>();  // nothing in flight at exit
}

// fp4_tiles_bulk (the _regb tiles, DEEPINFER_CUDA_FP4_TILED=1): the _regt tiles (bf16
// activations, weights in the tiled layout, the slots' halves copied a stage ahead) with
// the weights brought into shared memory by bulk copies FP4B_NS − 1 steps ahead instead
// of loaded into registers one step ahead. Each warp keeps its own ring of FP4B_NS steps
// (dynamic shared memory, FP4B_STAGE bytes a step: stream 0's 1,024 code bytes, stream
// 1's, then their 64 scale bytes each) and one mbarrier a ring place: lane 0 arrives on
// it expecting the step's bytes and issues one bulk copy of each stream's codes and one of
// its scales (a step's tile of a 16-row group is contiguous in the layout), so that a
// multiprocessor's warps keep ~3 steps of weights in flight each (run 59's read probe:
// the tiled layout read at 2.77 TB/s, where the register tiles keep one step in flight).
// A ring place is taken again only after every lane of the warp has read it (a
// __syncwarp, then the async proxy fence); a stream past N or a step past K copies
// nothing (its arrival alone completes the phase) and reads as zero codes with scale 127,
// as fp4_load_regs8. The lanes read the same codes and scale bytes as _regt's, then run
// the same fp4_scales and fp4_step: the same values bit for bit.
// NS (FP4B_NS, or 8 for the _regbd tiles: two blocks a multiprocessor, seven steps
// ahead) is the ring's places.
#define FP4B_NS 4
#define FP4B_STAGE 2176
template <int NW, int FP4B_NS_ = FP4B_NS>
DEVM void fp4_tiles_bulk(const FastMoEArgs& a, i64 GIDX) {
  constexpr int NS = FP4B_NS_;
  constexpr int ST = FP4_STEPS;
  __shared__ uint4 xs[FP4_SLOTS * FP4_STEPS * 2 * 16];
  __shared__ i64 srow[FP4_SLOTS];
  __shared__ __align__(8) u64 bars[4][NS];
  DYN_SHARED(ring_all);
  Fp4Block b = fp4_where<NW>(a, GIDX >> 7);
  if (b.e < 0) return;  // the whole block
  const int tid = (int)(GIDX & 127), warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const i64 P = a.Kp / 2;
  const i64 div = NW == 2 ? a.k : 1;
  const i64 n = a.counts[b.e], base = a.off[b.e];
  const int nsteps = (int)((b.ke - b.kb) / 128), K = (int)a.K;
  // hk: the slice's steps before K (K a multiple of 128 in the tiled layout)
  const int hk = b.kb < K ? (int)((K - b.kb + 127) / 128) : 0;
  unsigned char* ring = ring_all + warp * (NS * FP4B_STAGE);
  u64* bar = bars[warp];
  // the warp's two streams: their 16-row groups' first tiles of the slice (rt0 past N:
  // a stream with no rows)
  i64 rt0[2];
  bool oka[2], okb[2], live_s[2];
  const unsigned char* tcode[2];
  const unsigned char* tscale[2];
  UNROLL for (int p = 0; p < 2; p++) {
    const Weight w = fp4_weight<NW>(a, b.e, p);
    rt0[p] = b.r0 + warp * 16 * (NW == 2 ? 1 : 2) + (NW == 2 ? 0 : 16 * p);
    live_s[p] = rt0[p] < a.N;
    oka[p] = rt0[p] + g < a.N, okb[p] = rt0[p] + g + 8 < a.N;
    const i64 tile = (live_s[p] ? rt0[p] / 16 : 0) * (w.cols / 128) + b.kb / 128;
    tcode[p] = (const unsigned char*)w.p + tile * 1024;
    tscale[p] = w.s + tile * 64;
  }
  if (lane == 0) {
    UNROLL for (int q = 0; q < NS; q++) fast_bar_init(&bar[q], 1);
    fast_bar_fence();
  }
  __syncwarp();
  // issue: step h's copies into ring place q (lane 0)
  auto issue = [&](int h, int q) {
    unsigned char* st = ring + q * FP4B_STAGE;
    const bool in = h < hk;
    const u32 bytes = in ? (live_s[0] ? 1088u : 0u) + (live_s[1] ? 1088u : 0u) : 0u;
    fast_async_fence();  // (the lanes' reads of this place's last step, before the copies)
    fast_bar_arrive_tx(&bar[q], bytes);
    if (in) {
      UNROLL for (int p = 0; p < 2; p++) {
        if (!live_s[p]) continue;
        fast_bulk(st + 1024 * p, tcode[p] + 1024 * (i64)h, 1024, &bar[q]);
        fast_bulk(st + 2048 + 64 * p, tscale[p] + 64 * (i64)h, 64, &bar[q]);
      }
    }
  };
  const int xl = fp4_xl(g, t, ST * 2 * 16);  // (fp4_step)
  u32 used = 0;  // steps this warp has taken from its ring (every pass's)
  for (i64 c0 = 0; c0 < n; c0 += FP4_SLOTS) {
    const int nc = (int)imin(FP4_SLOTS, n - c0), live = (nc + 7) / 8;
    float acc[2][2][4];
    UNROLL for (int p = 0; p < 2; p++) UNROLL for (int j = 0; j < 2; j++) UNROLL for (int e = 0; e < 4; e++) acc[p][j][e] = 0;
    auto stage_async = [&](int h0) { fp4_stage_async<true, ST, 0>(a, b, xs, srow, P, tid, live, nc, nsteps, h0); };
    __syncthreads();  // the last pass's reads of srow and xs are done
    const int ci = tid & (FP4_SLOTS - 1);
    srow[ci] = a.list[base + c0 + imin(ci, nc - 1)] / div;
    __syncthreads();  // srow written
    if (nsteps > 0) stage_async(0);
    if (lane == 0)
      for (int h = 0; h < NS - 1 && h < nsteps; h++) issue(h, (int)((used + h) % NS));
    for (int h = 0; h < nsteps; h++) {
      if ((h & (ST - 1)) == 0) {
        fast_cp_wait<0>();  // this thread's copies of this stage (the only group in flight)
        __syncthreads();    // every thread's; every warp done with the last stage's buffer
        if (h + ST < nsteps) stage_async(h + ST);
      }
      __syncwarp();  // every lane done with step h − 1's place, which takes step h + NS − 1
      if (lane == 0 && h + NS - 1 < nsteps) issue(h + NS - 1, (int)((used + h + NS - 1) % NS));
      const u32 u = used + (u32)h, q = u % NS;
      fast_bar_wait(&bar[q], (u / NS) & 1);
      const unsigned char* st = ring + q * FP4B_STAGE;
      uint4 ca[2], cb[2];
      u32 ua[2], ub[2];
      const bool in = h < hk;
      UNROLL for (int p = 0; p < 2; p++) {
        const bool ina = oka[p] && in, inb = okb[p] && in;
        ca[p] = ina ? *(const uint4*)(st + 1024 * p + 16 * lane) : make_uint4(0, 0, 0, 0);
        cb[p] = inb ? *(const uint4*)(st + 1024 * p + 512 + 16 * lane) : make_uint4(0, 0, 0, 0);
        const u32 v = ina ? (u32) * (const unsigned short*)(st + 2048 + 64 * p + 2 * lane) : 0x7f7fu;
        ua[p] = v & 255u;
        ub[p] = inb ? v >> 8 : 127;
      }
      u32 m1a[2], m1b[2], m2a[2], m2b[2];
      const bool big = fp4_scales(ua, ub, m1a, m1b, m2a, m2b);
      const int hs = h & (ST - 1), buf = (h / ST) & 1;
      fp4_step(acc, ca, cb, m1a, m1b, m2a, m2b, big, xs + (hs * 2 + buf) * 16, ST * 2 * 16, live, xl, true);
    }
    used += (u32)nsteps;
    fp4_store_pass<NW>(a, b, rt0, base, c0, nc, live, g, t, acc);
  }
  fast_cp_wait<0>();  // nothing in flight at exit (every bulk copy issued was waited for)
}

// fp4_tiles_wide: fp4_tiles for bf16 activations (xexact) with 64 slots (8 activation
// tiles) a pass instead of 16, so that an expert with many slots (a prefill's: about 128
// at 8,192 tokens) widens its weights once per 64 slots instead of once per 16. The
// slots' hi halves of a step (128 values, 16 KB) are copied into one of two buffers by
// cp.async a step ahead (since run 21: run 21a's form copied each step's after the last
// one's mma, behind two barriers, and the warps waited for those copies every step), so
// one barrier a step: after it, step h's halves have landed from every thread and every
// warp is done with step h − 1's buffer, which then takes step h + 1's copies. Each
// output is the same chain of mma as fp4_tiles' (the same steps, the same order inside
// a step: a tile's chain does not depend on the tiles beside it), so the same values;
// Go runs it for bf16 activations in steps with many slots an expert (fp4Wide).
// LO (fast_moe_*_fp4_widel): the same for activations that are not bf16 values (V4's
// float32 ones): both halves of a slot staged (its lo pairs 16 uint4s after its hi
// ones, as fp4_tiles' xs) and the lo mma in each chain, so 32 slots a pass (the buffers
// the same 32 KB), each output the register tiles' chain of hi and lo mma.
#define FP4W_SLOTS 64
// TL (fast_moe_*_fp4_widet): the weights in the tiled layout (fp4_rows8t, as _regt);
// bf16 activations only. The same values.
template <int NW, bool LO = false, bool TL = false>
DEVM void fp4_tiles_wide(const FastMoEArgs& a, i64 GIDX) {
  static_assert(!(LO && TL), "the tiled layout's wide tiles are compiled for bf16 activations only");
  // WS: slots a pass; SS: a staged slot's uint4s (its hi pairs, then with LO its lo ones)
  constexpr int WS = LO ? FP4W_SLOTS / 2 : FP4W_SLOTS, SS = LO ? 32 : 16, WJ = WS / 8;
  __shared__ uint4 xs[2][WS * SS];
  __shared__ i64 srow[128];  // the x row of each staged slot (past nc: the last slot's)
  Fp4Block b = fp4_where<NW>(a, GIDX >> 7);
  if (b.e < 0) return;  // the whole block
  const int tid = (int)(GIDX & 127), warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const i64 P = a.Kp / 2;
  const i64 div = NW == 2 ? a.k : 1;
  const i64 n = a.counts[b.e], base = a.off[b.e];
  const int nsteps = (int)((b.ke - b.kb) / 128), K = (int)a.K;
  const unsigned char *wa[2], *wb[2], *sa[2], *sb[2];
  bool oka[2], okb[2];
  i64 rt0[2];
  fp4_streams<NW>(a, b, warp, g, wa, wb, sa, sb, oka, okb, rt0);
  const int xl = fp4_xl(g, t, SS);  // (fp4_step)
  // (rows g+8 from rows g, as the R8 register tiles)
  const Fp4Rows8 r8 = TL ? fp4_rows8t<NW>(a, b, rt0, oka, g, t, K) : fp4_rows8(b.kb, t, K, (int)fp4_weight<NW>(a, b.e, 0).cols, wa, sa);
  // this thread's chunks of a step's copies: chunk c4 of pair group tt of slots
  // (tid >> 4) + 8·it, swizzled as fp4_tiles' xs (the same place in every slot of a
  // thread but for the slot's parity, which is tid >> 4's)
  const int c4 = tid & 3, tt = (tid >> 2) & 3, c8 = tid >> 4;
  const int sx = c8 * SS + tt * 4 + fp4_sw(c4, tt, c8);
  for (i64 c0 = 0; c0 < n; c0 += WS) {
    const int nc = (int)imin(WS, n - c0), live = (nc + 7) / 8;
    float acc[2][WJ][4];
    UNROLL for (int p = 0; p < 2; p++) UNROLL for (int j = 0; j < WJ; j++) UNROLL for (int e = 0; e < 4; e++) acc[p][j][e] = 0;
    uint4 qa[2], qb[2];
    u32 ua[2], ub[2];
    auto load = [&](int h) { fp4_load_regs8<TL>(r8, h, oka, okb, qa, qb, ua, ub); };
    // issue: this thread's copies of step h's hi pairs (and with LO its lo ones) into
    // xs[h & 1] (zeros for slots past nc), as one group
    auto issue = [&](int h) {
      const i64 k2 = (b.kb + 128 * h) / 2 + tt * 16 + c4 * 4;
      UNROLL for (int it = 0; it < WJ; it++) {
        if (it >= live) break;
        const int c = c8 + 8 * it;
        const bool in = c < nc;
        fast_cp16(&xs[h & 1][sx + it * 8 * SS], in ? a.xh + srow[c] * P + k2 : a.xh, in);
        if constexpr (LO) fast_cp16(&xs[h & 1][sx + it * 8 * SS + 16], in ? a.xl + srow[c] * P + k2 : a.xl, in);
      }
      fast_cp_commit();
    };
    if (nsteps > 0) load(0);
    __syncthreads();  // the last pass's reads of srow and xs are done
    srow[tid] = a.list[base + c0 + imin(tid, nc - 1)] / div;  // every thread (no branch)
    __syncthreads();                                           // srow written
    if (nsteps > 0) issue(0);
    for (int h = 0; h < nsteps; h++) {
      fast_cp_wait<0>();  // this thread's copies of step h (the only group in flight)
      __syncthreads();    // every thread's; every warp done with step h − 1's buffer
      if (h + 1 < nsteps) issue(h + 1);
      uint4 ca[2] = {qa[0], qa[1]}, cb[2] = {qb[0], qb[1]};
      u32 m1a[2], m1b[2], m2a[2], m2b[2];
      const bool big = fp4_scales(ua, ub, m1a, m1b, m2a, m2b);
      if (h + 1 < nsteps) load(h + 1);
      fp4_step(acc, ca, cb, m1a, m1b, m2a, m2b, big, xs[h & 1], SS, live, xl, !LO);
    }
    fp4_store_pass<NW>(a, b, rt0, base, c0, nc, live, g, t, acc);
  }
}

// The pipelined tiles (fast_moe_up_fp4, fast_moe_down_fp4): the same blocks, lanes,
// decode and chain of mma as fp4_tiles above; only the way the bytes reach the
// registers differs. Everything a step reads goes through shared memory by cp.async:
//   - weights: each lane copies the 4 × 16 bytes of codes it will decode at a step
//     (rows g and g+8 of both streams) and the four aligned 4-byte words that hold those
//     rows' scale bytes into its own slots of FP4P_STAGES stage buffers, two steps ahead
//     (a lane reads back only what it copied: no barrier needed for them);
//   - activation halves: the block copies the slots' pairs of the next step (one step
//     ahead) into the other of two buffers, in fp4_tiles' swizzled layout;
// rows at or past N, values at or past K and slots past the pass's are zero-filled
// (source size 0) and decoded as fp4_tiles does (code 0, scale 127, zero pairs). The
// copies of a step are two commit groups, its activations' then the weights' two steps
// ahead, in every thread, so step h waits for all but its last group (all at the first
// step of a pass, whose activations were issued after the first two weight steps), then
// one barrier makes the activations visible and frees the buffers step h − 1 read.
// 47 KB of static shared memory: halves 2 × 8 KB, codes 3 × 8 KB, scale words 3 × 2 KB.
#define FP4P_STAGES 3  // weight stages: the current step and two ahead

// fp4_cp4: as tensorcore.cu's fast_cp16 (whose commit and wait it shares), 4 bytes.
#ifdef DI_LANES
DEV void fp4_cp4(void* dst, const void* src, bool in) { lanes_cp4(dst, src, in); }
#else
DEV void fp4_cp4(void* dst, const void* src, bool in) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(smem_addr(dst)), "l"(src), "r"(in ? 4 : 0) : "memory");
}
#endif
// word4: the aligned 4-byte word holding byte p.
DEV const void* word4(const unsigned char* p) { return (const void*)((u64)p & ~(u64)3); }

template <int NW>
DEVM void fp4_pipe(const FastMoEArgs& a, i64 GIDX) {
  constexpr int S = FP4P_STAGES;
  // halves: [buffer][slot][half][16-byte chunk, swizzled as fp4_tiles' xs]
  __shared__ uint4 xs[2 * FP4_SLOTS * 2 * 16];
  // weight stages: [stage][item][thread], item 2p (row g of stream p) or 2p+1 (row g+8)
  __shared__ uint4 wq[S * 4 * 128];
  __shared__ u32 wsc[S * 4 * 128];
  Fp4Block b = fp4_where<NW>(a, GIDX >> 7);
  if (b.e < 0) return;  // the whole block
  const int tid = (int)(GIDX & 127), warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const i64 P = a.Kp / 2;
  const i64 div = NW == 2 ? a.k : 1;
  const int nsteps = (int)((b.ke - b.kb) / 128), K = (int)a.K;
  // the warp's two streams (weight, 16-row tile): this lane's rows g and g+8
  const unsigned char *wa[2], *wb[2], *sa[2], *sb[2];
  bool oka[2], okb[2];
  i64 rt0[2];
  fp4_streams<NW>(a, b, warp, g, wa, wb, sa, sb, oka, okb, rt0);
  const int xl = fp4_xl(g, t, 2 * 16);  // (fp4_step)
  // issue_w: this lane's weight copies of step h into stage h % S (none past the slice)
  // and a commit either way
  auto issue_w = [&](int h) {
    if (h < nsteps) {
      const int kl = (int)b.kb + 128 * h + 32 * t;
      uint4* q0 = wq + (h % S) * (4 * 128) + tid;
      u32* s0 = wsc + (h % S) * (4 * 128) + tid;
      UNROLL for (int p = 0; p < 2; p++) {
        bool ina = oka[p] && kl < K, inb = okb[p] && kl < K;
        fast_cp16(q0 + (2 * p) * 128, ina ? wa[p] + kl / 2 : wa[p], ina);
        fast_cp16(q0 + (2 * p + 1) * 128, inb ? wb[p] + kl / 2 : wb[p], inb);
        fp4_cp4(s0 + (2 * p) * 128, word4(ina ? sa[p] + kl / 32 : sa[p]), ina);
        fp4_cp4(s0 + (2 * p + 1) * 128, word4(inb ? sb[p] + kl / 32 : sb[p]), inb);
      }
    }
    fast_cp_commit();
  };
  // this thread's share of the halves' copies: 16-byte chunk c4 of pair group tt of
  // half `half`, for slots warp + 4j (j < 2·live), the same chunk every step
  const int c4 = tid & 3, tt = (tid >> 2) & 3, half = (tid >> 4) & 1;
  const int pos = fp4_sw(c4, tt, warp);
  const u32* xsrc = half ? a.xl : a.xh;
  uint4* const xd = xs + (warp * 2 + half) * 16 + tt * 4 + pos;
  UNROLL for (int h = 0; h < S - 1; h++) issue_w(h);  // before the slot lists are read
  const i64 n = a.counts[b.e], base = a.off[b.e];
  for (i64 c0 = 0; c0 < n; c0 += FP4_SLOTS) {
    const int nc = (int)imin(FP4_SLOTS, n - c0), live = (nc + 7) / 8;
    int xm[4];  // the x rows of this thread's slots (0 past nc: zero-filled)
    UNROLL for (int j = 0; j < 4; j++) {
      int c = warp + 4 * j;
      xm[j] = c < nc ? (int)(a.list[base + c0 + c] / div) : 0;
    }
    // issue_x: this thread's copies of step h's halves into buffer h & 1, and a commit
    auto issue_x = [&](int h) {
      if (h < nsteps) {
        uint4* d0 = xd + (h & 1) * (FP4_SLOTS * 2 * 16);
        const i64 k2 = (b.kb + 128 * h) / 2 + tt * 16 + c4 * 4;
        UNROLL for (int j = 0; j < 4; j++) {
          if (j >= 2 * live) break;
          bool in = warp + 4 * j < nc;
          fast_cp16(d0 + 4 * j * (2 * 16), in ? xsrc + (i64)xm[j] * P + k2 : xsrc, in);
        }
      }
      fast_cp_commit();
    };
    if (c0 > 0) {  // a later pass: the copies restart once every thread is done reading
      __syncthreads();
      UNROLL for (int h = 0; h < S - 1; h++) issue_w(h);
    }
    issue_x(0);
    float acc[2][2][4];
    UNROLL for (int p = 0; p < 2; p++) UNROLL for (int j = 0; j < 2; j++) UNROLL for (int e = 0; e < 4; e++) acc[p][j][e] = 0;
    for (int h = 0; h < nsteps; h++) {
      // groups: ... x(h), w(h+1) (h > 0); w(0), w(1), x(0) (h = 0)
      if (h == 0) fast_cp_wait<0>();
      else fast_cp_wait<1>();
      __syncthreads();  // step h's halves from every thread; step h − 1's reads done
      const int st = h % S, kl = (int)b.kb + 128 * h + 32 * t;
      uint4 ca[2], cb[2];
      u32 ua[2], ub[2];
      UNROLL for (int p = 0; p < 2; p++) {
        ca[p] = wq[(st * 4 + 2 * p) * 128 + tid];
        cb[p] = wq[(st * 4 + 2 * p + 1) * 128 + tid];
        bool ina = oka[p] && kl < K, inb = okb[p] && kl < K;
        u32 wa4 = wsc[(st * 4 + 2 * p) * 128 + tid], wb4 = wsc[(st * 4 + 2 * p + 1) * 128 + tid];
        ua[p] = ina ? (wa4 >> (8 * (((u32)(u64)sa[p] + (u32)t) & 3))) & 0xff : 127;
        ub[p] = inb ? (wb4 >> (8 * (((u32)(u64)sb[p] + (u32)t) & 3))) & 0xff : 127;
      }
      issue_x(h + 1);      // into the buffer step h − 1 read
      issue_w(h + S - 1);  // into the stage step h − 1 read (this lane's own)
      u32 m1a[2], m1b[2], m2a[2], m2b[2];
      const bool big = fp4_scales(ua, ub, m1a, m1b, m2a, m2b);
      fp4_step(acc, ca, cb, m1a, m1b, m2a, m2b, big, xs + (h & 1) * (FP4_SLOTS * 2 * 16), 2 * 16, live, xl,
               a.xexact != 0);
    }
    fp4_store_pass<NW>(a, b, rt0, base, c0, nc, live, g, t, acc);
  }
  fast_cp_wait<0>();  // nothing in flight at exit (the groups past the slice are empty)
}
#endif

// byte_perm: PTX's prmt in its default mode (__byte_perm): result byte i is byte s_i & 7
// of the eight bytes of b:a (a bytes 0-3, b bytes 4-7), s_i the selector's nibble i; where
// s_i's bit 3 is set, that byte's top bit copied to all eight bits instead.
#if defined(DI_EMULATE) || defined(DI_LANES)
DEV u32 byte_perm(u32 a, u32 b, u32 s) {
  const unsigned long long x = (unsigned long long)b << 32 | a;
  u32 r = 0;
  for (int i = 0; i < 4; i++) {
    const u32 n = (s >> (4 * i)) & 15, v = (u32)(x >> (8 * (n & 7))) & 0xff;
    r |= (n & 8 ? (v & 0x80 ? 0xffu : 0u) : v) << (8 * i);
  }
  return r;
}
#else
DEV u32 byte_perm(u32 a, u32 b, u32 s) { return __byte_perm(a, b, s); }
#endif
// fp4x8_e4m3: eight e2m1 codes (code i at bits 4i..4i+3 of q) as eight E4M3 bytes of the
// same values (every e2m1 value is an E4M3 value; no scale folded in): byte i of the
// first word code i, of the second code 4 + i. The magnitudes by table (0, 0.5, 1, 1.5 in
// one word, 2, 3, 4, 6 in the other: E4M3 0x00 0x30 0x38 0x3c 0x40 0x44 0x48 0x4c), the
// signs by prmt's sign copy of the bytes whose top bit is a code's sign (q's for the odd
// codes, q << 4's for the even ones), then one or-and a word: ten instructions for eight
// codes, for an e4m3 expert tile's register operand (docs/perf/moe.md).
DEV void fp4x8_e4m3(u32 q, u32& lo, u32& hi) {
  const u32 t0 = 0x3c383000u, t1 = 0x4c484440u, q4 = q << 4;
  const u32 m0 = byte_perm(t0, t1, q & 0x7777u), m1 = byte_perm(t0, t1, (q >> 16) & 0x7777u);
  const u32 s0 = byte_perm(q4, q, 0xD9C8u), s1 = byte_perm(q4, q, 0xFBEAu);
  lo = m0 | (s0 & 0x80808080u), hi = m1 | (s1 & 0x80808080u);
}
// The fp8 numerics' FP4 expert tiles (fast_moe_up_fp4_e4, fast_moe_down_fp4_e4): V4.1's
// experts with their activations' MXFP8 codes (fast_quant_split's xq, K a row, and
// piece scales xe, K/32 a row) on the tensor cores' e4m3 form, mma.sync m16n8k32: the
// blocks, warps, streams and slot passes of fp4_tiles, but each 32-value block of the
// reduction one mma from zero (its weight rows' codes widened to E4M3 bytes by
// fp4x8_e4m3, no scale folded in; the slots' codes as they are), its sums scaled by the
// weight row's and the slot's piece scales (powers of two) into float32 accumulators by
// one fused multiply-add each: d = fma(block sum, ue8m0(u) · sx, d), the blocks before K
// in order (fast_gemm_wg_e4m3's definition). A lane takes word t of each 16-byte block of
// its rows g and g + 8 (codes 8t..8t+7: the A fragment's k 4t..4t+3 and 16+4t..16+4t+3
// hold codes 8t..8t+3 and 8t+4..8t+7) and the same eight codes of slot g (one 8-byte
// load), so an mma's 32 products are one block's. The weights are loaded a step (four
// blocks) ahead into registers; the pass's slots' codes and scales are copied into
// shared memory by cp.async a stage (four steps) ahead, as the _rega tiles' halves (run
// 49, an H100: the first form, reading them from global memory at their block, was
// 44-58% slower than _rega; this one 36-60% in run 50; docs/perf/moe.md). On sm_90 the
// e4m3 mma.sync is the compiler's f16 unpack and HMMA (f16 products exact, summed in
// float32), so a block's sum is near-exact there, not at the FP8 precision of wgmma's
// (run 48's probe: a median 2^-15, a worst 2^-12 of the block's Σ|products|). The
// emulated device sums each block exactly and rounds it once (fp4_e4_ref), as the host
// fibers' stand-in mma does, so the device code there gives its values bit for bit.
#ifdef DI_LANES
DEV void fp4_e4_mma(float* d, u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1) { lanes_mma_e4m3(d, a0, a1, a2, a3, b0, b1); }
#elif !defined(DI_EMULATE)
// fp4_e4_mma: d = a·b, one m16n8k32 e4m3 product with float32 output, from zero
DEV void fp4_e4_mma(float* d, u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1) {
  asm("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%10,%10,%10,%10};"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "f"(0.0f));
}
#endif

// fp4_wg_e4: d = a·b from zero, one wgmma m64n8k32 e4m3 of the warpgroup: a this warp's
// 16 weight rows × 32 codes in registers (mma.m16n8k32's 8-bit A layout, which run 48's
// probe found to be the RS form's), b the 8 slots × 32 codes the descriptor names
#ifdef DI_LANES
DEV void fp4_wg_e4(float* d, u32 a0, u32 a1, u32 a2, u32 a3, u64 desc) {
  const u32 a[4] = {a0, a1, a2, a3};
  lanes_wg_mma_e4m3(d, a, desc);
}
#elif !defined(DI_EMULATE)
DEV void fp4_wg_e4(float* d, u32 a0, u32 a1, u32 a2, u32 a3, u64 desc) {
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %9, 0;\n"
      " wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 {%0, %1, %2, %3}, {%4, %5, %6, %7}, %8, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc), "r"(0));
}
#endif

#ifdef DI_EMULATE
// fp4_e4_ref: the definition, in plain loops over the launch's blocks
template <int NW>
DEVM void fp4_e4_ref(const FastMoEArgs& a, i64 blocks) {
  const int RT = NW == 2 ? 1 : 2;
  const i64 div = NW == 2 ? a.k : 1, KS = a.K / 32;
  for (i64 blk = 0; blk < blocks; blk++) {
    Fp4Block b = fp4_where<NW>(a, blk);
    if (b.e < 0) continue;
    const i64 n = a.counts[b.e], base = a.off[b.e], ke = imin(b.ke, a.K);
    for (int warp = 0; warp < 4; warp++)
      for (int p = 0; p < 2; p++) {
        Weight w = fp4_weight<NW>(a, b.e, p);
        const int plane = NW == 2 ? p : 0;
        const i64 rt0 = b.r0 + warp * 16 * RT + (NW == 2 ? 0 : 16 * p);
        for (i64 r = rt0; r < rt0 + 16 && r < a.N; r++) {
          const unsigned char* wr = (const unsigned char*)w.p + r * (w.cols / 2);
          for (i64 c = 0; c < n; c++) {
            const i64 slot = a.list[base + c], m = slot / div;
            float acc = 0;
            for (i64 k = b.kb; k < ke; k += 32) {
              double bs = 0;  // (exact: 32 products of e2m1 and E4M3 values)
              for (int u = 0; u < 32; u++) {
                const unsigned char q = (wr[(k + u) / 2] >> (4 * ((k + u) & 1))) & 15;
                bs += (double)e2m1_f32(q) * e4m3_f32(a.xq[m * a.K + k + u]);
              }
              const float sc = ue8m0_f32(w.s[r * (w.cols / 32) + k / 32]) * a.xe[m * KS + k / 32];
              acc = fmaf((float)bs, sc, acc);
            }
            fp4_store(a, plane, b.s, slot, r, acc);
          }
        }
      }
  }
}
#else
// fp4_e4_ld32: a 32-bit load (on host fibers, its alignment checked: a misaligned load
// faults on the device)
#ifdef DI_LANES
DEV u32 fp4_e4_ld32(const unsigned char* p) {
  lanes_check_align(p, 4);
  return *(const u32*)p;
}
#else
DEV u32 fp4_e4_ld32(const unsigned char* p) { return *(const u32*)p; }
#endif
// fp4_e4_scales: the scale bytes of a row's four blocks from p (nb of them before the
// slice's end; 127 past it), one 32-bit load where every row's are aligned and all there
DEV u32 fp4_e4_scales(const unsigned char* p, int nb, bool al) {
  if (al && nb >= 4) return fp4_e4_ld32(p);
  u32 u = 0;
  UNROLL for (int i = 0; i < 4; i++) u |= (u32)(i < nb ? p[i] : 127) << (8 * i);
  return u;
}
// FP4E_SLOT: a staged slot's bytes in a stage (FP4_STEPS steps: 512 codes) and 32 of
// padding, so that a quarter-warp's 8-byte reads of four slots hit distinct banks
#define FP4E_SLOT 544
// fp4_quad_words: the four lanes of a quad (t = lane & 3) each hold the four words of
// one block (lane t block t's, w); after it, lane t holds word t of each block (w[i]:
// block i's): its words rotated left by t, three shuffles of fixed registers (lane t
// takes register j of lane t − j), the result rotated right by t
DEV void fp4_quad_words(u32 (&w)[4], int lane) {
  const int t = lane & 3;
  const bool r1 = t & 1, r2 = t & 2;
  u32 a[4], r[4];
  UNROLL for (int i = 0; i < 4; i++) a[i] = r1 ? w[(i + 1) & 3] : w[i];
  UNROLL for (int i = 0; i < 4; i++) r[i] = r2 ? a[(i + 2) & 3] : a[i];
  u32 u[4];
  u[0] = r[0];
  UNROLL for (int j = 1; j < 4; j++) u[j] = __shfl_sync(0xffffffffu, r[j], (lane & ~3) | ((t - j) & 3));
  // w[i] = u[(t − i) & 3]: x = (u0, u3, u2, u1) rotated right by t
  const u32 x[4] = {u[0], u[3], u[2], u[1]};
  UNROLL for (int i = 0; i < 4; i++) a[i] = r1 ? x[(i + 3) & 3] : x[i];
  UNROLL for (int i = 0; i < 4; i++) w[i] = r2 ? a[(i + 2) & 3] : a[i];
}
// TR (fast_moe_*_fp4_e4t): a lane loads its block t's 16 bytes of a row a step (one
// 16-byte load, as the register tiles do) and the quad exchanges words
// (fp4_quad_words) at the step, instead of four 4-byte loads a row; the same words, so
// the same values
// WG (fast_moe_*_fp4_e4w): each 32-value block of a stream's 64 rows (the block's four
// warps' 16 each) and a tile of 8 slots is one wgmma m64n8k32 e4m3 (fp4_wg_e4: A the
// widened codes in registers, as for the mma; B the slots' codes in shared memory through
// a descriptor), a tile's four blocks of a step under one commit and wait, then scaled
// as the mma's sums. Hopper runs FP8 natively only on wgmma (run 50: its FP8
// mma.sync is two f16 HMMA). The staged codes: [buffer][step of the stage][tile][8 slots
// × 128 bytes], each step's tile an 8-row K-major matrix in the 128-byte swizzle (wg_desc,
// 1,024 bytes), and in each 32-byte block the slot's words in the A fragment's k order
// (words 0, 2, 4, 6, then 1, 3, 5, 7: a lane's k 4t..4t+3 hold codes 8t..8t+3, its
// k 16 + 4t.. codes 8t + 4..), one 4-byte cp.async a word. The same values as the other
// forms where the block sums are exact (the host's stand-ins; fp4_e4_ref).
template <int NW, bool TR = false, bool WG = false>
DEVM void fp4_e4_tiles(const FastMoEArgs& a, i64 GIDX) {
  // the pass's slots' codes and piece scales of a stage, two buffers (a stage ahead):
  // codes [slot][512 + pad] (WG: [step][tile][8 slots × 128 bytes]), scales [block of the stage][slot]
  __shared__ __align__(1024) unsigned char xcs[2][WG ? FP4_STEPS * 2 * 1024 : FP4_SLOTS * FP4E_SLOT];
  __shared__ __align__(16) float xss[2][4 * FP4_STEPS * FP4_SLOTS];
  __shared__ i64 srow[FP4_SLOTS];  // the x row of each staged slot
  Fp4Block b = fp4_where<NW>(a, GIDX >> 7);
  if (b.e < 0) return;  // the whole block
  const int tid = (int)(GIDX & 127), warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const i64 div = NW == 2 ? a.k : 1, KS = a.K / 32;
  const i64 n = a.counts[b.e], base = a.off[b.e];
  // the slice's 32-value blocks before K (K a multiple of 32), in steps of four
  const int nblk = b.kb < a.K ? (int)((imin(b.ke, a.K) - b.kb) / 32) : 0, nsteps = (nblk + 3) / 4;
  const unsigned char *wa[2], *wb[2], *sa[2], *sb[2];
  bool oka[2], okb[2];
  i64 rt0[2];
  fp4_streams<NW>(a, b, warp, g, wa, wb, sa, sb, oka, okb, rt0);
  // the lane's word of each block: bytes 4t.. of its 16 in rows g, and rows g + 8 r8
  // bytes on (as Fp4Rows8: okb implies oka); the scale bytes from the slice's, s8 on;
  // al: every row's scale bytes of a step 4-byte aligned (rows of a multiple of 128
  // values, the weights' bases aligned)
  const Weight w0 = fp4_weight<NW>(a, b.e, 0);
  const int r8 = 4 * (int)w0.cols, s8 = (int)w0.cols / 4;
  const bool al = ((w0.cols / 32) & 3) == 0 && (((u64)w0.s | (u64)fp4_weight<NW>(a, b.e, 1).s) & 3) == 0;
  UNROLL for (int p = 0; p < 2; p++) wa[p] += b.kb / 2 + 4 * t, sa[p] += b.kb / 32;
  // step h's codes (TR: lane t's block t's words, exchanged at the step) and scale
  // bytes, loaded a step ahead
  u32 qa[2][4], qb[2][4], ua[2], ub[2];
  // load1: stream p's; load: both
  auto load1 = [&](int h, int p) {
    const int nb = imin(4, nblk - 4 * h);
    {
      if constexpr (TR) {
        const int o = 64 * h + 12 * t;  // (wa[p] is at 4t: block t's 16 bytes at 16t)
        const bool in = t < nb;
        const uint4 x = in && oka[p] ? *(const uint4*)(wa[p] + o) : make_uint4(0, 0, 0, 0);
        const uint4 y = in && okb[p] ? *(const uint4*)(wa[p] + r8 + o) : make_uint4(0, 0, 0, 0);
        qa[p][0] = x.x, qa[p][1] = x.y, qa[p][2] = x.z, qa[p][3] = x.w;
        qb[p][0] = y.x, qb[p][1] = y.y, qb[p][2] = y.z, qb[p][3] = y.w;
      } else {
        UNROLL for (int w4 = 0; w4 < 4; w4++) {
          const int o = 64 * h + 16 * w4;
          qa[p][w4] = w4 < nb && oka[p] ? fp4_e4_ld32(wa[p] + o) : 0u;
          qb[p][w4] = w4 < nb && okb[p] ? fp4_e4_ld32(wa[p] + r8 + o) : 0u;
        }
      }
      ua[p] = fp4_e4_scales(sa[p] + 4 * h, nb, al);
      ub[p] = fp4_e4_scales(sa[p] + s8 + 4 * h, okb[p] ? nb : 0, al);
    }
  };
  auto load = [&](int h) { UNROLL for (int p = 0; p < 2; p++) load1(h, p); };
  for (i64 c0 = 0; c0 < n; c0 += FP4_SLOTS) {
    const int nc = (int)imin(FP4_SLOTS, n - c0), live = (nc + 7) / 8;
    // stage: this thread's copies of the stage from step h0 (its 16 blocks) into buffer
    // (h0 / FP4_STEPS) & 1, one commit group: the live tiles' slots' codes (zeros past nc
    // and past the slice's blocks, which no product reads) and their scales
    auto stage = [&](int h0) {
      const int buf = (h0 / FP4_STEPS) & 1, b0 = 4 * h0, ns = live * 8;
      if constexpr (WG) {
        // word q of slot c's 128 (step hs, block bl, word sw of the block's 8) to word
        // position s of the block's staged 32 bytes (sw even: sw / 2; odd: 4 + sw / 2)
        for (int i = tid; i < ns * 128; i += 128) {
          const int c = i >> 7, q = i & 127, hs = q >> 5, bl = (q >> 3) & 3, sw = q & 7;
          const int sp = (sw & 1) ? 4 + (sw >> 1) : sw >> 1, pc = 2 * bl + (sp >> 2), r = c & 7;
          const bool in = c < nc && b0 + 4 * hs + bl < nblk;
          fp4_cp4(&xcs[buf][(hs * 2 + (c >> 3)) * 1024 + r * 128 + ((pc ^ r) << 4) + 4 * (sp & 3)],
                  in ? a.xq + srow[c] * a.K + b.kb + 32 * b0 + 4 * q : a.xq, in);
        }
      } else {
        for (int i = tid; i < ns * 32; i += 128) {
          const int c = i >> 5, q = i & 31;
          const bool in = c < nc && b0 + (q >> 1) < nblk;
          fast_cp16(&xcs[buf][c * FP4E_SLOT + 16 * q], in ? a.xq + srow[c] * a.K + b.kb + 32 * b0 + 16 * q : a.xq, in);
        }
      }
      for (int i = tid; i < ns * 4 * FP4_STEPS; i += 128) {
        const int bb = i / ns, c = i - bb * ns;
        const bool in = c < nc && b0 + bb < nblk;
        fp4_cp4(&xss[buf][bb * FP4_SLOTS + c], in ? a.xe + srow[c] * KS + b.kb / 32 + b0 + bb : a.xe, in);
      }
      fast_cp_commit();
    };
    __syncthreads();  // the last pass's reads of srow and the buffers are done
    // every thread (no branch before the barrier): entry tid % FP4_SLOTS, the last slot's
    // row past nc, each entry the same value from eight threads
    const int ci = tid & (FP4_SLOTS - 1);
    srow[ci] = a.list[base + c0 + imin(ci, nc - 1)] / div;
    __syncthreads();  // srow written
    if (nsteps > 0) stage(0), load(0);
    float acc[2][2][4];
    UNROLL for (int p = 0; p < 2; p++) UNROLL for (int j = 0; j < 2; j++) UNROLL for (int e = 0; e < 4; e++) acc[p][j][e] = 0;
    for (int h = 0; h < nsteps; h++) {
      if ((h & (FP4_STEPS - 1)) == 0) {
        fast_cp_wait<0>();  // this thread's copies of this stage (the only group in flight)
        if constexpr (WG) wg_proxy_fence();  // (seen by the tensor cores' reads)
        __syncthreads();    // every thread's; every warp done with the last stage's buffer
        if (h + FP4_STEPS < nsteps) stage(h + FP4_STEPS);
      }
      const int nb = imin(4, nblk - 4 * h), buf = (h / FP4_STEPS) & 1, hs = h & (FP4_STEPS - 1);
      if constexpr (WG) {
        const u32 xb0 = smem_addr(&xcs[buf][hs * 2 * 1024]);
        UNROLL for (int p = 0; p < 2; p++) {
          // the stream's four blocks' A fragments (rows g, g + 8) from its codes, which
          // then take the next step's (no copy of a step's codes: registers), then for
          // each live tile its four blocks' products under one commit and wait, then the
          // scaling (a tile at a time: 16 accumulators, not 32)
          u32 af[4][4];
          UNROLL for (int w4 = 0; w4 < 4; w4++) {
            fp4x8_e4m3(qa[p][w4], af[w4][0], af[w4][2]);
            fp4x8_e4m3(qb[p][w4], af[w4][1], af[w4][3]);
          }
          const u32 sup = ua[p], sbp = ub[p];
          if (h + 1 < nsteps) load1(h + 1, p);
          UNROLL for (int j = 0; j < 2; j++) {
            if (j >= live) break;
            float d[16];
            UNROLL for (int e = 0; e < 16; e++) d[e] = 0;
            wg_fence();
            UNROLL for (int w4 = 0; w4 < 4; w4++) {
              if (w4 >= nb) break;
              fp4_wg_e4(&d[4 * w4], af[w4][0], af[w4][1], af[w4][2], af[w4][3], wg_desc(xb0 + 1024 * j) + 2 * w4);
            }
            wg_commit();
            wg_wait0();
            WG_KEEPN(d, 16);
            UNROLL for (int w4 = 0; w4 < 4; w4++) {
              if (w4 >= nb) break;
              const int bs = 4 * hs + w4;
              const float swa = ue8m0_f32((unsigned char)(sup >> (8 * w4)));
              const float swb = ue8m0_f32((unsigned char)(sbp >> (8 * w4)));
              const float2 sx = *(const float2*)&xss[buf][bs * FP4_SLOTS + 8 * j + 2 * t];
              acc[p][j][0] = fmaf(d[4 * w4], swa * sx.x, acc[p][j][0]);
              acc[p][j][1] = fmaf(d[4 * w4 + 1], swa * sx.y, acc[p][j][1]);
              acc[p][j][2] = fmaf(d[4 * w4 + 2], swb * sx.x, acc[p][j][2]);
              acc[p][j][3] = fmaf(d[4 * w4 + 3], swb * sx.y, acc[p][j][3]);
            }
          }
        }
        continue;
      }
      u32 ca[2][4], cb[2][4], sua[2], sub[2];
      UNROLL for (int p = 0; p < 2; p++) {
        UNROLL for (int w4 = 0; w4 < 4; w4++) ca[p][w4] = qa[p][w4], cb[p][w4] = qb[p][w4];
        sua[p] = ua[p], sub[p] = ub[p];
        if constexpr (TR) fp4_quad_words(ca[p], lane), fp4_quad_words(cb[p], lane);
      }
      if (h + 1 < nsteps) load(h + 1);
      UNROLL for (int w4 = 0; w4 < 4; w4++) {
        if (w4 >= nb) break;
        // the block's slot codes (slot g's eight, 8t..) and the columns' scales (slots
        // 2t, 2t + 1) of each live tile
        const int bs = 4 * hs + w4;
        u32 xb[2][2];
        float x0[2], x1[2];
        UNROLL for (int j = 0; j < 2; j++) {
          if (j >= live) break;
          const u64 v = *(const u64*)&xcs[buf][(8 * j + g) * FP4E_SLOT + 32 * bs + 8 * t];
          xb[j][0] = (u32)v, xb[j][1] = (u32)(v >> 32);
          const float2 sx = *(const float2*)&xss[buf][bs * FP4_SLOTS + 8 * j + 2 * t];
          x0[j] = sx.x, x1[j] = sx.y;
        }
        UNROLL for (int p = 0; p < 2; p++) {
          u32 a0, a1, a2, a3;
          fp4x8_e4m3(ca[p][w4], a0, a2);  // row g: codes 8t..8t+3, 8t+4..8t+7
          fp4x8_e4m3(cb[p][w4], a1, a3);  // row g + 8
          const float swa = ue8m0_f32((unsigned char)(sua[p] >> (8 * w4)));
          const float swb = ue8m0_f32((unsigned char)(sub[p] >> (8 * w4)));
          UNROLL for (int j = 0; j < 2; j++) {
            if (j >= live) break;
            float d[4];
            fp4_e4_mma(d, a0, a1, a2, a3, xb[j][0], xb[j][1]);
            acc[p][j][0] = fmaf(d[0], swa * x0[j], acc[p][j][0]);
            acc[p][j][1] = fmaf(d[1], swa * x1[j], acc[p][j][1]);
            acc[p][j][2] = fmaf(d[2], swb * x0[j], acc[p][j][2]);
            acc[p][j][3] = fmaf(d[3], swb * x1[j], acc[p][j][3]);
          }
        }
      }
    }
    fp4_store_pass<NW>(a, b, rt0, base, c0, nc, live, g, t, acc);
  }
  fast_cp_wait<0>();  // nothing in flight at exit
}
#endif

// fp4_launch: a tile kernel's body: on the device variant V's blocks (0 the pipelined
// tiles, 1 the register tiles, 2 the wide ones, 3 the register tiles for bf16
// activations only, 4 the register tiles with rows g+8 found from rows g, 5 those for
// bf16 activations with their halves copied a stage ahead too, 6 the general ones with
// their halves copied two steps ahead, 7 the wide ones for general activations (32
// slots a pass, both halves), 8 the fp8 numerics' e4m3 tiles (9 with 16-byte loads, 10
// on wgmma), 11 variant 5 on the tiled layout, 12 those by bulk copies (13 with rings of
// eight steps), 14 variant 2 on the tiled layout; only that variant
// instantiated, so a kernel holds only its own shared memory), on the emulated device
// the launch's blocks in fp4_tiles' loops (every variant's values; 8-10: fp4_e4_ref's,
// the e4m3 tiles' definition; 11-14 reading the tiled layout).
template <int NW, int V>
DEVM void fp4_launch(const FastMoEArgs& a, i64 GIDX, i64 GSTRIDE) {
  (void)GSTRIDE;
#ifdef DI_EMULATE
  (void)GIDX;
  const i64 blocks = a.nact * ((a.N + (NW == 2 ? 63 : 127)) / (NW == 2 ? 64 : 128)) * a.S;
  if constexpr (V >= 8 && V <= 10) fp4_e4_ref<NW>(a, blocks);
  else fp4_tiles<NW, V >= 11 && V <= 14>(a, blocks);
#else
  if constexpr (V == 0) fp4_pipe<NW>(a, GIDX);
  else if constexpr (V == 1) fp4_tiles<NW>(a, GIDX);
  else if constexpr (V == 3) fp4_tiles<NW, true>(a, GIDX);
  else if constexpr (V == 4) fp4_tiles<NW, false, true>(a, GIDX);
  else if constexpr (V == 5) fp4_tiles<NW, true, true, true>(a, GIDX);
  else if constexpr (V == 6) fp4_tiles<NW, false, true, true>(a, GIDX);
  else if constexpr (V == 7) fp4_tiles_wide<NW, true>(a, GIDX);
  else if constexpr (V == 8) fp4_e4_tiles<NW>(a, GIDX);
  else if constexpr (V == 9) fp4_e4_tiles<NW, true>(a, GIDX);
  else if constexpr (V == 10) fp4_e4_tiles<NW, false, true>(a, GIDX);
  else if constexpr (V == 11) fp4_tiles<NW, true, true, true, true>(a, GIDX);
  else if constexpr (V == 12) fp4_tiles_bulk<NW>(a, GIDX);
  else if constexpr (V == 13) fp4_tiles_bulk<NW, 8>(a, GIDX);
  else if constexpr (V == 14) fp4_tiles_wide<NW, false, true>(a, GIDX);
  else fp4_tiles_wide<NW>(a, GIDX);
#endif
}

// fast_moe_up_fp4 (w1 and w3 into planes 0 and 1 of part) and fast_moe_down_fp4 (w2
// into plane 0): a launch block of 128 work items per (active expert, weight rows,
// slice), fp4_where's order; the grid is exactly the blocks. At most 128 registers a
// thread, so that four blocks share a multiprocessor (168 without the bound: three).
#ifndef DI_EMULATE
#undef KERNEL_BOUNDS
#define KERNEL_BOUNDS __launch_bounds__(128, 4)
#endif
KERNEL(fast_moe_up_fp4, FastMoEArgs) { fp4_launch<2, 0>(a, GIDX, GSTRIDE); }
KERNEL(fast_moe_down_fp4, FastMoEArgs) { fp4_launch<1, 0>(a, GIDX, GSTRIDE); }
// fast_moe_up_fp4_reg, fast_moe_down_fp4_reg: the same tiles with each lane's next step
// of weights loaded into registers (fp4_tiles): the default until run 34 (since then
// _reg8, below), the pipelined ones above only with DEEPINFER_CUDA_FP4_PIPE=1 (slower on
// the H200, run 11c). The same values: every output is the same chain of mma.
KERNEL(fast_moe_up_fp4_reg, FastMoEArgs) { fp4_launch<2, 1>(a, GIDX, GSTRIDE); }
KERNEL(fast_moe_down_fp4_reg, FastMoEArgs) { fp4_launch<1, 1>(a, GIDX, GSTRIDE); }
// fast_moe_up_fp4_regx, fast_moe_down_fp4_regx: the register tiles compiled for bf16
// activations only (V4.1's), without the lo halves' code: the default for them from run
// 22 to run 34 (DEEPINFER_CUDA_FP4_XE=x; =0 runs the _reg ones); the same values.
KERNEL(fast_moe_up_fp4_regx, FastMoEArgs) { fp4_launch<2, 3>(a, GIDX, GSTRIDE); }
KERNEL(fast_moe_down_fp4_regx, FastMoEArgs) { fp4_launch<1, 3>(a, GIDX, GSTRIDE); }
// fast_moe_up_fp4_rega, fast_moe_down_fp4_rega: the _regx tiles with rows g+8 found from
// rows g (fp4_load_regs8: four row pointers a lane fewer) and the slots' halves copied by
// cp.async a stage ahead: V4.1's default since run 34 (an H100, the same call: the up
// tiles 7.71 → 6.70 ms at batch 256, docs/perf/moe.md); the same values.
KERNEL(fast_moe_up_fp4_rega, FastMoEArgs) { fp4_launch<2, 5>(a, GIDX, GSTRIDE); }
KERNEL(fast_moe_down_fp4_rega, FastMoEArgs) { fp4_launch<1, 5>(a, GIDX, GSTRIDE); }
// fast_moe_up_fp4_regt, fast_moe_down_fp4_regt: the _rega tiles for weights in the tiled
// layout (fmt 6: DEEPINFER_CUDA_FP4_TILED=1 lays every FP4 weight out so; fp4_rows8t),
// whose loads of a step are whole 128-byte lines. The same values.
KERNEL(fast_moe_up_fp4_regt, FastMoEArgs) { fp4_launch<2, 11>(a, GIDX, GSTRIDE); }
KERNEL(fast_moe_down_fp4_regt, FastMoEArgs) { fp4_launch<1, 11>(a, GIDX, GSTRIDE); }
// fast_moe_up_fp4_reg8, fast_moe_down_fp4_reg8: the _reg tiles (any activations: V4's)
// with rows g+8 found from rows g: their default since run 34 (an H100, the same call:
// V4's up tiles 3.31 → 3.14 ms at batch 256; DEEPINFER_CUDA_FP4_R8=0 runs _reg); the
// same values.
KERNEL(fast_moe_up_fp4_reg8, FastMoEArgs) { fp4_launch<2, 4>(a, GIDX, GSTRIDE); }
KERNEL(fast_moe_down_fp4_reg8, FastMoEArgs) { fp4_launch<1, 4>(a, GIDX, GSTRIDE); }
// fast_moe_up_fp4_reg8a, fast_moe_down_fp4_reg8a: the _reg8 tiles with the slots' halves
// (both) copied by cp.async two steps ahead into the two halves of xs' room
// (DEEPINFER_CUDA_FP4_R8=a; opt-in: run 35, an H100, timed V4's tiles −3% at batch 256
// and +3% at 64 against _reg8); the same values.
KERNEL(fast_moe_up_fp4_reg8a, FastMoEArgs) { fp4_launch<2, 6>(a, GIDX, GSTRIDE); }
KERNEL(fast_moe_down_fp4_reg8a, FastMoEArgs) { fp4_launch<1, 6>(a, GIDX, GSTRIDE); }
// fast_moe_up_fp4_e4, fast_moe_down_fp4_e4: the fp8 numerics' tiles of V4.1's FP4 experts
// (fp4_e4_tiles: mma.sync m16n8k32 e4m3, a block sum an mma), with DEEPINFER_CUDA_FP4_E4=1
// in that mode's steps that would take the register tiles. Opt-in: 36-60% slower than
// _rega on an H100 (runs 49-50): sm_90 has no FP8 mma.sync, and ptxas lowers each to
// E4M3 → f16 unpacks and two f16 HMMA, so the codes are widened twice; on Hopper the
// FP8 route is wgmma (docs/perf/moe.md)
KERNEL(fast_moe_up_fp4_e4, FastMoEArgs) { fp4_launch<2, 8>(a, GIDX, GSTRIDE); }
KERNEL(fast_moe_down_fp4_e4, FastMoEArgs) { fp4_launch<1, 8>(a, GIDX, GSTRIDE); }
// fast_moe_up_fp4_e4t, fast_moe_down_fp4_e4t: the same with a row's step of codes one
// 16-byte load a lane and the quad's words exchanged (DEEPINFER_CUDA_FP4_E4=t); the same
// values
KERNEL(fast_moe_up_fp4_e4t, FastMoEArgs) { fp4_launch<2, 9>(a, GIDX, GSTRIDE); }
KERNEL(fast_moe_down_fp4_e4t, FastMoEArgs) { fp4_launch<1, 9>(a, GIDX, GSTRIDE); }
// fast_moe_up_fp4_e4w, fast_moe_down_fp4_e4w: the same on wgmma's e4m3 form (WG: each
// block of a stream's 64 rows and a tile of 8 slots one m64n8k32 from registers and
// shared memory; DEEPINFER_CUDA_FP4_E4=w); the same values where the sums are exact
KERNEL(fast_moe_up_fp4_e4w, FastMoEArgs) { fp4_launch<2, 10>(a, GIDX, GSTRIDE); }
KERNEL(fast_moe_down_fp4_e4w, FastMoEArgs) { fp4_launch<1, 10>(a, GIDX, GSTRIDE); }
// fast_moe_up_fp4_wide, fast_moe_down_fp4_wide: fp4_tiles_wide (64 slots a pass; bf16
// activations only), three blocks a multiprocessor (at most 168 registers a thread; run
// 22 measured them faster than two blocks: an 8,192-token prefill's up tiles 68.3 → 60.2
// ms, down 38.9 → 35.0); the same values as the others.
#ifndef DI_EMULATE
#undef KERNEL_BOUNDS
#define KERNEL_BOUNDS __launch_bounds__(128, 3)
#endif
// fast_moe_up_fp4_regb, fast_moe_down_fp4_regb: the _regt tiles with each warp's
// weights copied into shared memory FP4B_NS − 1 steps ahead (fp4_tiles_bulk; Go gives
// them FP4B_NS · FP4B_STAGE bytes a warp of dynamic shared memory, which with the staged
// halves hold three blocks a multiprocessor). The same values.
KERNEL(fast_moe_up_fp4_regb, FastMoEArgs) { fp4_launch<2, 12>(a, GIDX, GSTRIDE); }
KERNEL(fast_moe_down_fp4_regb, FastMoEArgs) { fp4_launch<1, 12>(a, GIDX, GSTRIDE); }
KERNEL(fast_moe_up_fp4_wide, FastMoEArgs) { fp4_launch<2, 2>(a, GIDX, GSTRIDE); }
KERNEL(fast_moe_down_fp4_wide, FastMoEArgs) { fp4_launch<1, 2>(a, GIDX, GSTRIDE); }
// fast_moe_up_fp4_widet, fast_moe_down_fp4_widet: the wide tiles over the tiled layout
// (DEEPINFER_CUDA_FP4_TILED's prefills); the same values.
KERNEL(fast_moe_up_fp4_widet, FastMoEArgs) { fp4_launch<2, 14>(a, GIDX, GSTRIDE); }
KERNEL(fast_moe_down_fp4_widet, FastMoEArgs) { fp4_launch<1, 14>(a, GIDX, GSTRIDE); }
// fast_moe_up_fp4_widel, fast_moe_down_fp4_widel: fp4_tiles_wide for activations that
// are not bf16 values (V4's float32 ones: 32 slots a pass, both halves staged, the lo
// mma in each chain), for prefills (fp4Wide); the register tiles' values.
KERNEL(fast_moe_up_fp4_widel, FastMoEArgs) { fp4_launch<2, 7>(a, GIDX, GSTRIDE); }
KERNEL(fast_moe_down_fp4_widel, FastMoEArgs) { fp4_launch<1, 7>(a, GIDX, GSTRIDE); }
// fast_moe_up_fp4_regbd, fast_moe_down_fp4_regbd: the _regb tiles with rings of eight
// steps (seven ahead), two blocks a multiprocessor (DEEPINFER_CUDA_FP4_TILED=d).
#ifndef DI_EMULATE
#undef KERNEL_BOUNDS
#define KERNEL_BOUNDS __launch_bounds__(128, 2)
#endif
KERNEL(fast_moe_up_fp4_regbd, FastMoEArgs) { fp4_launch<2, 13>(a, GIDX, GSTRIDE); }
KERNEL(fast_moe_down_fp4_regbd, FastMoEArgs) { fp4_launch<1, 13>(a, GIDX, GSTRIDE); }
#undef KERNEL_BOUNDS
#define KERNEL_BOUNDS

// fp4_e4m3_probe: fp4x8_e4m3 of n words (TestFP4ToE4M3Bytes; on a GPU, the device's prmt)
struct Fp4E4m3ProbeArgs {
  const u32* q;
  u32* out;  // two words a word of q
  i64 n;
};
KERNEL(fp4_e4m3_probe, Fp4E4m3ProbeArgs) {
  for (i64 i = GIDX; i < a.n; i += GSTRIDE) {
    fp4x8_e4m3(a.q[i], a.out[2 * i], a.out[2 * i + 1]);
  }
}
