// rows.h: dot products of one weight row with several activation rows, the weight row
// read once for all of them. Each result is the one the per-output kernels compute,
// operation for operation; only the loads are shared. A work item that owns weight row
// r and a group of activation rows replaces a group of (row, output) work items.

#ifdef DI_EMULATE
#define UNROLL
#else
#define UNROLL _Pragma("unroll")
#endif

// gonum's float32 dot products (the cpu target's gemmNT), one output at a time.

// dense_dot_unitary is gonum's f32.DotUnitary (amd64) of x[k0, k0+len) and w[k0, k0+len),
// w's first element yoff values past a 16-byte boundary.
template <class X, class W>
DEVM float dense_dot_unitary(X x, W w, i64 k0, i64 len, i64 yoff) {
  float sum[4] = {0, 0, 0, 0}, psum[4] = {0, 0, 0, 0};
  i64 idx = k0;
  if (len > 0) {
    i64 mis = yoff & 3;
    bool done = false;
    if (mis != 0) {
      for (i64 t = 4 - mis; t > 0; t--) {
        sum[0] += x(idx) * w(idx);
        idx++;
        if (--len == 0) { done = true; break; }
      }
    }
    if (!done) {
      i64 tail = len & 15, n16 = len >> 4;
      if (n16 > 0) {
        for (i64 v = 0; v < n16; v++) {
          for (int l = 0; l < 4; l++) {
            float p0 = x(idx + l) * w(idx + l);
            float p1 = x(idx + 4 + l) * w(idx + 4 + l);
            float p2 = x(idx + 8 + l) * w(idx + 8 + l);
            float p3 = x(idx + 12 + l) * w(idx + 12 + l);
            sum[l] += p0;
            psum[l] += p1;
            sum[l] += p2;
            psum[l] += p3;
          }
          idx += 16;
        }
        for (int l = 0; l < 4; l++) sum[l] += psum[l];
      }
      if (tail != 0) {
        for (i64 v = 0; v < (tail >> 2); v++) {
          for (int l = 0; l < 4; l++) sum[l] += x(idx + l) * w(idx + l);
          idx += 4;
        }
        for (i64 v = 0; v < (tail & 3); v++) {
          sum[0] += x(idx) * w(idx);
          idx++;
        }
      }
    }
  }
  float h0 = sum[0] + sum[1], h1 = sum[2] + sum[3];
  return h0 + h1;
}

// dense_gonum_par is whether the reduction is summed in blocks of 64: always, as the cpu
// target's gemmNT does for every shape (gonum's parallel order, fixed for batch
// invariance); the arguments name the product for the record.
DEV bool dense_gonum_par(i64 m, i64 n) { return true; }

// dense_gonum is one output of gonum's sgemm (C = 0, then C += 1·dot, per block of 64 of
// the reduction when par).
template <class X, class W>
DEVM float dense_gonum(X x, W w, i64 K, i64 yoff, bool par) {
  float c = 0;
  if (!par) {
    c += dense_dot_unitary(x, w, 0, K, yoff);
    return c;
  }
  for (i64 kb = 0; kb < K; kb += 64) c += dense_dot_unitary(x, w, kb, imin(64, K - kb), yoff + kb);
  return c;
}

struct DenseXRow {
  const float* p;
  DEVM float operator()(i64 k) const { return p[k]; }
};
struct DenseWRow {
  Weight w;
  i64 r, c0;
  DEVM float operator()(i64 k) const { return wval(w, r, c0 + k); }
};

// wblock64 widens values [c0, c0+64) of row r of w into wb, as wval does one by one.
DEVM void wblock64(const Weight& w, i64 r, i64 c0, float* wb) {
  if (w.fmt == 4 && ((r * w.cols + c0) & 1) == 0 && (w.cols & 31) == 0 && (c0 & 31) == 0) {
    // FP4: 32 code bytes, the scales of the block's two groups of 32
    const unsigned char* p = (const unsigned char*)w.p + (r * w.cols + c0) / 2;
    i64 sc = w.cols / 32;
    float s0 = ue8m0_f32(w.s[r * sc + c0 / 32]), s1 = ue8m0_f32(w.s[r * sc + c0 / 32 + 1]);
    u64 q[4];
    if ((((u64)p) & 7) == 0) {
      const u64* p8 = (const u64*)p;
      UNROLL for (int j = 0; j < 4; j++) q[j] = p8[j];
    } else {
      UNROLL for (int j = 0; j < 4; j++) {
        q[j] = 0;
        UNROLL for (int b = 0; b < 8; b++) q[j] |= (u64)p[8 * j + b] << (8 * b);
      }
    }
    UNROLL for (int b = 0; b < 32; b++) {
      unsigned char byte = (unsigned char)(q[b >> 3] >> (8 * (b & 7)));
      float s = b < 16 ? s0 : s1;
      wb[2 * b] = e2m1_f32(byte & 15) * s;
      wb[2 * b + 1] = e2m1_f32(byte >> 4) * s;
    }
    return;
  }
  if (w.fmt == 0) {
    const float* p = (const float*)w.p + r * w.cols + c0;
    UNROLL for (int u = 0; u < 64; u++) wb[u] = p[u];
    return;
  }
  const unsigned char* base = (const unsigned char*)w.p;
  if (w.fmt == 1 && (((u64)(base + 2 * (r * w.cols + c0))) & 7) == 0) {  // bf16: 16 loads of 8 bytes
    const u64* p8 = (const u64*)(base + 2 * (r * w.cols + c0));
    UNROLL for (int j = 0; j < 16; j++) {
      u64 q = p8[j];
      UNROLL for (int h = 0; h < 4; h++) wb[4 * j + h] = bf16_f32((unsigned short)(q >> (16 * h)));
    }
    return;
  }
  if ((w.fmt == 2 || w.fmt == 3 || w.fmt == 5) && (c0 & 31) == 0 && (((u64)(base + r * w.cols + c0)) & 7) == 0) {
    // FP8 e4m3: 8 loads of 8 bytes, the scales of the two groups of 32 (per 32×32
    // block for fp8_b32, per 32 of the row for fp8_g32, one per 128×128 block for
    // fp8_b128)
    const u64* p8 = (const u64*)(base + r * w.cols + c0);
    float s0, s1;
    if (w.fmt == 5) {
      s0 = s1 = ue8m0_f32(w.s[(r / 128) * ((w.cols + 127) / 128) + c0 / 128]);
    } else {
      i64 sc = (w.cols + 31) / 32, srow = w.fmt == 2 ? (r / 32) * sc : r * sc;
      s0 = ue8m0_f32(w.s[srow + c0 / 32]);
      s1 = ue8m0_f32(w.s[srow + c0 / 32 + 1]);
    }
    UNROLL for (int j = 0; j < 8; j++) {
      u64 q = p8[j];
      UNROLL for (int b = 0; b < 8; b++) wb[8 * j + b] = e4m3_f32((unsigned char)(q >> (8 * b))) * (j < 4 ? s0 : s1);
    }
    return;
  }
  UNROLL for (int u = 0; u < 64; u++) wb[u] = wval(w, r, c0 + u);
}

// rows_x is activation row j of a group: rows[j] when a list is given, else r0 + j.
DEVM const float* rows_x(const float* x, i64 ldx, const int* rows, i64 r0, int j) {
  return x + (rows ? (i64)rows[j] : r0 + j) * ldx;
}

// gonum_block: d[j] = gonum's DotUnitary of block [kb, kb+64) of x_j and row r of w —
// one term of dense_gonum's sum c = 0, c += d_0, c += d_1, ... — for the n ≤ G rows x_j.
// For K a multiple of 64 (every block 64 long, rows 16-byte aligned) the block's
// weights are widened once and the DotUnitary is written out (four passes of 16 with
// sum and psum); other K take dense_dot_unitary row by row.
template <int G>
DEVM void gonum_block(const float* x, i64 ldx, const int* rows, i64 r0, i64 n, const Weight& w, i64 r, i64 K, i64 kb, float* d) {
  if (K % 64 != 0) {
    UNROLL for (int j = 0; j < G; j++) {
      if (j < n) {
        DenseXRow xr = {rows_x(x, ldx, rows, r0, j)};
        DenseWRow wr = {w, r, 0};
        d[j] = dense_dot_unitary(xr, wr, kb, imin(64, K - kb), r * K + kb);
      }
    }
    return;
  }
  float wb[64];
  wblock64(w, r, kb, wb);
  UNROLL for (int j = 0; j < G; j++) {
    if (j < n) {
      const float* xr = rows_x(x, ldx, rows, r0, j) + kb;
      float sum[4] = {0, 0, 0, 0}, psum[4] = {0, 0, 0, 0};
      UNROLL for (int v = 0; v < 4; v++) {
        UNROLL for (int l = 0; l < 4; l++) {
          float p0 = xr[16 * v + l] * wb[16 * v + l];
          float p1 = xr[16 * v + 4 + l] * wb[16 * v + 4 + l];
          float p2 = xr[16 * v + 8 + l] * wb[16 * v + 8 + l];
          float p3 = xr[16 * v + 12 + l] * wb[16 * v + 12 + l];
          sum[l] += p0;
          psum[l] += p1;
          sum[l] += p2;
          psum[l] += p3;
        }
      }
      UNROLL for (int l = 0; l < 4; l++) sum[l] += psum[l];
      float h0 = sum[0] + sum[1], h1 = sum[2] + sum[3];
      d[j] = h0 + h1;
    }
  }
}

// gonum_rows: c[j] = dense_gonum(x_j, row r of w, K, r·K, par) for the n ≤ G rows x_j,
// a block of the weight row widened once for all of them.
template <int G>
DEVM void gonum_rows(const float* x, i64 ldx, const int* rows, i64 r0, i64 n, const Weight& w, i64 r, i64 K, float* c) {
  UNROLL for (int j = 0; j < G; j++) c[j] = 0;
  float d[G];
  for (i64 kb = 0; kb < K; kb += 64) {
    gonum_block<G>(x, ldx, rows, r0, n, w, r, K, kb, d);
    UNROLL for (int j = 0; j < G; j++)
      if (j < n) c[j] += d[j];
  }
}


// PART_AHEAD: the terms whose loads part_chain issues before adding them, in order.
#define PART_AHEAD 16

// BRow reads a bf16 weight row (numerics.h's FRow reads a float32 one, WRow any format
// through wval).
struct BRow {
  const unsigned short* p;
  DEVM float operator()(i64 k) const { return bf16_f32(p[k]); }
};

// part_chain: part p of P of a row's float64 sum: Σ (double)w(k) · (double)x[k] over k =
// p, p + P, … < K, added in k order from 0 (each product exact, each add rounded), with
// PART_AHEAD terms' loads issued before their adds. w(k) is the weight row's value k.
template <class W>
DEVM double part_chain(const float* x, W w, i64 p, i64 P, i64 K) {
  double acc = 0;
  i64 k = p;
  for (; k + (PART_AHEAD - 1) * P < K; k += PART_AHEAD * P) {
    float xv[PART_AHEAD], wv[PART_AHEAD];
    UNROLL for (int u = 0; u < PART_AHEAD; u++) {
      xv[u] = x[k + u * P];
      wv[u] = w(k + u * P);
    }
    UNROLL for (int u = 0; u < PART_AHEAD; u++) acc += (double)wv[u] * (double)xv[u];
  }
  for (; k < K; k += P) acc += (double)w(k) * (double)x[k];
  return acc;
}

// part_chain_row: part_chain of row r of w, its format chosen once: float32 and bf16 rows
// are read directly, other formats through wval. (wval switches on the format around
// every load, which kept each load's widening inside the switch, so the loads of an
// unrolled group did not overlap: one DRAM round trip a term — mhc_fast_mix_part took 33
// µs a launch at one token on the H200 that way, 6 µs read directly, run 27.)
DEVM double part_chain_row(const float* x, const Weight& w, i64 r, i64 p, i64 P, i64 K) {
  switch (w.fmt) {
    case 0: return part_chain(x, FRow{(const float*)w.p + r * w.cols}, p, P, K);
    case 1: return part_chain(x, BRow{(const unsigned short*)w.p + r * w.cols}, p, P, K);
    default: return part_chain(x, WRow{w, r}, p, P, K);
  }
}

// part_dots_tile: V4's fast-mode float64 sums in parts (moe.cu's router, mhc.cu's mixes)
// for a tile of TT tokens × RR rows: for part p of P (the values k = p, p + P, … < K),
// out(t, r, v) with v = Σ (double)w_r[k] · (double)x_t[k], added in k order from 0 —
// each product exact (float × float in float64), each add rounded — the value the
// one-sum-a-work-item kernels (moe_fast_gate_part, mhc_fast_mix_part) give. Token t is
// row t of x (ldx values apart), row r the weight's row r0 + r; tile row sq (−1: none)
// is each token's own x instead (the sum of squares). Tokens from nt and rows from nr
// read zeros and are not stored. Each value is converted to float64 once for the tile's
// TT·RR products, where a sum a work item converts two a product (conversions run at a
// quarter of the float64 rate on the H200), and each load serves TT or RR sums.
// W reads the weight: w(r, k) is value k of tile row r (part_dots_tile below picks the
// reader for the weight's format once).
template <int TT, int RR, class W, class Out>
DEVM void part_dots_tile_of(const float* x, i64 ldx, W w, i64 p, i64 P, i64 K, int nt, int nr, int sq, Out out) {
  double acc[TT][RR];
  UNROLL for (int t = 0; t < TT; t++) UNROLL for (int r = 0; r < RR; r++) acc[t][r] = 0;
  auto step = [&](const float (&xv)[TT], const float (&wv)[RR]) {
    double xd[TT], wd[RR];
    UNROLL for (int t = 0; t < TT; t++) xd[t] = (double)xv[t];
    UNROLL for (int r = 0; r < RR; r++) wd[r] = (double)wv[r];
    UNROLL for (int t = 0; t < TT; t++) UNROLL for (int r = 0; r < RR; r++) acc[t][r] += (r == sq ? xd[t] : wd[r]) * xd[t];
  };
  auto load = [&](i64 k, float (&xv)[TT], float (&wv)[RR]) {
    UNROLL for (int t = 0; t < TT; t++) xv[t] = t < nt ? x[t * ldx + k] : 0.0f;
    UNROLL for (int r = 0; r < RR; r++) wv[r] = r < nr && r != sq ? w(r, k) : 0.0f;
  };
  i64 k = p;
  // four values' loads in flight before their products (the same order)
  for (; k + 3 * P < K; k += 4 * P) {
    float xv[4][TT], wv[4][RR];
    UNROLL for (int u = 0; u < 4; u++) load(k + u * P, xv[u], wv[u]);
    UNROLL for (int u = 0; u < 4; u++) step(xv[u], wv[u]);
  }
  for (; k < K; k += P) {
    float xv[TT], wv[RR];
    load(k, xv, wv);
    step(xv, wv);
  }
  UNROLL for (int t = 0; t < TT; t++) UNROLL for (int r = 0; r < RR; r++) if (t < nt && r < nr) out(t, r, acc[t][r]);
}

// FTile, BTile and WTile read a tile's weight rows (row r0 + r, ld values apart) as
// float32, bf16, or any format through wval.
struct FTile {
  const float* p;
  i64 ld;
  DEVM float operator()(int r, i64 k) const { return p[r * ld + k]; }
};
struct BTile {
  const unsigned short* p;
  i64 ld;
  DEVM float operator()(int r, i64 k) const { return bf16_f32(p[r * ld + k]); }
};
struct WTile {
  Weight w;
  i64 r0;
  DEVM float operator()(int r, i64 k) const { return wval(w, r0 + r, k); }
};

// part_dots_tile: part_dots_tile_of on rows r0… of w, the reader chosen once for the
// weight's format (a format switch around every load, as wval has, keeps each load's
// widening inside the switch, so the loads of an unrolled group do not overlap: see
// part_chain_row).
template <int TT, int RR, class Out>
DEVM void part_dots_tile(const float* x, i64 ldx, const Weight& w, i64 r0, i64 p, i64 P, i64 K, int nt, int nr, int sq,
                         Out out) {
  switch (w.fmt) {
    case 0: part_dots_tile_of<TT, RR>(x, ldx, FTile{(const float*)w.p + r0 * w.cols, w.cols}, p, P, K, nt, nr, sq, out); break;
    case 1:
      part_dots_tile_of<TT, RR>(x, ldx, BTile{(const unsigned short*)w.p + r0 * w.cols, w.cols}, p, P, K, nt, nr, sq, out);
      break;
    default: part_dots_tile_of<TT, RR>(x, ldx, WTile{w, r0}, p, P, K, nt, nr, sq, out);
  }
}
