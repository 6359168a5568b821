// csa41.cu: DeepSeek-V4.1's attention path (CSA2): the KV source's compressor
// (csa_compress), the lightning indexer (csa_index, csa_index_candidates) and the
// shared-KV sparse attention with its window ring (csa_attention). Ports of the cpu
// target's targets/cpu/v41_csa.go, v41_topk.go and v41_attention.go, operation for
// operation.
//
// Per-sequence state (claimed by ops_csa41.go, keys "csa.*"), stored in the cpu
// target's packed formats (targets/cpu/kvstate, quant.Pack), rows by position:
//   - a window ring of `rows` rows (MXFP8, or float32): position q at row q % rows,
//     holding the positions [max(0, P-rows), P) where P is the sequence's first position
//     of the step;
//   - a KV source's compressed entries (FP4 with E4M3 scales) and index keys (FP4 with
//     UE8M0 scales): entry e (the group of positions e·ratio .. e·ratio+ratio-1) at row
//     e; a sequence at position P holds P / ratio of them;
//   - the compressor's open group (ratio > 1): the raw fp32 projections kv and gate of
//     position q at slot q % ratio.

#define CSA_MAX_PAIRS 64
#define CSA_MAX_OWNERS 64

// ---- scalar formats (quant package) ----

// Storage formats of state rows, as quant.Format: 0 float32, 1 MXFP8, 2 FP4 with UE8M0
// scales, 3 FP4 with E4M3 scales. A packed row is its codes (FP4: two a byte, the even
// element in the low nibble), then one scale byte per group.
DEV i64 csa_code_bytes(i64 fmt, i64 dim) { return fmt == 1 ? dim : dim / 2; }

// csa_fmt_scale is quant.Format.Scale.
DEV float csa_fmt_scale(i64 fmt, float amax) {
  if (fmt == 1) return q_pow2ceil(go_max32(amax, 1e-4f) * (float)(1.0 / 448));
  if (fmt == 2) return q_pow2ceil(go_max32(amax, 6 * f32_bits(0x00800000u)) * (float)(1.0 / 6));
  return e4m3_f32(q_enc_e4m3(go_max32(amax, 6 * f32_bits(0x3b000000u)) / 6));
}

// csa_pack_group packs group gi (g values) of row x (dim values) into the packed row dst
// (quant.Format.Pack, one group).
DEV void csa_pack_group(const float* x, i64 fmt, i64 g, i64 dim, i64 gi, unsigned char* dst) {
  const float* grp = x + gi * g;
  if (fmt == 0) {
    float* o = (float*)dst;
    for (i64 j = 0; j < g; j++) o[gi * g + j] = grp[j];
    return;
  }
  float amax = 0;
  for (i64 j = 0; j < g; j++) amax = go_max32(amax, fabsf(grp[j]));
  float s = csa_fmt_scale(fmt, amax);
  i64 cb = csa_code_bytes(fmt, dim);
  dst[cb + gi] = fmt == 3 ? q_enc_e4m3(s) : (unsigned char)(bits_f32(s) >> 23);
  for (i64 j = 0; j < g; j++) {
    i64 k = gi * g + j;
    float v = grp[j];
    if (fmt == 1) {
      dst[k] = q_enc_e4m3(go_min32(go_max32(v / s, -448.0f), 448.0f));
      continue;
    }
    unsigned char c = q_enc_e2m1(go_min32(go_max32(v / s, -6.0f), 6.0f));
    if (k % 2 == 0) dst[k / 2] = (unsigned char)((dst[k / 2] & 0xf0) | c);
    else dst[k / 2] = (unsigned char)((dst[k / 2] & 0x0f) | (c << 4));
  }
}

DEV void csa_pack_row(const float* x, i64 fmt, i64 g, i64 dim, unsigned char* dst) {
  if (fmt == 0) g = dim;
  for (i64 gi = 0; gi * g < dim; gi++) csa_pack_group(x, fmt, g, dim, gi, dst);
}

// csa_al16: a 16-byte aligned address (float4 loads and stores).
DEV bool csa_al16(const void* p) { return ((u64)p & 15) == 0; }

// csa_row_val is value j of a stored row (quant.Format.Unpack: code × scale).
DEV float csa_row_val(const unsigned char* row, i64 fmt, i64 g, i64 dim, i64 j) {
  if (fmt == 0) return ((const float*)row)[j];
  const unsigned char* sc = row + csa_code_bytes(fmt, dim);
  float s = fmt == 3 ? e4m3_f32(sc[j / g]) : ue8m0_f32(sc[j / g]);
  if (fmt == 1) return e4m3_f32(row[j]) * s;
  unsigned char c = row[j / 2];
  if (j & 1) c >>= 4;
  return e2m1_f32(c & 15) * s;
}

// ---- the step's sequences (cpu: views) ----

struct csa_View {
  i64 row, n, pos;  // the view's first row, rows and first position
  i64 fromZero;     // a whole prefill from position 0 (never in batch-invariant mode)
  i64 decode;       // every row a decode row
  i64 orows;        // rows a product is summed over at once: 1 in row-order mode, else n
  i64 spos, sn;     // the sequence's first position and rows in the step
  unsigned char* state;
};

// csa_view_of is sequence q's view, its rows r..r+n−1 of the step's (the last n of its).
DEV void csa_view_of(const SeqRec& s, i64 r, i64 n, csa_View* v) {
  v->row = r;
  v->n = n;
  v->pos = s.pos + s.n - n;
  v->fromZero = s.pos == 0 && n == s.n && !(s.flags & SEQ_INVARIANT);
  v->decode = (s.flags & SEQ_DECODE) != 0;
  v->orows = (s.flags & SEQ_ROWS) ? 1 : n;
  v->spos = s.pos;
  v->sn = s.n;
  v->state = (unsigned char*)(u64)s.state;
}

// csa_view_at finds the view holding row t of the step's rows (keep > 0: each
// sequence's last keep rows, packed): prelude.h seq_view_at (a scan of 256 sequences
// for each (row, key) item took a share of the V4.1 indexer's and key lookup's time at
// batch 256 in run 17).
DEV bool csa_view_at(const SeqRec* seqs, i64 nseq, i64 keep, i64 t, csa_View* v) {
  i64 r = 0, n = 0;
  const i64 q = seq_view_at(seqs, nseq, keep, t, &r, &n);
  if (q < 0) return false;
  csa_view_of(seqs[q], r, n, v);
  return true;
}

// ---- RMSNorm, RoPE, gonum's sgemm dot ----

struct csa_SqRow {
  const float* p;
  DEVM float operator()(i64 k) const { return p[k] * p[k]; }
};
struct csa_BF16Row {
  const float* p;
  DEVM float operator()(i64 k) const { return q_bf16(p[k]); }
};

// csa_rms_row is the cpu's rmsRow: fp32 statistics in ATen's order, the weight, bf16.
// y may be x.
// CSA_NORM_ROUND: the normalized values' bf16 rounding (the fiber harness leaves it out,
// so that a change in the sum's last bit shows).
#ifndef CSA_NORM_ROUND
#define CSA_NORM_ROUND q_bf16
#endif
DEV void csa_rms_row(const float* x, const Weight& w, float* y, i64 n, double eps) {
  csa_SqRow sq = {x};
  float rs = 1.0f / (float)sqrt((double)(cascade_sum(sq, n) / (float)n + (float)eps));
  for (i64 i = 0; i < n; i++) y[i] = CSA_NORM_ROUND(x[i] * rs * wval(w, 0, i));
}

// csa_rope_tables is ropeSpec.tables for one position (the forward rotation); inv holds
// the frequencies (float32 values when fp32).
DEV void csa_rope_pair(i64 fp32, double af, const double* inv, i64 pos, i64 i, double* cs, double* sn) {
  if (fp32) {
    float ang = (float)pos * (float)inv[i];
    *cs = cos((double)ang);
    *sn = sin((double)ang);
  } else {
    double ang = (double)pos * inv[i];
    *cs = cos(ang) * af;
    *sn = sin(ang) * af;
  }
}
DEV void csa_rope_tables(i64 rope_dim, i64 fp32, double af, const double* inv, i64 pos, double* cs, double* sn) {
  for (i64 i = 0; i < rope_dim / 2; i++) csa_rope_pair(fp32, af, inv, pos, i, &cs[i], &sn[i]);
}

// csa_rope_apply is ropeSpec.apply: every head of a row of n values.
DEV void csa_rope_apply(float* row, i64 n, i64 head_dim, i64 rope_dim, const double* cs, const double* sn) {
  i64 off = head_dim - rope_dim;
  for (i64 h = 0; h + head_dim <= n; h += head_dim) {
    float* x = row + h + off;
    for (i64 i = 0; i < rope_dim / 2; i++) {
      double x0 = (double)x[2 * i], x1 = (double)x[2 * i + 1];
      x[2 * i] = (float)(x0 * cs[i] - x1 * sn[i]);
      x[2 * i + 1] = (float)(x1 * cs[i] + x0 * sn[i]);
    }
  }
}

// csa_gonum_dot is gonum's f32.DotUnitary (amd64 SSE) over n values from k0: 4-lane
// SUM and P_SUM vectors over 16-value chunks, SUM += P_SUM, 4-value then 1-value tails
// into SUM, then two horizontal adds. y0 is the element offset of y's first value from
// a 16-byte aligned base (the leading values up to alignment go to lane 0 first).
template <class X, class W>
DEVM float csa_gonum_dot(X x, W y, i64 k0, i64 n, i64 y0) {
  float s[4] = {0, 0, 0, 0}, ps[4] = {0, 0, 0, 0};
  i64 i = k0, len = n;
  i64 mis = (y0 * 4) & 15;
  if (mis != 0) {
    for (i64 t = 0; t < (16 - mis) / 4 && len > 0; t++) {
      s[0] += x(i) * y(i);
      i++;
      len--;
    }
    if (len == 0) return (s[0] + s[1]) + (s[2] + s[3]);
  }
  i64 tail = len % 16, blocks = len / 16;
  for (i64 b = 0; b < blocks; b++) {
    for (int l = 0; l < 4; l++) s[l] += x(i + l) * y(i + l);
    for (int l = 0; l < 4; l++) ps[l] += x(i + 4 + l) * y(i + 4 + l);
    for (int l = 0; l < 4; l++) s[l] += x(i + 8 + l) * y(i + 8 + l);
    for (int l = 0; l < 4; l++) ps[l] += x(i + 12 + l) * y(i + 12 + l);
    i += 16;
  }
  if (blocks > 0)
    for (int l = 0; l < 4; l++) s[l] += ps[l];
  for (i64 b = 0; b < tail / 4; b++) {
    for (int l = 0; l < 4; l++) s[l] += x(i + l) * y(i + l);
    i += 4;
  }
  for (i64 b = 0; b < tail % 4; b++) {
    s[0] += x(i) * y(i);
    i++;
  }
  return (s[0] + s[1]) + (s[2] + s[3]);
}

// csa_gonum_par: the reduction in blocks of 64, for every shape (cpu: gemmNT, gonum's
// parallel order fixed for batch invariance).
DEV bool csa_gonum_par(i64 m, i64 n) { return true; }

// csa_gonum_nt is c[r, j] of gonum's Sgemm(NoTrans, Trans) with alpha 1, beta 0: x is row
// r of a, y row j of b (of K values; yrow0 the element offset of the row in b).
template <class X, class W>
DEVM float csa_gonum_nt(X x, W y, i64 K, i64 yrow0, bool par) {
  float c = 0;
  if (!par) return c + csa_gonum_dot(x, y, 0, K, yrow0);
  for (i64 k0 = 0; k0 < K; k0 += 64) c += csa_gonum_dot(x, y, k0, imin(64, K - k0), yrow0 + k0);
  return c;
}

// csa_chunk_rows is how many rows parallelFor gives the chunk holding row i of an n-row
// gemmRows (procs cores, work multiply-adds a row).
DEV i64 csa_chunk_rows(i64 n, i64 work, i64 procs, i64 i) {
  i64 p = procs < n ? procs : n;
  if (p <= 1 || n * work < (1 << 15)) return n;
  i64 chunk = (n + p - 1) / p;
  i64 lo = i / chunk * chunk;
  return imin(lo + chunk, n) - lo;
}

// ---- csa_compress ----

struct csa_CompressArgs {
  const float* x;
  Weight wkv, wgate, norm, wk, knorm;
  const SeqRec* seqs;
  i64 nseq, T;
  i64 D, d, idim, ratio;
  double eps;
  float* P;  // [T, d] projections
  float* G;  // [T, d] gates (ratio > 1)
  float* L;  // [T, d] pooled rows, then latents
  float* K;  // [T, idim] index keys
  i64 kv_off, kv_fmt, kv_group, kv_rows, kv_rowbytes;
  i64 ik_off, ik_fmt, ik_group, ik_rowbytes;
  i64 pend_off;
  i64 procs;
  i64 rope_dim, rope_fp32;
  double attn_factor;
  double inv[CSA_MAX_PAIRS];
  i64* err;
  float* part;   // the fast mode's pieces of the projections (csa_fast_proj_part)
  i64 lanes;     // pieces a projected value
  float* kpart;  // the fast mode's 64-wide blocks of the index keys (csa_fast_key_part)
  i64 kblocks;   // blocks a key value
};

// csa_compress_proj: the projections of every row (ratio 1: bf16(x)·wkv in gonum's
// order, then bf16; else fp32 wkv·x and wgate·x in MKL's order).
KERNEL(csa_compress_proj, csa_CompressArgs) {
  for (i64 it = GIDX; it < a.T * a.d; it += GSTRIDE) {
    i64 t = it / a.d, c = it % a.d;
    csa_View v;
    if (!csa_view_at(a.seqs, a.nseq, 0, t, &v)) continue;
    i64 i = t - v.row;
    const float* xt = a.x + t * a.D;
    WRow w = {a.wkv, c};
    if (a.ratio == 1) {
      csa_BF16Row xb = {xt};
      bool par = csa_gonum_par(csa_chunk_rows(v.n, a.d * a.D, a.procs, i), a.d);
      a.P[it] = q_bf16(csa_gonum_nt(xb, w, a.D, c * a.D, par));
    } else {
      FRow xr = {xt};
      WRow g = {a.wgate, c};
      i64 m = v.orows, r = v.orows == 1 ? 0 : i;
      a.P[it] = mkl_dot(xr, w, m, r, a.D, a.d);
      a.G[it] = mkl_dot(xr, g, m, r, a.D, a.d);
    }
  }
}

// csa_fast_proj_part and csa_fast_proj_sum (the fast mode): csa_compress_proj with the
// independent pieces of the cpu's order as work items — ratio 1: gonum's 64-wide blocks
// (csa_gonum_par: always blocked; lanes = D/64 rounded up), else mkl_dot's 16 lanes of
// the kv projection, then 16 of the gate (lanes = 32) — into part[t, c, lane]; then
// each value's pieces folded as csa_compress_proj sums them: its values bit for bit.
KERNEL(csa_fast_proj_part, csa_CompressArgs) {
  for (i64 it = GIDX; it < a.T * a.d * a.lanes; it += GSTRIDE) {
    i64 L = it % a.lanes, o = it / a.lanes, t = o / a.d, c = o % a.d;
    csa_View v;
    if (!csa_view_at(a.seqs, a.nseq, 0, t, &v)) continue;
    const float* xt = a.x + t * a.D;
    if (a.ratio == 1) {
      csa_BF16Row xb = {xt};
      WRow w = {a.wkv, c};
      i64 k0 = L * 64;
      a.part[it] = csa_gonum_dot(xb, w, k0, imin(64, a.D - k0), c * a.D + k0);
    } else {
      FRow xr = {xt};
      WRow w = {L < 16 ? a.wkv : a.wgate, c};
      a.part[it] = mkl_lane(xr, w, v.orows, a.D, a.d, (int)(L % 16));
    }
  }
}

KERNEL(csa_fast_proj_sum, csa_CompressArgs) {
  for (i64 it = GIDX; it < a.T * a.d; it += GSTRIDE) {
    i64 t = it / a.d, c = it % a.d;
    csa_View v;
    if (!csa_view_at(a.seqs, a.nseq, 0, t, &v)) continue;
    const float* p = a.part + it * a.lanes;
    if (a.ratio == 1) {
      float acc = 0;
      for (i64 L = 0; L < a.lanes; L++) acc += p[L];
      a.P[it] = q_bf16(acc);
    } else {
      FRow xr = {a.x + t * a.D};
      WRow w = {a.wkv, c}, g = {a.wgate, c};
      i64 m = v.orows, r = v.orows == 1 ? 0 : t - v.row;
      a.P[it] = mkl_fold(xr, w, m, r, a.D, a.d, p);
      a.G[it] = mkl_fold(xr, g, m, r, a.D, a.d, p + 16);
    }
  }
}

// csa_fast_proj_tile (ratio 1, the fast mode; D a multiple of 4): csa_compress_proj's
// projections with a launch block a tile of CSA_PT tokens × CSA_PC channels: the rows'
// 64-value blocks staged in shared memory one at a time (the next block's loads in
// flight while the products run), each thread 2 tokens × 4 channels, each block's value
// gonum's DotUnitary order (csa_gonum_dot: SUM and P_SUM vectors of 4 lanes, SUM +=
// P_SUM, the 4-value and 1-value tails into SUM, two horizontal adds), the blocks added
// in order from 0, then bf16 — csa_compress_proj's values bit for bit, the products
// read from shared memory instead of 64-float strides of global memory.
#define CSA_PT 16
#define CSA_PC 64
#define CSA_PS 68  // floats a staged row: a quarter warp's 8 channels on 8 bank groups
// CSA_PROJ_ROUND: the projections' bf16 rounding (the fiber harness leaves it out, so
// that its comparison sees every float32 bit of the sums)
#ifndef CSA_PROJ_ROUND
#define CSA_PROJ_ROUND q_bf16
#endif
#ifndef DI_EMULATE
// csa_proj_tile_sums: the tile's sums (tot[u][q]: token tg + 8u, channel c0 + cg + 16q)
// for weights stored as F: 1 bf16, 0 float32 — each block's loads issued together as
// raw bits (clamped addresses: no branch, and no value used before the next block's
// store, so the loads are in flight together while the products run) and widened when
// stored — or -1, any format through wval (a value widened as it arrives). Thread tid
// loads position tid % 64 of tile rows 2i + tid / 64 (the x rows first, then the
// weight rows).
template <int F>
DEVM void csa_proj_tile_sums(const csa_CompressArgs& a, const float* const* xr, float4* sm4, int tid, i64 c0, float (&tot)[2][4]) {
  float* sm = (float*)sm4;
  const int cg = tid & 15, tg = tid >> 4, kk = tid % 64, h = tid / 64;
  u32 rx[CSA_PT / 2], rw[CSA_PC / 2];
  auto load = [&](i64 kb) {
    const i64 k = imin(kb + kk, a.D - 1);
    UNROLL for (int i = 0; i < CSA_PT / 2; i++) {
      const float* p = xr[2 * i + h];
      rx[i] = bits_f32((p ? p : a.x)[k]);
    }
    UNROLL for (int i = 0; i < CSA_PC / 2; i++) {
      const i64 c = imin(c0 + 2 * i + h, a.d - 1);
      if (F == 1) rw[i] = ((const unsigned short*)a.wkv.p)[c * a.wkv.cols + k];
      else if (F == 0) rw[i] = bits_f32(((const float*)a.wkv.p)[c * a.wkv.cols + k]);
      else rw[i] = bits_f32(wval(a.wkv, c, k));
    }
  };
  load(0);
  for (i64 kb = 0; kb < a.D; kb += 64) {
    __syncthreads();  // the last block's products are done with sm
    const bool in = kb + kk < a.D;
    UNROLL for (int i = 0; i < CSA_PT / 2; i++)
      sm[(2 * i + h) * CSA_PS + kk] = in && xr[2 * i + h] ? q_bf16(f32_bits(rx[i])) : 0.0f;
    UNROLL for (int i = 0; i < CSA_PC / 2; i++) {
      const float v = F == 1 ? bf16_f32((unsigned short)rw[i]) : f32_bits(rw[i]);
      sm[(CSA_PT + 2 * i + h) * CSA_PS + kk] = in && c0 + 2 * i + h < a.d ? v : 0.0f;
    }
    __syncthreads();
    if (kb + 64 < a.D) load(kb + 64);
    const int n = (int)imin(64, a.D - kb), full = n / 16, tail = n % 16;
    float s[2][4][4], ps[2][4][4];
    UNROLL for (int u = 0; u < 2; u++) UNROLL for (int q = 0; q < 4; q++) UNROLL for (int l = 0; l < 4; l++)
      s[u][q][l] = 0, ps[u][q][l] = 0;
    // the products of 4 values at off into SUM (p = 0) or P_SUM (p = 1)
    auto four = [&](int off, int p) {
      float4 xv[2], wv[4];
      UNROLL for (int u = 0; u < 2; u++) xv[u] = sm4[((tg + 8 * u) * CSA_PS + off) / 4];
      UNROLL for (int q = 0; q < 4; q++) wv[q] = sm4[((CSA_PT + cg + 16 * q) * CSA_PS + off) / 4];
      UNROLL for (int u = 0; u < 2; u++) UNROLL for (int q = 0; q < 4; q++) {
        float* acc = p ? ps[u][q] : s[u][q];
        acc[0] += xv[u].x * wv[q].x;
        acc[1] += xv[u].y * wv[q].y;
        acc[2] += xv[u].z * wv[q].z;
        acc[3] += xv[u].w * wv[q].w;
      }
    };
    for (int gi = 0; gi < full; gi++) {
      four(16 * gi, 0);
      four(16 * gi + 4, 1);
      four(16 * gi + 8, 0);
      four(16 * gi + 12, 1);
    }
    if (full > 0)
      UNROLL for (int u = 0; u < 2; u++) UNROLL for (int q = 0; q < 4; q++) UNROLL for (int l = 0; l < 4; l++)
        s[u][q][l] += ps[u][q][l];
    for (int b4 = 0; b4 < tail / 4; b4++) four(16 * full + 4 * b4, 0);
    for (int i = 16 * full + tail / 4 * 4; i < n; i++)
      UNROLL for (int u = 0; u < 2; u++) UNROLL for (int q = 0; q < 4; q++)
        s[u][q][0] += sm[(tg + 8 * u) * CSA_PS + i] * sm[(CSA_PT + cg + 16 * q) * CSA_PS + i];
    UNROLL for (int u = 0; u < 2; u++) UNROLL for (int q = 0; q < 4; q++)
      tot[u][q] += (s[u][q][0] + s[u][q][1]) + (s[u][q][2] + s[u][q][3]);
  }
}
#endif
KERNEL(csa_fast_proj_tile, csa_CompressArgs) {
  const i64 nc = (a.d + CSA_PC - 1) / CSA_PC, blocks = (a.T + CSA_PT - 1) / CSA_PT * nc;
#ifdef DI_EMULATE
  (void)blocks;
  for (i64 it = GIDX; it < a.T * a.d; it += GSTRIDE) {
    const i64 t = it / a.d, c = it % a.d;
    csa_View v;
    if (!csa_view_at(a.seqs, a.nseq, 0, t, &v)) continue;
    csa_BF16Row xb = {a.x + t * a.D};
    WRow w = {a.wkv, c};
    a.P[it] = q_bf16(csa_gonum_nt(xb, w, a.D, c * a.D, true));
  }
#else
  (void)GSTRIDE;
  __shared__ float4 sm4[(CSA_PT + CSA_PC) * CSA_PS / 4];
  __shared__ const float* xr[CSA_PT];
  const i64 b = GIDX / 128;
  const int tid = (int)(GIDX % 128), cg = tid & 15, tg = tid >> 4;
  if (b >= blocks) return;  // the whole block
  const i64 t0 = b / nc * CSA_PT, c0 = b % nc * CSA_PC;
  if (tid < CSA_PT) {
    csa_View v;
    xr[tid] = t0 + tid < a.T && csa_view_at(a.seqs, a.nseq, 0, t0 + tid, &v) ? a.x + (t0 + tid) * a.D : nullptr;
  }
  __syncthreads();
  float tot[2][4];
  UNROLL for (int u = 0; u < 2; u++) UNROLL for (int q = 0; q < 4; q++) tot[u][q] = 0;
  if (a.D % 4 != 0) {  // unaligned rows: gonum's leading values (not a shape V4.1 has)
    UNROLL for (int u = 0; u < 2; u++) {
      const float* p = xr[tg + 8 * u];
      UNROLL for (int q = 0; q < 4; q++) {
        const i64 c = c0 + cg + 16 * q;
        if (!p || c >= a.d) continue;
        csa_BF16Row xb = {p};
        WRow w = {a.wkv, c};
        tot[u][q] = csa_gonum_nt(xb, w, a.D, c * a.D, true);
      }
    }
  } else if (a.wkv.fmt == 1) {
    csa_proj_tile_sums<1>(a, xr, sm4, tid, c0, tot);
  } else if (a.wkv.fmt == 0) {
    csa_proj_tile_sums<0>(a, xr, sm4, tid, c0, tot);
  } else {
    csa_proj_tile_sums<-1>(a, xr, sm4, tid, c0, tot);
  }
  UNROLL for (int u = 0; u < 2; u++) UNROLL for (int q = 0; q < 4; q++) {
    const i64 t = t0 + tg + 8 * u, c = c0 + cg + 16 * q;
    if (xr[tg + 8 * u] && c < a.d) a.P[t * a.d + c] = CSA_PROJ_ROUND(tot[u][q]);
  }
#endif
}

// csa_group_row is channel c of the kv projection and gate of position q of the group
// closing at row v.row+i: from this step's rows, or the open group kept in the state.
DEV void csa_group_row(const csa_CompressArgs& a, const csa_View& v, i64 q, i64 c, float* kv, float* gate) {
  if (q >= v.pos) {
    i64 t = v.row + (q - v.pos);
    *kv = a.P[t * a.d + c];
    *gate = a.G[t * a.d + c];
    return;
  }
  const float* pend = (const float*)(v.state + a.pend_off);
  i64 s = q % a.ratio;
  *kv = pend[s * a.d + c];
  *gate = pend[(a.ratio + s) * a.d + c];
}

// csa_compress_pool (ratio > 1): at each row closing a group, channel c pooled by a
// softmax of the gates over the group's rows (float64), bf16.
KERNEL(csa_compress_pool, csa_CompressArgs) {
  for (i64 it = GIDX; it < a.T * a.d; it += GSTRIDE) {
    i64 t = it / a.d, c = it % a.d;
    csa_View v;
    if (!csa_view_at(a.seqs, a.nseq, 0, t, &v)) continue;
    i64 p = v.pos + (t - v.row);
    if ((p + 1) % a.ratio != 0) continue;
    i64 g0 = p + 1 - a.ratio;
    double mx = -F64_INF;
    float kv, gate;
    for (i64 j = 0; j < a.ratio; j++) {
      csa_group_row(a, v, g0 + j, c, &kv, &gate);
      mx = go_max64(mx, (double)gate);
    }
    double den = 0, num = 0;
    for (i64 j = 0; j < a.ratio; j++) {
      csa_group_row(a, v, g0 + j, c, &kv, &gate);
      double e = exp((double)gate - mx);
      den += e;
      num += e * (double)kv;
    }
    a.L[it] = q_bf16((float)(num / den));
  }
}

// csa_entry_closes is whether row t closes a group (and its view).
DEV bool csa_entry_closes(const csa_CompressArgs& a, i64 t, csa_View* v) {
  if (!csa_view_at(a.seqs, a.nseq, 0, t, v)) return false;
  i64 p = v->pos + (t - v->row);
  return (p + 1) % a.ratio == 0 && (p + 1) / a.ratio - 1 < a.kv_rows;
}

// csa_fast_entry_norm, csa_fast_key_part and csa_fast_key_sum (the fast mode, before
// csa_compress_entry): the latent's RMSNorm of each row closing a group; wk·latent's
// 64-wide gonum blocks (csa_gonum_par: always blocked) as work items, one (row, key
// value, block) each, into kpart[t, j, block]; each key value's blocks added in order
// (and rounded to bf16) into K. csa_compress_entry then takes the key from K instead
// of computing the products itself: the same values.
KERNEL(csa_fast_key_part, csa_CompressArgs) {
  for (i64 i = GIDX; i < a.T * a.idim * a.kblocks; i += GSTRIDE) {
    i64 blk = i % a.kblocks, j = i / a.kblocks % a.idim, t = i / (a.kblocks * a.idim);
    csa_View v;
    if (!csa_entry_closes(a, t, &v)) continue;
    FRow lr = {a.L + t * a.d};
    WRow w = {a.wk, j};
    i64 k0 = blk * 64;
    a.kpart[i] = csa_gonum_dot(lr, w, k0, imin(64, a.d - k0), j * a.d + k0);
  }
}

KERNEL(csa_fast_key_sum, csa_CompressArgs) {
  for (i64 i = GIDX; i < a.T * a.idim; i += GSTRIDE) {
    csa_View v;
    if (!csa_entry_closes(a, i / a.idim, &v)) continue;
    const float* kp = a.kpart + i * a.kblocks;
    float c = 0;
    for (i64 blk = 0; blk < a.kblocks; blk++) c += kp[blk];
    a.K[i] = q_bf16(c);
  }
}

// csa_entry_at: row t's view and, when its position closes a group, the group's first
// position and entry (an entry past the cache is error 401); false otherwise.
DEV bool csa_entry_at(const csa_CompressArgs& a, i64 t, csa_View* v, i64* gpos, i64* e) {
  if (!csa_view_at(a.seqs, a.nseq, 0, t, v)) return false;
  i64 p = v->pos + (t - v->row);
  if ((p + 1) % a.ratio != 0) return false;
  *gpos = p + 1 - a.ratio, *e = *gpos / a.ratio;
  if (*e >= a.kv_rows) {
    *a.err = 401;
    return false;
  }
  return true;
}

// csa_entry_row: csa_compress_entry's work for row t on one thread.
DEV void csa_entry_row(const csa_CompressArgs& a, i64 t) {
  csa_View v;
  i64 gpos, e;
  if (!csa_entry_at(a, t, &v, &gpos, &e)) return;
  float* lat = a.L + t * a.d;
  if (!a.kpart) csa_rms_row(a.ratio == 1 ? a.P + t * a.d : lat, a.norm, lat, a.d, a.eps);
  double cs[CSA_MAX_PAIRS], sn[CSA_MAX_PAIRS];
  csa_rope_tables(a.rope_dim, a.rope_fp32, a.attn_factor, a.inv, gpos, cs, sn);
  if (a.idim > 0) {
    float* key = a.K + t * a.idim;
    FRow lr = {lat};
    bool par = csa_gonum_par(1, a.idim);
    for (i64 j = 0; j < a.idim && !a.kpart; j++) {
      WRow w = {a.wk, j};
      key[j] = q_bf16(csa_gonum_nt(lr, w, a.d, j * a.d, par));
    }
    csa_rms_row(key, a.knorm, key, a.idim, a.eps);
    csa_rope_apply(key, a.idim, a.idim, a.rope_dim, cs, sn);
    for (i64 j = 0; j < a.idim; j++) key[j] = q_bf16(key[j]);
    csa_pack_row(key, a.ik_fmt, a.ik_group, a.idim, v.state + a.ik_off + e * a.ik_rowbytes);
  }
  csa_rope_apply(lat, a.d, a.d, a.rope_dim, cs, sn);
  for (i64 j = 0; j < a.d; j++) lat[j] = q_bf16(lat[j]);
  csa_pack_row(lat, a.kv_fmt, a.kv_group, a.d, v.state + a.kv_off + e * a.kv_rowbytes);
}

#ifndef DI_EMULATE
// csa_rms_lanes is csa_rms_row on a warp: every lane folds the row's sum (the same
// cascade, the same value), then writes its values i ≡ lane (mod 32); y may be x.
DEV void csa_rms_lanes(const float* x, const Weight& w, float* y, i64 n, double eps, int lane) {
  csa_SqRow sq = {x};
  // the sum of squares' 32 cascade lanes a lane each, then folded on every lane: the
  // serial cascade_sum's value (numerics.h), its chain a 32nd as long
  const float mine = cascade_lane(sq, n, lane >> 3, lane & 7);
  float parts[32];
  UNROLL for (int j = 0; j < 32; j++) parts[j] = __shfl_sync(0xffffffffu, mine, j);
  float rs = 1.0f / (float)sqrt((double)(cascade_fold(sq, n, parts) / (float)n + (float)eps));
  __syncwarp();  // every lane has read x before any writes y
  for (i64 i = lane; i < n; i += 32) y[i] = CSA_NORM_ROUND(x[i] * rs * wval(w, 0, i));
  __syncwarp();
}

// csa_rope_lanes is csa_rope_apply for one head of n values on a warp (pair i on lane
// i mod 32, its angle's tables computed there), then every value rounded to bf16.
DEV void csa_rope_lanes(float* x, i64 n, const csa_CompressArgs& a, i64 pos, int lane) {
  float* r = x + n - a.rope_dim;
  for (i64 i = lane; i < a.rope_dim / 2; i += 32) {
    double cs, sn;
    csa_rope_pair(a.rope_fp32, a.attn_factor, a.inv, pos, i, &cs, &sn);
    double x0 = (double)r[2 * i], x1 = (double)r[2 * i + 1];
    r[2 * i] = (float)(x0 * cs - x1 * sn);
    r[2 * i + 1] = (float)(x1 * cs + x0 * sn);
  }
  __syncwarp();
  for (i64 j = lane; j < n; j += 32) x[j] = q_bf16(x[j]);
  __syncwarp();
}

// csa_pack_lanes is csa_pack_row on a warp: group gi on lane gi mod 32 (a group's code
// bytes and scale byte are its own).
DEV void csa_pack_lanes(const float* x, i64 fmt, i64 g, i64 dim, unsigned char* dst, int lane) {
  if (fmt == 0) g = dim;
  for (i64 gi = lane; gi * g < dim; gi += 32) csa_pack_group(x, fmt, g, dim, gi, dst);
}
#endif

// csa_fast_entry_norm (described above with csa_fast_key_part): a warp a row
// (csa_rms_lanes; it ran a thread a row, its 512 values' sum and products one dependent
// load after another: 86 µs at batch 1 in run 29b's profile); the emulated device runs
// the row on one thread.
KERNEL(csa_fast_entry_norm, csa_CompressArgs) {
#ifdef DI_EMULATE
  for (i64 t = GIDX; t < a.T; t += GSTRIDE) {
    csa_View v;
    if (!csa_entry_closes(a, t, &v)) continue;
    float* lat = a.L + t * a.d;
    csa_rms_row(a.ratio == 1 ? a.P + t * a.d : lat, a.norm, lat, a.d, a.eps);
  }
#else
  const int lane = (int)(GIDX & 31);
  for (i64 t = GIDX >> 5; t < a.T; t += GSTRIDE >> 5) {
    csa_View v;
    if (!csa_entry_closes(a, t, &v)) continue;  // the same for the warp's lanes
    float* lat = a.L + t * a.d;
    csa_rms_lanes(a.ratio == 1 ? a.P + t * a.d : lat, a.norm, lat, a.d, a.eps, lane);
  }
#endif
}

// csa_compress_entry: each closed group's latent (RMSNorm), its index key (k_norm of
// wk·latent in gonum's order, RoPE'd, bf16) and the RoPE'd latent, stored packed. With
// kpart (the fast mode) the latent is normalized and the key's products are in K
// already (csa_fast_entry_norm, csa_fast_key_part, csa_fast_key_sum). A warp a row (32
// work items): the key's products a value a lane, the norms' sums on every lane, a RoPE
// pair a lane, a packed group a lane — each value the same operations as on one thread
// (csa_entry_row, which the emulated device runs; TestTilesDeviceCodeOnHostFibers
// compares the two).
KERNEL(csa_compress_entry, csa_CompressArgs) {
#ifdef DI_EMULATE
  for (i64 t = GIDX; t < a.T; t += GSTRIDE) csa_entry_row(a, t);
#else
  const int lane = (int)(GIDX & 31);
  for (i64 t = GIDX >> 5; t < a.T; t += GSTRIDE >> 5) {
    csa_View v;
    i64 gpos, e;
    if (!csa_entry_at(a, t, &v, &gpos, &e)) continue;  // the same for the warp's lanes
    float* lat = a.L + t * a.d;
    if (!a.kpart) csa_rms_lanes(a.ratio == 1 ? a.P + t * a.d : lat, a.norm, lat, a.d, a.eps, lane);
    if (a.idim > 0) {
      float* key = a.K + t * a.idim;
      if (!a.kpart) {
        FRow lr = {lat};
        bool par = csa_gonum_par(1, a.idim);
        for (i64 j = lane; j < a.idim; j += 32) {
          WRow w = {a.wk, j};
          key[j] = q_bf16(csa_gonum_nt(lr, w, a.d, j * a.d, par));
        }
        __syncwarp();
      }
      csa_rms_lanes(key, a.knorm, key, a.idim, a.eps, lane);
      csa_rope_lanes(key, a.idim, a, gpos, lane);
      csa_pack_lanes(key, a.ik_fmt, a.ik_group, a.idim, v.state + a.ik_off + e * a.ik_rowbytes, lane);
    }
    csa_rope_lanes(lat, a.d, a, gpos, lane);
    csa_pack_lanes(lat, a.kv_fmt, a.kv_group, a.d, v.state + a.kv_off + e * a.kv_rowbytes, lane);
    __syncwarp();
  }
#endif
}

// csa_compress_pend (ratio > 1): the rows of the group still open after the step go to
// the state.
KERNEL(csa_compress_pend, csa_CompressArgs) {
  for (i64 it = GIDX; it < a.T * a.d; it += GSTRIDE) {
    i64 t = it / a.d, c = it % a.d;
    csa_View v;
    if (!csa_view_at(a.seqs, a.nseq, 0, t, &v)) continue;
    i64 p = v.pos + (t - v.row), end = v.pos + v.n;
    if (p < end / a.ratio * a.ratio) continue;
    float* pend = (float*)(v.state + a.pend_off);
    i64 s = p % a.ratio;
    pend[s * a.d + c] = a.P[it];
    pend[(a.ratio + s) * a.d + c] = a.G[it];
  }
}

// ---- torch.topk on the CPU (cpu: torchTopK, libstdc++'s introselect / heap select) ----

struct csa_TopkElem {
  float v;
  int i;
};

DEV bool csa_before(csa_TopkElem a, csa_TopkElem b) {
  bool an = isnan32(a.v), bn = isnan32(b.v);
  return (an && !bn) || a.v > b.v;
}

DEV int csa_floor_log2(i64 n) {
  int l = 0;
  while (n > 1) {
    n >>= 1;
    l++;
  }
  return l;
}

DEV void csa_adjust_heap(csa_TopkElem* q, i64 hole, i64 n, csa_TopkElem v) {
  i64 top = hole, child = hole;
  while (child < (n - 1) / 2) {
    child = 2 * (child + 1);
    if (csa_before(q[child], q[child - 1])) child--;
    q[hole] = q[child];
    hole = child;
  }
  if ((n & 1) == 0 && child == (n - 2) / 2) {
    child = 2 * (child + 1);
    q[hole] = q[child - 1];
    hole = child - 1;
  }
  i64 parent = (hole - 1) / 2;
  while (hole > top && csa_before(q[parent], v)) {
    q[hole] = q[parent];
    hole = parent;
    parent = (hole - 1) / 2;
  }
  q[hole] = v;
}

DEV void csa_make_heap(csa_TopkElem* q, i64 n) {
  if (n < 2) return;
  for (i64 parent = (n - 2) / 2;; parent--) {
    csa_adjust_heap(q, parent, n, q[parent]);
    if (parent == 0) return;
  }
}

DEV void csa_heap_select(csa_TopkElem* q, i64 len, i64 mid) {
  csa_make_heap(q, mid);
  for (i64 i = mid; i < len; i++) {
    if (csa_before(q[i], q[0])) {
      csa_TopkElem v = q[i];
      q[i] = q[0];
      csa_adjust_heap(q, 0, mid, v);
    }
  }
}

DEV void csa_sort_heap(csa_TopkElem* q, i64 n) {
  for (; n > 1; n--) {
    csa_TopkElem v = q[n - 1];
    q[n - 1] = q[0];
    csa_adjust_heap(q, 0, n - 1, v);
  }
}

DEV void csa_insertion_sort(csa_TopkElem* q, i64 len) {
  for (i64 i = 1; i < len; i++) {
    csa_TopkElem v = q[i];
    if (csa_before(v, q[0])) {
      for (i64 j = i; j > 0; j--) q[j] = q[j - 1];
      q[0] = v;
      continue;
    }
    i64 j = i;
    while (csa_before(v, q[j - 1])) {
      q[j] = q[j - 1];
      j--;
    }
    q[j] = v;
  }
}

DEV void csa_swap(csa_TopkElem* q, i64 a, i64 b) {
  csa_TopkElem t = q[a];
  q[a] = q[b];
  q[b] = t;
}

DEV void csa_move_median_to_first(csa_TopkElem* q, i64 result, i64 a, i64 b, i64 c) {
  if (csa_before(q[a], q[b])) {
    if (csa_before(q[b], q[c])) csa_swap(q, result, b);
    else if (csa_before(q[a], q[c])) csa_swap(q, result, c);
    else csa_swap(q, result, a);
  } else if (csa_before(q[a], q[c])) csa_swap(q, result, a);
  else if (csa_before(q[b], q[c])) csa_swap(q, result, c);
  else csa_swap(q, result, b);
}

DEV i64 csa_unguarded_partition(csa_TopkElem* q, i64 first, i64 last, i64 pivot) {
  for (;;) {
    while (csa_before(q[first], q[pivot])) first++;
    last--;
    while (csa_before(q[pivot], q[last])) last--;
    if (first >= last) return first;
    csa_swap(q, first, last);
    first++;
  }
}

DEV void csa_introselect(csa_TopkElem* q, i64 first, i64 nth, i64 last, int depth) {
  while (last - first > 3) {
    if (depth == 0) {
      csa_heap_select(q + first, last - first, nth + 1 - first);
      csa_swap(q, first, nth);
      return;
    }
    depth--;
    i64 mid = first + (last - first) / 2;
    csa_move_median_to_first(q, first, first + 1, mid, last - 1);
    i64 cut = csa_unguarded_partition(q, first + 1, last, first);
    if (cut <= nth) first = cut;
    else last = cut;
  }
  csa_insertion_sort(q + first, last - first);
}

// csa_topk leaves in q[0:k) the elements torch.topk(vals, k) keeps, in its order; q
// holds the n (value, index) pairs. It returns min(k, n).
DEV i64 csa_topk(csa_TopkElem* q, i64 n, i64 k) {
  if (k > n) k = n;
  if (k == 0) return 0;
  if (k * 64 <= n) {
    csa_heap_select(q, n, k);
    csa_sort_heap(q, k);
  } else {
    csa_introselect(q, 0, k - 1, n, 2 * csa_floor_log2(n));
  }
  return k;
}

// csa_kept_list: out[0..outn) = the keys of q[0:kk) below lim in position order, -1
// past them (the cpu sorts the kept keys; they are distinct keys 0..width-1, so a byte
// per key in kept, read in order, gives the same list).
DEV void csa_kept_list(const csa_TopkElem* q, i64 kk, i64 width, i64 lim, unsigned char* kept, int* out, i64 outn) {
  for (i64 e = 0; e < width; e++) kept[e] = 0;
  for (i64 j = 0; j < kk; j++) kept[q[j].i] = 1;
  for (i64 j = 0; j < outn; j++) out[j] = -1;
  i64 n = 0;
  for (i64 e = 0; e < imin(width, lim); e++)
    if (kept[e]) out[n++] = (int)e;
}

// ---- the low rule's selection: a radix select, the lower position first among ties ----
//
// Under DEEPINFER_INDEX_TIES=low (targets.EnvIndexTies, both targets) csa_index_select
// keeps the k largest scores with ties at the cut broken by position (the lower one
// kept), the set torch.topk keeps on a CUDA device (its radix select gathers the values
// above the k-th, then the k-th's equals in index order; scripts/topk-ties.py), instead
// of reproducing libstdc++'s heap select on the CPU, a serial walk of each row (~0.4 ms
// a row of 32,768 keys on an H100, run 58). The kept set is the cpu rule's wherever the
// k-th largest score has no equal on the other side of the cut. q must be unpermuted
// (q[e].i == e), as csa_index_select's scores are.

// csa_order_key: a key whose unsigned order is csa_before's (the larger value first):
// every NaN highest and one key, +0 and -0 one key.
DEV u32 csa_order_key(float v) {
  if (isnan32(v)) return 0xffffffffu;
  u32 u = bits_f32(v);
  if ((u & 0x7fffffffu) == 0) u = 0;
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// csa_cut_pick: the digit bin (of 256, from the top) in which the r-th largest of the
// binned keys lies, given each bin's count in h; *above is how many lie in the bins
// above it.
DEV int csa_cut_pick(const i64* h, i64 r, i64* above) {
  i64 s = 0;
  int b = 255;
  while (b > 0 && s + h[b] < r) s += h[b--];
  *above = s;
  return b;
}

// csa_lowtie_kept: csa_kept_list's outputs for the low rule's selection of the k
// largest of q[0:n) (see above), serially.
DEV void csa_lowtie_kept(const csa_TopkElem* q, i64 n, i64 k, i64 lim, unsigned char* kept, int* out, i64 outn) {
  if (k > n) k = n;
  u32 prefix = 0, mask = 0;
  i64 r = k;  // still to take among the keys with the prefix
  for (int shift = 24; shift >= 0 && k > 0; shift -= 8) {
    i64 h[256];
    for (int b = 0; b < 256; b++) h[b] = 0;
    for (i64 e = 0; e < n; e++) {
      u32 x = csa_order_key(q[e].v);
      if ((x & mask) == prefix) h[(x >> shift) & 255]++;
    }
    i64 above;
    int b = csa_cut_pick(h, r, &above);
    r -= above;
    prefix |= (u32)b << shift;
    mask |= 255u << shift;
  }
  // the keys above the k-th's, then r of its equals, the lower positions first
  for (i64 e = 0; e < n; e++) {
    u32 x = csa_order_key(q[e].v);
    bool keep = k > 0 && (x > prefix || (x == prefix && r > 0));
    if (k > 0 && x == prefix && r > 0) r--;
    kept[q[e].i] = keep ? 1 : 0;
  }
  for (i64 j = 0; j < outn; j++) out[j] = -1;
  i64 m = 0;
  for (i64 e = 0; e < imin(n, lim); e++)
    if (kept[e]) out[m++] = (int)e;
}

// ---- the same selection on a launch block (the device's csa_index_select) ----
//
// csa_topk_blk leaves in q[0:k) exactly what csa_topk leaves there (the same array, step
// for step), with the launch block's ROW_SPREAD threads sharing the long passes:
//   - introselect's partitions of more than CSA_SERIAL_PART elements run in parallel
//     (csa_partition_blk, below); the median of three, the shorter partitions, the depth
//     limit's heap select and the final insertion sort run on thread 0, on the same array;
//   - the heap select (k·64 ≤ n) keeps its heap in shared memory and has the block mark,
//     a chunk at a time, the elements that sort before the chunk's first root: the root
//     only moves later in the order, so an unmarked element would not replace it either;
//     thread 0 walks the marked ones in order as the serial loop does.
// The emulated device runs csa_topk; TestTorchTopKBlock compares both with the cpu's
// torchTopK on arrays full of ties.
#define CSA_NW (ROW_SPREAD / 32)  // warps a block
#define CSA_PW 1024               // mask words: parallel partitions of up to 32,768 elements
#define CSA_SERIAL_PART 64        // partitions up to this many elements run on thread 0
#define CSA_HEAP_MAX 1024         // heaps up to this size live in shared memory
#define CSA_SCAN_WORDS 256        // the heap select marks up to 8,192 elements a chunk
#define CSA_SCAN_FIRST 16         // its first chunk: 512 elements

#ifndef DI_EMULATE
struct csa_BlkShared {
  u32 am[CSA_PW], bm[CSA_PW];  // a bit per element: a left stop, a right stop
  int apre[CSA_PW];            // left stops in the words before
  int bsuf[CSA_PW];            // right stops in the words after
  int scan[CSA_NW];
  long long cut;
  int pick;              // csa_lowtie_kept_blk: the cut's digit bin,
  long long pick_above;  // and how many of the binned keys lie above it
  // the heap select's heap, element j at heapx[j + 1]: the two children of element p
  // (2p + 1, 2p + 2) are one 16-byte word (csa_sift_root_sh)
  alignas(16) csa_TopkElem heapx[CSA_HEAP_MAX + 2];
};

// csa_sift_root_sh is csa_adjust_heap(h, 0, n, v) for a heap in the block's shared
// memory at hx + 1 (csa_BlkShared::heapx): the same moves, each level's two children read
// as one 16-byte word, places in 32 bits. The hole's way down is a chain of dependent
// levels, so the children of both candidates of the next level are loaded before this
// level's comparison (elements below the hole, which the sift has not written): the
// next level's load is under way while this one compares.
DEV float4 csa_heap_pair(const csa_TopkElem* hx, int p, int half) {
  // the children of element p (2p + 1, 2p + 2) where p has them, else a word not used
  return *(const float4*)(hx + (p < half ? 2 * (p + 1) : 0));
}

DEV void csa_sift_root_sh(csa_TopkElem* hx, int n, csa_TopkElem v) {
  int hole = 0;
  const int half = (n - 1) / 2;
  if (hole < half) {
    float4 a = csa_heap_pair(hx, 0, half);  // the hole's children
    while (true) {
      const int l = 2 * hole + 1, r = l + 1;
      const float4 bl = csa_heap_pair(hx, l, half), br = csa_heap_pair(hx, r, half);  // theirs
      const csa_TopkElem el{a.x, (int)bits_f32(a.y)}, er{a.z, (int)bits_f32(a.w)};
      const bool left = csa_before(er, el);
      hx[hole + 1] = left ? el : er;
      hole = left ? l : r;
      if (hole >= half) break;
      a = left ? bl : br;
    }
  }
  if ((n & 1) == 0 && hole == (n - 2) / 2) {
    const int child = 2 * (hole + 1);
    hx[hole + 1] = hx[child];
    hole = child - 1;
  }
  int parent = (hole - 1) / 2;
  while (hole > 0 && csa_before(hx[parent + 1], v)) {
    hx[hole + 1] = hx[parent + 1];
    hole = parent;
    parent = (hole - 1) / 2;
  }
  hx[hole + 1] = v;
}

// csa_blk_exscan: the sum of v over the threads before this one (thread order), and
// the block's total in *total. Every thread of the block calls it.
DEV int csa_blk_exscan(int v, int tid, csa_BlkShared& S, int* total) {
  int lane = tid & 31, w = tid >> 5, x = v;
  for (int o = 1; o < 32; o <<= 1) {
    int y = __shfl_up_sync(0xffffffffu, x, o);
    if (lane >= o) x += y;
  }
  if (lane == 31) S.scan[w] = x;
  __syncthreads();
  int base = 0, tot = 0;
  for (int i = 0; i < CSA_NW; i++) {
    int s = S.scan[i];
    if (i < w) base += s;
    tot += s;
  }
  __syncthreads();
  *total = tot;
  return base + x - v;
}

// csa_nth_bit: the place of the n-th (from 0) set bit of m, counted from bit 0.
DEV int csa_nth_bit(u32 m, int n) {
  for (int j = 0; j < n; j++) m &= m - 1;
  return __ffs(m) - 1;
}

// csa_partition_blk is csa_unguarded_partition(q, f0, l0, pv) on the block: the same
// swaps and the same cut. With P the pivot, call a position of [f0, l0) a left stop if
// its element does not sort before P, a right stop if P does not sort before it (an
// element equal to P is both); a_i the i-th left stop from f0 and b_i the i-th right
// stop from l0 - 1. The serial loop swaps a_i with b_i while a_i < b_i (m swaps): each
// scan walks untouched elements up to the next stop, or up to the element the other
// scan swapped in, which stops it. It returns a_1 when m = 0, else min(a_{m+1}, b_m)
// (b_m holds a left stop after the swap). Without a left or a right stop in the range
// the serial scans run past it; that case runs the serial loop on thread 0.
DEV i64 csa_partition_blk(csa_TopkElem* q, i64 f0, i64 l0, i64 pv, int tid, csa_BlkShared& S) {
  const i64 r = l0 - f0;
  const int nw = (int)((r + 31) / 32), lane = tid & 31, warp = tid >> 5;
  if (nw > CSA_PW) {
    if (tid == 0) S.cut = csa_unguarded_partition(q, f0, l0, pv);
    __syncthreads();
    return S.cut;
  }
  const csa_TopkElem P = q[pv];
  for (int w = warp; w < nw; w += CSA_NW) {
    i64 p = f0 + 32 * (i64)w + lane;
    bool A = false, B = false;
    if (p < l0) {
      csa_TopkElem x = q[p];
      A = !csa_before(x, P);
      B = !csa_before(P, x);
    }
    u32 am = __ballot_sync(0xffffffffu, A), bm = __ballot_sync(0xffffffffu, B);
    if (lane == 0) {
      S.am[w] = am;
      S.bm[w] = bm;
    }
  }
  __syncthreads();
  const int c = (nw + ROW_SPREAD - 1) / ROW_SPREAD, w0 = tid * c, w1 = w0 + c < nw ? w0 + c : nw;
  int ca = 0, cb = 0;
  for (int w = w0; w < w1; w++) {
    ca += __popc(S.am[w]);
    cb += __popc(S.bm[w]);
  }
  int na, nb;
  int abase = csa_blk_exscan(ca, tid, S, &na), bbase = csa_blk_exscan(cb, tid, S, &nb);
  for (int w = w0; w < w1; w++) {
    S.apre[w] = abase;
    abase += __popc(S.am[w]);
    bbase += __popc(S.bm[w]);
    S.bsuf[w] = nb - bbase;
  }
  __syncthreads();
  if (na == 0 || nb == 0) {
    if (tid == 0) S.cut = csa_unguarded_partition(q, f0, l0, pv);
    __syncthreads();
    return S.cut;
  }
  // m: the left stops with more right stops after them than left stops before them
  int cnt = 0;
  for (int w = w0; w < w1; w++) {
    u32 am = S.am[w], bm = S.bm[w], rest = am;
    while (rest) {
      int b = __ffs(rest) - 1;
      rest &= rest - 1;
      int ra = S.apre[w] + __popc(am & ((1u << b) - 1)), sb = S.bsuf[w] + __popc((bm >> b) >> 1);
      cnt += sb > ra;
    }
  }
  int m;
  csa_blk_exscan(cnt, tid, S, &m);
  auto leftStop = [&](int i) -> i64 {  // a_{i+1}
    int lo = 0, hi = nw - 1;
    while (lo < hi) {
      int mid = (lo + hi + 1) >> 1;
      if (S.apre[mid] <= i) lo = mid;
      else hi = mid - 1;
    }
    return f0 + 32 * (i64)lo + csa_nth_bit(S.am[lo], i - S.apre[lo]);
  };
  auto rightStop = [&](int i) -> i64 {  // b_{i+1}
    int lo = 0, hi = nw - 1;
    while (lo < hi) {
      int mid = (lo + hi) >> 1;
      if (S.bsuf[mid] <= i) hi = mid;
      else lo = mid + 1;
    }
    u32 bm = S.bm[lo];
    return f0 + 32 * (i64)lo + csa_nth_bit(bm, __popc(bm) - 1 - (i - S.bsuf[lo]));
  };
  if (tid == 0) {
    i64 cut;
    if (m == 0) {
      cut = leftStop(0);
    } else {
      cut = rightStop(m - 1);
      if (m < na) cut = imin(cut, leftStop(m));
    }
    S.cut = cut;
  }
  for (int i = tid; i < m; i += ROW_SPREAD) csa_swap(q, leftStop(i), rightStop(i));
  __syncthreads();
  return S.cut;
}

// The chunks grow from CSA_SCAN_FIRST words to CSA_SCAN_WORDS, doubling: the first
// root (the last of the first k elements in the order) lets nearly every element of the
// first chunk through, and each chunk's walk raises it, so short chunks early mark fewer
// elements for thread 0 (any chunking walks the same replacements in the same order).
// sort false leaves the heap unsorted in q[0:k) (the same elements: csa_index_select
// reads only which elements they are).
//
// With the heap in shared memory (k ≤ CSA_HEAP_MAX) thread 0 sifts with
// csa_sift_root_sh and loads the next marked element before sifting this one; sort false
// also leaves out the evicted roots' stores into q[k:n) (csa_index_select reads only
// q[0:k)).
DEV void csa_heap_select_blk(csa_TopkElem* q, i64 n, i64 k, int tid, csa_BlkShared& S, bool sort = true) {
  const bool shared = k <= CSA_HEAP_MAX;
  csa_TopkElem* h = shared ? S.heapx + 1 : q;
  const int lane = tid & 31, warp = tid >> 5;
  if (shared)
    for (i64 j = tid; j < k; j += ROW_SPREAD) h[j] = q[j];
  __syncthreads();
  if (tid == 0) csa_make_heap(h, k);
  __syncthreads();
  int cw = CSA_SCAN_FIRST;  // this chunk's words
  for (i64 c = k; c < n; c += 32 * cw, cw = cw < CSA_SCAN_WORDS ? 2 * cw : cw) {
    const csa_TopkElem root = h[0];
    const int nw = (int)imin(cw, (n - c + 31) / 32);
    for (int w = warp; w < nw; w += CSA_NW) {
      i64 i = c + 32 * (i64)w + lane;
      u32 mk = __ballot_sync(0xffffffffu, i < n && csa_before(q[i], root));
      if (lane == 0) S.am[w] = mk;
    }
    __syncthreads();
    if (tid == 0 && !shared) {
      for (int w = 0; w < nw; w++) {
        for (u32 mk = S.am[w]; mk; mk &= mk - 1) {
          i64 i = c + 32 * (i64)w + (__ffs(mk) - 1);
          if (csa_before(q[i], h[0])) {
            csa_TopkElem v = q[i];
            q[i] = h[0];
            csa_adjust_heap(h, 0, k, v);
          }
        }
      }
    } else if (tid == 0) {
      // the marked elements in order, each loaded one ahead of the sift before it
      csa_TopkElem* hx = S.heapx;
      const int kk = (int)k;
      int w = 0;
      u32 mk = nw > 0 ? S.am[0] : 0u;
      auto next = [&](int* off) -> bool {
        while (mk == 0) {
          if (++w >= nw) return false;
          mk = S.am[w];
        }
        *off = 32 * w + (__ffs(mk) - 1);
        mk &= mk - 1;
        return true;
      };
      int off = 0;
      bool have = next(&off);
      csa_TopkElem x = have ? q[c + off] : csa_TopkElem{};
      while (have) {
        int off2 = 0;
        const bool more = next(&off2);
        const csa_TopkElem y = more ? q[c + off2] : csa_TopkElem{};
        const csa_TopkElem top = hx[1];
        if (csa_before(x, top)) {
          if (sort) q[c + off] = top;
          csa_sift_root_sh(hx, kk, x);
        }
        off = off2, x = y, have = more;
      }
    }
    __syncthreads();
  }
  if (tid == 0 && sort) csa_sort_heap(h, k);
  __syncthreads();
  if (shared)
    for (i64 j = tid; j < k; j += ROW_SPREAD) q[j] = h[j];
  __syncthreads();
}

// (sort false: the heap select's k elements left unsorted, as csa_heap_select_blk's)
DEV i64 csa_topk_blk(csa_TopkElem* q, i64 n, i64 k, int tid, csa_BlkShared& S, bool sort = true) {
  if (k > n) k = n;
  if (k == 0) return 0;
  if (k * 64 <= n) {
    csa_heap_select_blk(q, n, k, tid, S, sort);
    return k;
  }
  i64 first = 0, last = n, nth = k - 1;
  int depth = 2 * csa_floor_log2(n);
  while (last - first > 3) {
    if (last - first <= CSA_SERIAL_PART || depth == 0) {
      // the serial loop from this state on (its heap select at depth 0)
      if (tid == 0) csa_introselect(q, first, nth, last, depth);
      __syncthreads();
      return k;
    }
    depth--;
    if (tid == 0) csa_move_median_to_first(q, first, first + 1, first + (last - first) / 2, last - 1);
    __syncthreads();
    i64 cut = csa_partition_blk(q, first + 1, last, first, tid, S);
    if (cut <= nth) first = cut;
    else last = cut;
  }
  if (tid == 0) csa_insertion_sort(q + first, last - first);
  __syncthreads();
  return k;
}

// csa_blk_compact writes val(j) for the j in [0, n) with keep(j), in order of j, to
// out[0..) and returns how many: each thread a contiguous chunk, counted, then written
// from its place.
template <class Keep, class Val>
DEV int csa_blk_compact(i64 n, int* out, int tid, csa_BlkShared& S, Keep keep, Val val) {
  const i64 c = (n + ROW_SPREAD - 1) / ROW_SPREAD, j0 = tid * c, j1 = imin(n, j0 + c);
  int cnt = 0, total;
  for (i64 j = j0; j < j1; j++) cnt += keep(j) ? 1 : 0;
  int at = csa_blk_exscan(cnt, tid, S, &total);
  for (i64 j = j0; j < j1; j++)
    if (keep(j)) out[at++] = val(j);
  return total;
}

// csa_kept_list_blk is csa_kept_list on the block.
DEV void csa_kept_list_blk(const csa_TopkElem* q, i64 kk, i64 width, i64 lim, unsigned char* kept, int* out, i64 outn,
                           int tid, csa_BlkShared& S) {
  for (i64 e = tid; e < width; e += ROW_SPREAD) kept[e] = 0;
  for (i64 j = tid; j < outn; j += ROW_SPREAD) out[j] = -1;
  __syncthreads();
  for (i64 j = tid; j < kk; j += ROW_SPREAD) kept[q[j].i] = 1;
  __syncthreads();
  csa_blk_compact(imin(width, lim), out, tid, S, [&](i64 e) { return kept[e] != 0; }, [&](i64 e) { return (int)e; });
  __syncthreads();
}

// csa_lowtie_kept_blk is csa_lowtie_kept on the block: each radix pass counts a digit
// into its warp's own 256 bins (S.am), the lanes holding one digit counted by their
// leader (a ballot per bit), and finds the cut's bin by a scan of the bins' counts from
// the top (256 / ROW_SPREAD bins a thread); then each thread marks a contiguous run of
// positions, its equals of the cut ranked by a scan of their counts, and the list is
// csa_blk_compact's.
#define CSA_CUT_BPT (256 / ROW_SPREAD)
#define CSA_CUT_U 8  // values a thread loads ahead
static_assert(256 % ROW_SPREAD == 0 && CSA_NW * 256 <= CSA_PW, "csa_lowtie_kept_blk's bins");
DEV void csa_lowtie_kept_blk(const csa_TopkElem* q, i64 n, i64 k, i64 lim, unsigned char* kept, int* out, i64 outn,
                             int tid, csa_BlkShared& S) {
  if (k > n) k = n;
  const int lane = tid & 31, warp = tid >> 5;
  for (i64 j = tid; j < outn; j += ROW_SPREAD) out[j] = -1;
  u32 prefix = 0, mask = 0;
  i64 r = k;  // still to take among the keys with the prefix
  for (int shift = 24; shift >= 0 && k > 0; shift -= 8) {
    for (int i = tid; i < CSA_NW * 256; i += ROW_SPREAD) S.am[i] = 0;
    __syncthreads();
    u32* h = S.am + warp * 256;
    for (i64 base = 0; base < n; base += ROW_SPREAD * CSA_CUT_U) {
      // CSA_CUT_U values a thread loaded before the first is counted: one launch block
      // a row has few warps to hide a load's latency behind
      float v[CSA_CUT_U];
      UNROLL for (int u = 0; u < CSA_CUT_U; u++) {
        const i64 e = base + u * ROW_SPREAD + tid;
        v[u] = e < n ? q[e].v : 0.0f;
      }
      UNROLL for (int u = 0; u < CSA_CUT_U; u++) {
        const i64 e = base + u * ROW_SPREAD + tid;
        const u32 x = csa_order_key(v[u]);
        const bool in = e < n && (x & mask) == prefix;
        const u32 d = (x >> shift) & 255u;
        u32 peers = __ballot_sync(0xffffffffu, in);
        for (int bit = 0; bit < 8; bit++) {
          const u32 m = __ballot_sync(0xffffffffu, (d >> bit) & 1u);
          peers &= (d >> bit) & 1u ? m : ~m;
        }
        if (in && __ffs(peers) - 1 == lane) atomicAdd(h + d, (u32)__popc(peers));
      }
    }
    __syncthreads();
    i64 c[CSA_CUT_BPT], tot = 0;
    for (int j = 0; j < CSA_CUT_BPT; j++) {
      const int b = 255 - CSA_CUT_BPT * tid - j;
      c[j] = 0;
      for (int w = 0; w < CSA_NW; w++) c[j] += S.am[w * 256 + b];
      tot += c[j];
    }
    int all;
    i64 s = csa_blk_exscan((int)tot, tid, S, &all);
    for (int j = 0; j < CSA_CUT_BPT; j++) {
      if (s < r && s + c[j] >= r) {
        S.pick = 255 - CSA_CUT_BPT * tid - j;
        S.pick_above = s;
      }
      s += c[j];
    }
    __syncthreads();
    r -= S.pick_above;
    prefix |= (u32)S.pick << shift;
    mask |= 255u << shift;
  }
  // the keys above the k-th's, then r of its equals, the lower positions first
  const i64 c = (n + ROW_SPREAD - 1) / ROW_SPREAD, j0 = imin(n, tid * c), j1 = imin(n, j0 + c);
  // (the run's elements CSA_CUT_U at a time, loaded before they are used)
  int eq = 0;
  if (k > 0)
    for (i64 e0 = j0; e0 < j1; e0 += CSA_CUT_U) {
      float v[CSA_CUT_U];
      UNROLL for (int u = 0; u < CSA_CUT_U; u++) v[u] = e0 + u < j1 ? q[e0 + u].v : 0.0f;
      UNROLL for (int u = 0; u < CSA_CUT_U; u++) eq += e0 + u < j1 && csa_order_key(v[u]) == prefix ? 1 : 0;
    }
  int all;
  i64 left = r - csa_blk_exscan(eq, tid, S, &all);
  for (i64 e0 = j0; e0 < j1; e0 += CSA_CUT_U) {
    csa_TopkElem w[CSA_CUT_U];
    UNROLL for (int u = 0; u < CSA_CUT_U; u++) w[u] = e0 + u < j1 ? q[e0 + u] : csa_TopkElem{0.0f, 0};
    UNROLL for (int u = 0; u < CSA_CUT_U; u++) {
      if (e0 + u >= j1) continue;
      const u32 x = csa_order_key(w[u].v);
      kept[w[u].i] = k > 0 && (x > prefix || (x == prefix && left-- > 0)) ? 1 : 0;
    }
  }
  __syncthreads();
  // the kept keys below lim in order (csa_kept_list_blk's last step)
  csa_blk_compact(imin(n, lim), out, tid, S, [&](i64 e) { return kept[e] != 0; }, [&](i64 e) { return (int)e; });
  __syncthreads();
}
#endif

// csa_topk_probe: csa_topk over rows of n (value, index) pairs, then the kept keys
// below lim in position order (k slots a row), as csa_index_select runs them (a row a
// launch block on the device), for the tests.
struct csa_TopkProbeArgs {
  csa_TopkElem* q;
  unsigned char* kept;  // [rows, n]
  int* out;             // [rows, k]
  i64 rows, n, k, lim;
};
template <bool SORT, bool LOWTIE = false>
DEVM void csa_topk_probe_body(const csa_TopkProbeArgs& a, i64 GIDX, i64 GSTRIDE) {
#ifdef DI_EMULATE
  for (i64 t = GIDX; t < a.rows; t += GSTRIDE) {
    csa_TopkElem* q = a.q + t * a.n;
    if (LOWTIE) {
      csa_lowtie_kept(q, a.n, a.k, a.lim, a.kept + t * a.n, a.out + t * a.k, a.k);
      continue;
    }
    i64 kk = csa_topk(q, a.n, a.k);
    csa_kept_list(q, kk, a.n, a.lim, a.kept + t * a.n, a.out + t * a.k, a.k);
  }
#else
  __shared__ csa_BlkShared S;
  const int tid = (int)(GIDX % ROW_SPREAD);
  for (i64 t = GIDX / ROW_SPREAD; t < a.rows; t += GSTRIDE / ROW_SPREAD) {
    csa_TopkElem* q = a.q + t * a.n;
    if (LOWTIE) {
      csa_lowtie_kept_blk(q, a.n, a.k, a.lim, a.kept + t * a.n, a.out + t * a.k, a.k, tid, S);
      continue;
    }
    i64 kk = csa_topk_blk(q, a.n, a.k, tid, S, SORT);
    csa_kept_list_blk(q, kk, a.n, a.lim, a.kept + t * a.n, a.out + t * a.k, a.k, tid, S);
  }
#endif
}
KERNEL(csa_topk_probe, csa_TopkProbeArgs) { csa_topk_probe_body<true>(a, GIDX, GSTRIDE); }
// csa_topk_probe_u: the same with the heap select's elements left unsorted, as
// csa_index_select runs it (the same kept keys and lists)
KERNEL(csa_topk_probe_u, csa_TopkProbeArgs) { csa_topk_probe_body<false>(a, GIDX, GSTRIDE); }
// csa_topk_probe_t: the low rule's selection (csa_lowtie_kept; q left as it is)
KERNEL(csa_topk_probe_t, csa_TopkProbeArgs) { csa_topk_probe_body<false, true>(a, GIDX, GSTRIDE); }

// ---- csa_index, csa_index_candidates ----

struct csa_IndexArgs {
  const float* q;
  const float* w;
  const int* cand_in;
  int* idx_out;
  int* cand_out;
  const SeqRec* seqs;
  i64 nseq, rows, keep;
  i64 layer, source, ratio, topk, heads, dim;
  double scale;
  i64 cand_blocks, cand_size, publish;
  csa_TopkElem* work;   // [rows, ecap]: (score, key) pairs
  csa_TopkElem* bwork;  // [rows, nbcap]
  i64 ecap, nbcap;
  i64 ik_fmt, ik_group, ik_rowbytes;
  i64 nowners;
  i64 owners[3 * CSA_MAX_OWNERS];  // (layer, ratio, state offset) of each index-key owner, by layer
  i64* err;
  unsigned char* cmark;  // [rows, nbcap]: the candidate blocks a restricted row may use
  unsigned char* kept;   // [rows, ecap]: csa_index_select's kept keys, a byte per key
  i64 lowtie;            // csa_index_select: DEEPINFER_INDEX_TIES=low (csa_lowtie_kept)
};

// csa_cand_clear and csa_cand_mark turn each row's candidate list into a byte per block,
// so that the restriction asks "is e's block a candidate" in one read.
KERNEL(csa_cand_clear, csa_IndexArgs) {
  for (i64 i = GIDX; i < a.rows * a.nbcap; i += GSTRIDE) a.cmark[i] = 0;
}
KERNEL(csa_cand_mark, csa_IndexArgs) {
  for (i64 i = GIDX; i < a.rows * a.cand_blocks; i += GSTRIDE) {
    i64 t = i / a.cand_blocks;
    int c = a.cand_in[i];
    if (c >= 0 && c < a.nbcap) a.cmark[t * a.nbcap + c] = 1;
  }
}

DEV bool csa_emits(const csa_IndexArgs& a, i64 k, i64 p) {
  i64 r = a.owners[3 * k + 1];
  return r > 0 && (p + 1) % r == 0;
}

// csa_index_owner is the owner (index into owners, -1 for none) whose keys row p of view
// v scores: the layer's source, or on a decode step the keys last published
// (cpu: publishedKeys).
DEV i64 csa_index_owner(const csa_IndexArgs& a, const csa_View& v, i64 p) {
  i64 src = a.source;
  if (v.decode) {
    src = -1;
    for (i64 k = a.nowners - 1; k >= 0 && src < 0; k--)
      if (a.owners[3 * k] <= a.layer && csa_emits(a, k, p)) src = a.owners[3 * k];
    for (i64 k = a.nowners - 1; k >= 0 && src < 0; k--)
      if (csa_emits(a, k, p - 1)) src = a.owners[3 * k];
    if (src < 0) src = a.layer;
  }
  for (i64 k = 0; k < a.nowners; k++)
    if (a.owners[3 * k] == src) return k;
  return -1;
}

// csa_owner_entries is how many index keys owner k holds when this layer's indexer runs:
// an owner up to this layer has compressed the step's rows.
DEV i64 csa_owner_entries(const csa_IndexArgs& a, i64 k, const csa_View& v) {
  i64 end = a.owners[3 * k] <= a.layer ? v.spos + v.sn : v.spos;
  return end / a.owners[3 * k + 1];
}

DEV void csa_index_widths(const csa_IndexArgs& a, const csa_View& v, i64 p, i64* width, i64* clen) {
  *width = v.fromZero ? (v.pos + v.n) / a.ratio : (p + 1) / a.ratio;
  *clen = (p + 1) / a.ratio;
}

#define CSA_IHB 16
// CSA_IX_ROUND: the index score's bf16 roundings (a test harness may define it as the
// value itself, so that a last-bit difference in a dot shows)
#ifndef CSA_IX_ROUND
#define CSA_IX_ROUND(v) q_bf16(v)
#endif
// csa_index_row: row t's view, position, widths and index-key owner k for the scores;
// false for a row nothing is scored for (csa_index_select reports why).
DEV bool csa_index_row(const csa_IndexArgs& a, i64 t, csa_View* v, i64* width, i64* clen, i64* k) {
  if (!csa_view_at(a.seqs, a.nseq, a.keep, t, v)) return false;
  i64 p = v->pos + (t - v->row);
  csa_index_widths(a, *v, p, width, clen);
  *k = csa_index_owner(a, *v, p);
  return *k >= 0 && *width <= csa_owner_entries(a, *k, *v) && *width <= a.ecap;
}
// csa_index_key: entry e of row t's scores (row t found by csa_index_row: width
// entries, clen closed, index-key owner k) marked with its key, and its index key's
// stored row; null where the entry takes no score (past the row's entries, left as it
// is; or past the closed ones, scored −inf).
DEV const unsigned char* csa_index_key(const csa_IndexArgs& a, const csa_View& v, i64 t, i64 e, i64 width, i64 clen,
                                       i64 k) {
  if (e >= width) return nullptr;
  csa_TopkElem* sc = a.work + t * a.ecap;
  sc[e].i = (int)e;
  if (e >= clen) {
    sc[e].v = -F32_INF;
    return nullptr;
  }
  return v.state + a.owners[3 * k + 2] + e * a.ik_rowbytes;
}
// csa_index_item: score of key e for row t (csa_index_score's work item).
DEV void csa_index_item(const csa_IndexArgs& a, i64 t, i64 e) {
  csa_View v;
  i64 width, clen, k;
  if (!csa_index_row(a, t, &v, &width, &clen, &k)) return;
  const unsigned char* key = csa_index_key(a, v, t, e, width, clen, k);
  if (!key) return;
  const float* qt = a.q + t * a.heads * a.dim;
  float scale = (float)a.scale, sum = 0;
  // CSA_IHB heads at a time: a key value is decoded once for them and their dots
  // (each in key order) run side by side; the heads' sum stays in head order
  for (i64 h0 = 0; h0 < a.heads; h0 += CSA_IHB) {
    i64 nh = imin(CSA_IHB, a.heads - h0);
    float dot[CSA_IHB];
    UNROLL for (int u = 0; u < CSA_IHB; u++) dot[u] = 0;
    const float* qh = qt + h0 * a.dim;
    for (i64 d = 0; d < a.dim; d++) {
      float kv = csa_row_val(key, a.ik_fmt, a.ik_group, a.dim, d);
      UNROLL for (int u = 0; u < CSA_IHB; u++)
        if (u < nh) dot[u] += qh[u * a.dim + d] * kv;
    }
    UNROLL for (int u = 0; u < CSA_IHB; u++) {
      if (u >= nh) break;
      float wt = q_bf16(a.w[t * a.heads + h0 + u] * scale);
      sum += CSA_IX_ROUND(go_max32(CSA_IX_ROUND(dot[u]), 0.0f) * wt);
    }
  }
  a.work[t * a.ecap + e].v = CSA_IX_ROUND(sum);
}
// csa_index_score: score of key e for row t: Σ_h bf16(max(bf16(q_h·k), 0)·bf16(w_h·scale)),
// bf16; keys past what the position closed score -inf.
KERNEL(csa_index_score, csa_IndexArgs) {
  for (i64 it = GIDX; it < a.rows * a.ecap; it += GSTRIDE) csa_index_item(a, it / a.ecap, it % a.ecap);
}

// csa_index_score_blk: csa_index_score's values, a launch block per (row, CSA_IXB keys):
// the row's queries (heads × dim floats, at most CSA_IXQ) and head weights staged in
// shared memory once, a thread per key. A thread widens its key CSA_IXC values at a time
// into registers and runs every head's dot over them (the heads' chains side by side,
// each in key order, as csa_index_item's), reading the queries as 16-byte broadcasts:
// the same operations in the same order, so the same values bit for bit. Go binds it for
// heads ≤ CSA_IXH and dim a multiple of CSA_IXC (csaIndexBlkOK); the emulated device runs
// csa_index_item for the block's keys.
// CsaFlag: a compile-time flag passed to a generic lambda.
template <bool B>
struct CsaFlag {
  static constexpr bool value = B;
};
#define CSA_IXB 128
#define CSA_IXH 32
#define CSA_IXC 32
#define CSA_IXQ 8192
// nb launch blocks a row (the launch's blocks over the rows: csaIndexBlocks); block
// `first` of row t scores chunks first, first + nb, ... of CSA_IXB keys, a thread a key of
// each, the queries staged once for them.
template <bool WORDS>
DEVM void csa_index_blk(const csa_IndexArgs& a, long long GIDX, long long GSTRIDE) {
#ifdef DI_EMULATE
  (void)GIDX, (void)GSTRIDE;
  for (i64 t = 0; t < a.rows; t++)
    for (i64 e = 0; e < a.ecap; e++) csa_index_item(a, t, e);
#else
  __shared__ float4 qs[CSA_IXQ / 4];
  __shared__ float wts[CSA_IXH];
  const int tid = (int)(GIDX & (CSA_IXB - 1));
  const i64 nb = a.rows > 0 && GSTRIDE / CSA_IXB >= a.rows ? GSTRIDE / CSA_IXB / a.rows : 1;
  const i64 blk = GIDX / CSA_IXB, t = blk / nb, first = blk % nb;
  csa_View v;
  i64 width, clen, k;
  // the same for every thread of the block: a row without scores leaves it at once
  if (t >= a.rows || !csa_index_row(a, t, &v, &width, &clen, &k)) return;
  if (first * CSA_IXB >= width) return;
  const i64 nq = a.heads * a.dim;
  const float4* qt = (const float4*)(a.q + t * nq);
  // the staged queries' shape, for fusing the products (below): all bf16 values (finite,
  // 8 significant bits), the least nonzero and the largest magnitude
  __shared__ float qlo[CSA_IXB], qhi[CSA_IXB];
  __shared__ int qnarrow[CSA_IXB];
  int nar = 1;
  float lo = F32_INF, hi = 0;
  for (i64 i = tid; i < nq / 4; i += CSA_IXB) {
    const float4 x = qt[i];
    qs[i] = x;
    if (!WORDS) continue;
    const float c[4] = {x.x, x.y, x.z, x.w};
    UNROLL for (int j = 0; j < 4; j++) {
      const float m = fabsf(c[j]);
      nar &= (bits_f32(c[j]) & 0xffffu) == 0 && m <= f32_bits(0x7f7f0000u);
      if (m > 0) lo = go_min32(lo, m);
      hi = go_max32(hi, m);
    }
  }
  qlo[tid] = lo, qhi[tid] = hi, qnarrow[tid] = nar;
  const float scale = (float)a.scale;
  if (tid < a.heads) wts[tid] = q_bf16(a.w[t * a.heads + tid] * scale);
  __syncthreads();
  for (int i = 0; i < (WORDS ? CSA_IXB : 0); i++) {
    nar &= qnarrow[i];
    lo = go_min32(lo, qlo[i]);
    hi = go_max32(hi, qhi[i]);
  }
  csa_TopkElem* sc = a.work + t * a.ecap;
  for (i64 e = first * CSA_IXB + tid; e - tid < width; e += nb * CSA_IXB) {
    const unsigned char* key = csa_index_key(a, v, t, e, width, clen, k);
    if (!key) continue;
    const int H = (int)a.heads, D = (int)a.dim;
    // FP8 and FP4 rows in groups of CSA_IXC on 4-byte boundaries: a chunk's codes read as
    // 4-byte words (a thread's key is a row of its own: one load a word instead of a
    // value, the same value for each); other rows value by value
    const i64 fmt = a.ik_fmt;
    const bool words = WORDS && (fmt == 1 || fmt == 2 || fmt == 3) && a.ik_group == CSA_IXC && ((u64)key & 3) == 0;
    const unsigned char* scales = key + csa_code_bytes(fmt, D);
    float dot[CSA_IXH];
    UNROLL for (int h = 0; h < CSA_IXH; h++) dot[h] = 0;
    for (int c0 = 0; c0 < D; c0 += CSA_IXC) {
      float kv[CSA_IXC];
      // fused: every product of this chunk is exact in float32 — a bf16 query (8
      // significant bits) times an FP8 or FP4 key value (at most 4 + 1 or 2 + 4), neither
      // below float32's least normal (2^-126) nor overflowing — so a fused multiply-add
      // rounds once where the multiply and the add round the product (exactly) and then
      // the sum: the same value, one instruction instead of two
      bool fused = false;
      if (words && fmt == 1) {
        const float sc = ue8m0_f32(scales[c0 / CSA_IXC]);
        fused = nar && (double)lo * sc * 0x1p-9 >= 0x1p-126 && (double)hi * sc * 448 < 0x1p126;
        const u32* w = (const u32*)(key + c0);
        UNROLL for (int q = 0; q < CSA_IXC / 4; q++) {
          const u32 x = w[q];
          UNROLL for (int b = 0; b < 4; b++) kv[4 * q + b] = e4m3_f32((unsigned char)(x >> (8 * b))) * sc;
        }
      } else if (words) {
        const float sc = fmt == 3 ? e4m3_f32(scales[c0 / CSA_IXC]) : ue8m0_f32(scales[c0 / CSA_IXC]);
        fused = nar && (double)lo * sc * 0.5 >= 0x1p-126 && (double)hi * sc * 6 < 0x1p126;
        const u32* w = (const u32*)(key + c0 / 2);
        UNROLL for (int q = 0; q < CSA_IXC / 8; q++) {
          const u32 x = w[q];
          UNROLL for (int b = 0; b < 8; b++) kv[8 * q + b] = e2m1_f32((unsigned char)((x >> (4 * b)) & 15)) * sc;
        }
      } else {
        UNROLL for (int j = 0; j < CSA_IXC; j++) kv[j] = csa_row_val(key, fmt, a.ik_group, D, c0 + j);
      }
      auto chains = [&](auto fma) {
        UNROLL for (int h = 0; h < CSA_IXH; h++) {
          if (h >= H) break;
          const float4* qh = qs + (h * D + c0) / 4;
          UNROLL for (int j = 0; j < CSA_IXC; j += 4) {
            const float4 q4 = qh[j / 4];
            if (decltype(fma)::value) {
              dot[h] = fmaf(q4.x, kv[j], dot[h]);
              dot[h] = fmaf(q4.y, kv[j + 1], dot[h]);
              dot[h] = fmaf(q4.z, kv[j + 2], dot[h]);
              dot[h] = fmaf(q4.w, kv[j + 3], dot[h]);
            } else {
              dot[h] += q4.x * kv[j];
              dot[h] += q4.y * kv[j + 1];
              dot[h] += q4.z * kv[j + 2];
              dot[h] += q4.w * kv[j + 3];
            }
          }
        }
      };
      if (fused) chains(CsaFlag<true>{});
      else chains(CsaFlag<false>{});
    }
    float sum = 0;
    UNROLL for (int h = 0; h < CSA_IXH; h++) {
      if (h >= H) break;
      sum += CSA_IX_ROUND(go_max32(CSA_IX_ROUND(dot[h]), 0.0f) * wts[h]);
    }
    sc[e].v = CSA_IX_ROUND(sum);
  }
#endif
}
// csa_index_score_words (the default below 64 rows, and in the exact mode): FP8/FP4
// chunks from 4-byte words, fused where exact (run 18c); csa_index_score_blk: the chunks
// widened value by value, multiply and add apart (run 18b; DEEPINFER_CUDA_INDEX_WORDS=0).
// The same values.
// (four launch blocks a multiprocessor: 128 registers a thread, as before the blocks looped)
#undef KERNEL_BOUNDS
#define KERNEL_BOUNDS __launch_bounds__(128, 4)
KERNEL(csa_index_score_blk, csa_IndexArgs) { csa_index_blk<false>(a, GIDX, GSTRIDE); }
KERNEL(csa_index_score_words, csa_IndexArgs) { csa_index_blk<true>(a, GIDX, GSTRIDE); }
#undef KERNEL_BOUNDS
#define KERNEL_BOUNDS

// ---- csa_index_score_tc: the index scores' dots on the tensor cores, the cpu's values ----
//
// The fast numerics mode's index scores for steps of 64 rows or more (indexTCRows;
// DEEPINFER_CUDA_INDEX_TC=0 / 1 never / always): run 42a on the H200 timed this form at
// 0.968 / 3.241 ms a V4.1 step at 32,768 and batch 64 / 256, against
// csa_index_score_words' 1.142 / 4.235 (docs/perf/attention.md). A
// launch block stages a row's queries once and loops over chunks of CSA_ITK keys (nb
// blocks a row: chunks c, c + nb, ...); warp w takes keys 64w.. of a chunk in eight mma
// tiles of 8 keys, every head (two mma row tiles of 16) against every dim value (D/16
// k-steps), as mma.sync m16n8k16 bf16 products with float32 accumulation: the queries are
// bf16 values (checked, else the block runs the item loop) and every FP8/FP4 key value
// times its scale is a bf16 value, so each product is exact. The reduction is permuted
// the same way for both operands: lane (g, t) holds the key values t·D/4 .. t·D/4 + D/4 − 1
// (consecutive codes: word loads, widened to bf16 pairs by integer operations and one
// bf16x2 multiply, csa_itc_fp4/_fp8), and the queries are staged as the A fragments in
// that order (csa_itc_qidx: one conflict-free 16-byte load a lane and k-step).
//
// The tensor cores sum in an order (and with a rounding) of their own, so a dot can differ
// from the cpu's float32 chain (dim order). Each dot has two bounds from its operands: its
// products are multiples of 2^ex (the head's least query bit times the key's least
// value bit) and Σ|products| ≤ 2^eb (the head's Σ|q| times the key's largest magnitude,
// each as a power of two). Where eb ≤ 23 + ex every partial sum in any order is exact, so
// both sums are the exact dot (V4.1's FP4 queries and keys nearly always are; this
// assumes the tensor cores keep at least float32's 24 bits below a sum's largest term).
// Elsewhere the chain's error is at most γ(D−1)·Σ|products| (≤ 2^-17 of it for D ≤ 128)
// and the tensor cores' is assumed at most 2^-16 of it, so the chain's dot lies within
// e = 2^-15·2^eb of the tensor cores'. Where bf16 rounding maps all of [dot − e, dot + e]
// to one value (or to values ≤ 0, which the ReLU makes +0), that is the cpu's rounded
// dot; elsewhere the key's thread computes that head's chain itself. A key whose products
// might not be exact (scales near float32's range, FP8 NaN codes, rows off 4-byte
// boundaries) runs the item loop. So every score is the cpu's bit for bit where those two
// assumptions hold (TestIndexScoreTCSameScores on the GPU: every score the same as
// csa_index_score_words' at V4.1-Flash's shape; the host fibers check the bounds of every
// settled dot against its values, CSA_ITC_AUDIT); the heads' weighted sum runs per key in
// head order as in csa_index_score_words.
#define CSA_ITK 256  // keys a launch block scores
#define CSA_ITH 32   // the most heads
#define CSA_ITD 128  // the most dim values (a multiple of 32)
#define CSA_ITS 33   // the rounded dots' row stride in shared memory (floats)
#define CSA_ITC_MARK 0x7fffffffu  // a dot the key's thread computes itself
// CSA_ITC_COUNT(kind): a test harness's count of the scores' paths (0: a dot the tensor
// cores settle, 1: a dot computed in the cpu's order, 2: a key by the item loop; 3: of
// the first, a dot whose sums are exact)
#ifndef CSA_ITC_COUNT
#define CSA_ITC_COUNT(kind)
#endif
// CSA_ITC_AUDIT(t, e, h, ex, eb): a test harness's check of the bounds a dot is settled
// with (row t, key e, head h: every product a multiple of 2^ex, Σ|products| ≤ 2^eb)
#ifndef CSA_ITC_AUDIT
#define CSA_ITC_AUDIT(t, e, h, ex, eb)
#endif
// csa_mma: c += a·b, one m16n8k16 bf16 product with float32 accumulation — tensorcore.cu's
// fast_mma again: that file compiles in another unit, and a shared header would change
// (and recompile) every unit.
#if defined(DI_LANES)
DEV void csa_mma(float* c, u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1) { lanes_mma(c, a0, a1, a2, a3, b0, b1); }
#elif !defined(DI_EMULATE)
DEV void csa_mma(float* c, u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
#endif
#ifndef DI_EMULATE
// csa_itc_settle: the cpu's ReLU of the bf16-rounded dot where the tensor cores' dot d
// settles it, else CSA_ITC_MARK's float. ex: every product is a multiple of 2^ex (the
// queries' and keys' least bits); eb: Σ|products| ≤ 2^eb (the queries' Σ|q| and the keys'
// largest magnitude, as powers of two). Where eb ≤ 23 + ex every partial sum in any order
// is exact in float32, so the cpu's chain and the tensor cores' sum are the exact dot
// (V4.1's FP4 queries and keys nearly always are); elsewhere the two differ by at most
// 2^-15·2^eb (the chain's γ(D−1) ≤ 2^-17 for D ≤ 128, the tensor cores' assumed 2^-16).
DEV float csa_itc_settle(float d, int ex, int eb) {
  if (!(fabsf(d) < F32_INF)) return f32_bits(CSA_ITC_MARK);
  if (eb <= 23 + ex && eb <= 127) {
    CSA_ITC_COUNT(3);
    return go_max32(CSA_IX_ROUND(d), 0.0f);
  }
  if (eb - 15 < -125 || eb - 15 > 126) return f32_bits(CSA_ITC_MARK);
  const float e = f32_bits((u32)(eb - 15 + 127) << 23) * 0x1.04p0f;  // (and 4/256 for d ± e's roundings)
  const float rh = CSA_IX_ROUND(d + e);
  if (rh <= 0) return 0.0f;
  return CSA_IX_ROUND(d - e) == rh ? rh : f32_bits(CSA_ITC_MARK);
}
#define CSA_ITC_NOBITS 1000  // a group without nonzero values: no least bit
// csa_itc_qbit: the exponent of a nonzero bf16 value's least significant bit.
DEV int csa_itc_qbit(u32 b) {
  const int e = (int)((b >> 7) & 0xff);
  const u32 m = e ? (b & 0x7f) | 0x80 : b & 0x7f;
  return (e ? e : 1) - 134 + (__ffs((int)m) - 1);
}
// csa_itc_kbit: a lower bound on the exponent of the least significant bit of a key
// value of group scale byte sb (format fmt, codes FP8 or FP4); CSA_ITC_NOBITS for a zero
// or NaN scale (no exact path).
DEV int csa_itc_kbit(i64 fmt, unsigned char sb) {
  const int code = fmt == 1 ? -9 : -1;  // the codes' least bits: e4m3's 2^-9, e2m1's 2^-1
  if (fmt != 3) return sb == 0 || sb == 0xff ? CSA_ITC_NOBITS : (int)sb - 127 + code;
  const int e = (sb >> 3) & 15, m = sb & 7;
  if ((sb & 0x7f) == 0 || (e == 15 && m == 7)) return CSA_ITC_NOBITS;
  return code + (e ? e - 10 + (__ffs(8 + m) - 1) : -9 + (__ffs(m) - 1));
}
// csa_itc_pos: where value o (0 ≤ o < D/4) of a lane's chunk of a query row is staged:
// k-step s's four values at 4s..4s+3 in the order the lane's key pairs hold them (FP4:
// codes j, j+4 of a word a pair, csa_itc_fp4; FP8: bytes 0, 2 and 1, 3 of a word), so
// that the A fragment's two registers of a k-step are one 8-byte load.
DEV int csa_itc_pos(int o, bool fp8) {
  if (fp8) return (o & ~3) + ((o & 1) << 1) + ((o >> 1) & 1);
  const int c = o & 7;
  return 4 * (2 * (o >> 3) + ((c >> 1) & 1)) + ((c & 1) << 1) + (c >> 2);
}
// csa_itc_qidx: where query value (h, d) is staged, as the bf16 values of the mma A
// fragments in lane order: per (row tile h/16, k-step) a lane's four registers as 16
// bytes, the lanes one after another (one conflict-free 16-byte load a lane).
DEV int csa_itc_qidx(int h, int d, int D, bool fp8) {
  const int per = D / 4, r = h & 15, tg = d / per, pos = csa_itc_pos(d % per, fp8), w = pos & 3;
  const int lane = 4 * (r & 7) + tg, reg = (r >> 3) + 2 * (w >> 1);
  return ((((h >> 4) * (CSA_ITD / 16) + (pos >> 2)) * 32 + lane) * 4 + reg) * 2 + (w & 1);
}
// csa_itc_bmul: the bf16 pairs' products (exact where used: one factor a power of two or
// a short scale, the result a normal bf16 value).
#if defined(DI_LANES)
DEV u32 csa_itc_bmul(u32 a, u32 b) {
  const float lo = f32_bits(a << 16) * f32_bits(b << 16), hi = f32_bits(a & 0xffff0000u) * f32_bits(b & 0xffff0000u);
  return (bits_f32(q_bf16(lo)) >> 16) | (bits_f32(q_bf16(hi)) & 0xffff0000u);
}
#else
DEV u32 csa_itc_bmul(u32 a, u32 b) {
  u32 d;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(0x80008000u));
  return d;
}
#endif
// csa_itc_dot: head h's dot with key row kp in the cpu's order (dim order; every product
// exact, so fused alike), the queries from the staged bf16 values (csa_itc_pos's order),
// the key values read four at a time (a row csa_index_score_tc checked: FP8/FP4 on a
// 4-byte boundary, groups of 32).
DEV float csa_itc_dot(const unsigned short* qb, int h, int D, const unsigned char* kp, i64 fmt) {
  const unsigned char* sc = kp + csa_code_bytes(fmt, D);
  float dot = 0;
  for (int d = 0; d < D; d += 4) {
    const unsigned char sb = sc[d >> 5];
    const float sv = fmt == 3 ? e4m3_f32(sb) : ue8m0_f32(sb);
    const u32 wd = fmt == 1 ? *(const u32*)(kp + d) : *(const u32*)(kp + (d >> 3) * 4) >> ((d & 4) * 4);
    UNROLL for (int b = 0; b < 4; b++) {
      const float x = fmt == 1 ? e4m3_f32((unsigned char)(wd >> (8 * b))) : e2m1_f32((unsigned char)((wd >> (4 * b)) & 15));
      const int o = d + b;
      const u32 qv = qb[csa_itc_qidx(h, o, D, fmt == 1)];
      dot = fmaf(f32_bits(qv << 16), x * sv, dot);
    }
  }
  return dot;
}
// csa_itc_pow2: the bf16 pair (2^e, 2^e), −126 ≤ e ≤ 127.
DEV u32 csa_itc_pow2(int e) {
  const u32 b = (u32)(e + 127) << 7;
  return b | (b << 16);
}
// csa_itc_fp4: codes j and j+4 of the eight in word x as a bf16 pair, 2^-126 times their
// e2m1 values (sign, exponent and mantissa bits placed at bf16's; 0.5 lands on a bf16
// subnormal). csa_itc_fp8: bytes 0 and 2 of x, 2^-120 times their e4m3 values.
DEV u32 csa_itc_fp4(u32 x, int j) {
  x >>= 4 * j;
  return ((x & 0x00070007u) << 6) | ((x & 0x00080008u) << 12);
}
DEV u32 csa_itc_fp8(u32 x) { return ((x & 0x007f007fu) << 4) | ((x & 0x00800080u) << 8); }
// csa_itc_scale: the two bf16 pairs whose products with csa_itc_fp4's (fp8: csa_itc_fp8's)
// pairs give the key values for scale byte u of format fmt (m2 is 1 where one multiply
// does: 2^(u-127) within bf16's range after the first).
DEV void csa_itc_scale(i64 fmt, u32 u, u32* m1, u32* m2) {
  if (fmt == 3) {
    *m1 = csa_itc_pow2(126);
    const u32 b = bits_f32(e4m3_f32((unsigned char)u)) >> 16;  // (a short scale: exact in bf16)
    *m2 = b | (b << 16);
    return;
  }
  const int e = (int)u - 127 + (fmt == 1 ? 120 : 126);
  *m1 = csa_itc_pow2(e < 127 ? e : 127);
  *m2 = csa_itc_pow2(e > 127 ? e - 127 : 0);
}
// csa_itc_tiles: warp w's key tiles (64 keys from w0, 8 a tile) against every head: the
// FP8 (FP8 true, 8 words a lane a tile, 4 tiles loaded a round) or FP4 (4 words, 8 tiles
// a round) codes loaded for a round's tiles first, then per tile widened to bf16 pairs,
// the dots and magnitude sums on the tensor cores and settled into rd (csa_itc_settle);
// a lane whose chunk of a key might not give exact products marks the key in kbad.
template <bool FP8>
DEVM void csa_itc_tiles(const csa_IndexArgs& a, i64 t, const unsigned short* qb, const int* qmin, const int* qsum,
                        float* rd, unsigned char* kbad, const unsigned char* kbase, i64 w0, i64 kend, i64 base, double smin,
                        double smax, int H, int D, int lane) {
  constexpr int WMAX = FP8 ? 8 : 4, DEPTH = FP8 ? 4 : 8;
  const i64 fmt = a.ik_fmt;
  const int g = lane >> 2, tg = lane & 3, KS = D / 16, per = D / 4, db = tg * per, nw = FP8 ? per / 4 : per / 8;
  const int cb = FP8 ? D : D / 2;
  const bool two = H > 16;
  // the lane's heads' least query bits and Σ|q| bounds (rows 16mt + g and 16mt + g + 8)
  int qh[4], qs[4];
  UNROLL for (int i = 0; i < 4; i++) {
    const int h = 16 * (i >> 1) + g + 8 * (i & 1);
    qh[i] = h < H ? qmin[h] : CSA_ITC_NOBITS;
    qs[i] = h < H ? qsum[h] : -CSA_ITC_NOBITS;
  }
  // the lane's values lie in one or two groups of 32 (two only where D/4 does not divide 32)
  const int ga = db >> 5, gb = (db + per - 1) >> 5;
  const i64 nt = imin(8, (kend - w0 + 7) / 8);  // (the warp's lanes alike)
  for (int r0 = 0; r0 < nt; r0 += DEPTH) {
    u32 raw[DEPTH][WMAX], scw[DEPTH];
    bool live[DEPTH];
    UNROLL for (int j = 0; j < DEPTH; j++) {
      const i64 e = w0 + 8 * (r0 + j) + g;
      const unsigned char* kp = kbase + e * a.ik_rowbytes;
      live[j] = r0 + j < nt && e < kend && ((u64)kp & 3) == 0;
      scw[j] = 0;
      if (live[j] && D == CSA_ITD) scw[j] = *(const u32*)(kp + cb);  // (a row's four scales; shorter rows: bytes)
      else if (live[j])
        for (int q = 0; q < D / 32; q++) scw[j] |= (u32)kp[cb + q] << (8 * q);
      UNROLL for (int i = 0; i < WMAX; i++) raw[j][i] = live[j] && i < nw ? *(const u32*)(kp + (db >> (FP8 ? 0 : 1)) + 4 * i) : 0;
    }
    UNROLL for (int j = 0; j < DEPTH; j++) {
      if (r0 + j >= nt) break;  // (the warp's lanes alike)
      const i64 e = w0 + 8 * (r0 + j) + g;
      // the lane's scales (once a tile), checked: every product exact and normal
      const u32 ua = (scw[j] >> (8 * ga)) & 0xff, ub = (scw[j] >> (8 * gb)) & 0xff;
      const float sva = fmt == 3 ? e4m3_f32((unsigned char)ua) : ue8m0_f32((unsigned char)ua);
      const float svb = fmt == 3 ? e4m3_f32((unsigned char)ub) : ue8m0_f32((unsigned char)ub);
      bool ok = live[j] && (double)sva >= smin && (double)sva < smax && (double)svb >= smin && (double)svb < smax;
      if (FP8)  // (e4m3's NaN codes, 0x7f and 0xff: the item loop)
        UNROLL for (int i = 0; i < WMAX; i++) {
          const u32 t = (raw[j][i] & 0x7f7f7f7fu) ^ 0x7f7f7f7fu;
          if (i < nw && ((t - 0x01010101u) & ~t & 0x80808080u)) ok = false;
        }
      u32 m1a, m2a, m1b, m2b;
      csa_itc_scale(fmt, ua, &m1a, &m2a);
      csa_itc_scale(fmt, ub, &m1b, &m2b);
      u32 B[CSA_ITD / 16][2];
      UNROLL for (int s = 0; s < CSA_ITD / 16; s++) {
        if (s >= KS) break;
        const int wi = FP8 ? s : s >> 1, first = ((db + (FP8 ? 4 * s : 8 * wi)) >> 5) == ga;
        const u32 m1 = first ? m1a : m1b, m2 = first ? m2a : m2b;
        const u32 x = raw[j][wi];
        u32 p0 = FP8 ? csa_itc_fp8(x) : csa_itc_fp4(x, 2 * (s & 1));
        u32 p1 = FP8 ? csa_itc_fp8(x >> 8) : csa_itc_fp4(x, 2 * (s & 1) + 1);
        p0 = csa_itc_bmul(p0, m1), p1 = csa_itc_bmul(p1, m1);
        if (m2 != 0x3f803f80u) p0 = csa_itc_bmul(p0, m2), p1 = csa_itc_bmul(p1, m2);
        B[s][0] = p0, B[s][1] = p1;
      }
      if (e < kend && !ok) kbad[e - base] = 1;
      float acc[2][4];
      UNROLL for (int mt = 0; mt < 2; mt++) UNROLL for (int i = 0; i < 4; i++) acc[mt][i] = 0;
      UNROLL for (int s = 0; s < CSA_ITD / 16; s++) {
        if (s >= KS) break;
        const u32 b0 = ok ? B[s][0] : 0, b1 = ok ? B[s][1] : 0;
        UNROLL for (int mt = 0; mt < 2; mt++) {
          if (mt == 1 && !two) break;
          // the lane's A registers (rows 16mt + g and + 8, zero past H)
          const uint4 q = ((const uint4*)qb)[(mt * (CSA_ITD / 16) + s) * 32 + lane];
          csa_mma(acc[mt], q.x, q.y, q.z, q.w, b0, b1);
        }
      }
      // lane (g, t) holds heads 16mt + g (+8) of keys 2t, 2t + 1 of the tile: their least
      // key bits from the lanes that loaded them (lane 4k's, for key k). (A key past the
      // row's is never read back, one with !ok runs the item loop: their dots are unused.)
      // and their largest magnitudes' bounds 2^kt (codes below 2^9 / 2^3 times the scale)
      int kb = CSA_ITC_NOBITS, kt = -CSA_ITC_NOBITS;
      if (fmt != 3) {
        // the least and largest scale bytes of the row's groups (FP8/FP4 codes' least bit
        // 2^-9 / 2^-1)
        const u32 lo4 = D / 32 < 4 ? 0xffffffffu << (8 * (D / 32)) : 0u, x = scw[j] | lo4, y = scw[j] & ~lo4;
        const u32 m = min(min(x & 0xff, (x >> 8) & 0xff), min((x >> 16) & 0xff, x >> 24));
        u32 n = y & 0xff;
        UNROLL for (int q = 1; q < 4; q++) n = (y >> (8 * q) & 0xff) > n ? y >> (8 * q) & 0xff : n;
        kb = (int)m - 127 + (fmt == 1 ? -9 : -1);
        kt = (int)n - 127 + (fmt == 1 ? 9 : 3);
      } else {
        UNROLL for (int q = 0; q < CSA_ITD / 32; q++)
          if (q < D / 32) {
            const unsigned char sb = (unsigned char)(scw[j] >> (8 * q));
            kb = min(kb, csa_itc_kbit(fmt, sb));
            const int top = (int)((bits_f32(e4m3_f32(sb)) >> 23) & 0xff) - 126 + 3;
            if ((sb & 0x7f) && top > kt) kt = top;
          }
      }
      if (!live[j]) kb = CSA_ITC_NOBITS, kt = -CSA_ITC_NOBITS;  // (a key not loaded: its dots unused)
      int kbit[2], ktop[2];
      UNROLL for (int u = 0; u < 2; u++) {
        const int p = __shfl_sync(0xffffffffu, ((kb + 2048) << 16) | (kt + 2048), 4 * (2 * tg + u));
        kbit[u] = (p >> 16) - 2048, ktop[u] = (p & 0xffff) - 2048;
      }
      UNROLL for (int mt = 0; mt < 2; mt++) {
        if (mt == 1 && !two) break;
        UNROLL for (int i = 0; i < 4; i++) {
          const int h = 16 * mt + g + (i >= 2 ? 8 : 0), kl = (int)(w0 - base) + 8 * (r0 + j) + 2 * tg + (i & 1);
          const int hi = 2 * mt + (i >> 1);
          if (h >= H) continue;
          CSA_ITC_AUDIT(t, base + kl, h, qh[hi] + kbit[i & 1], qs[hi] + ktop[i & 1]);
          rd[kl * CSA_ITS + h] = csa_itc_settle(acc[mt][i], qh[hi] + kbit[i & 1], qs[hi] + ktop[i & 1]);
        }
      }
    }
  }
}
#endif

// (three launch blocks a multiprocessor: 168 registers a thread; shared memory ~44 KB a block)
#undef KERNEL_BOUNDS
#define KERNEL_BOUNDS __launch_bounds__(128, 3)
// PROBE: also each key's path in a.kept (0..254: how many of its heads' dots ran in the
// cpu's order; 255: the item loop), for a test.
template <bool PROBE>
DEVM void csa_itc_body(const csa_IndexArgs& a, long long GIDX, long long GSTRIDE) {
#ifdef DI_EMULATE
  // the same values as the item loop (the scores are the cpu's by construction)
  // (no paths to report: the probe's test reads them on a GPU only)
  csa_index_blk<true>(a, GIDX, GSTRIDE);
#else
  __shared__ uint4 qf[CSA_ITH * CSA_ITD / 8];  // the queries as bf16 A fragments (csa_itc_qidx)
  unsigned short* qb = (unsigned short*)qf;
  __shared__ float rd[CSA_ITK * CSA_ITS];           // [key][head]: the settled dots
  __shared__ float wts[CSA_ITH];
  __shared__ float qlo[128], qhi[128];
  __shared__ int qnarrow[128];
  __shared__ unsigned char kbad[CSA_ITK];
  __shared__ int qmin[CSA_ITH];  // per head: the exponent of its queries' least bit
  __shared__ int qsum[CSA_ITH];  // per head: Σ|q| ≤ 2^qsum
  // nb launch blocks a row (the launch's blocks over the rows); block c of row t scores
  // chunks c, c + nb, ... of CSA_ITK keys, the queries staged once for them
  const int tid = (int)(GIDX & 127);
  const i64 nb = a.rows > 0 && GSTRIDE / 128 >= a.rows ? GSTRIDE / 128 / a.rows : 1;
  const i64 blk = GIDX / 128, t = blk / nb, c0 = blk % nb;
  csa_View v;
  i64 width, clen, k;
  // the same for every thread of the block
  if (t >= a.rows || !csa_index_row(a, t, &v, &width, &clen, &k)) return;
  if (c0 * CSA_ITK >= width) return;
  const int H = (int)a.heads, D = (int)a.dim;
  const i64 fmt = a.ik_fmt;
  const bool shape = fmt >= 1 && fmt <= 3 && a.ik_group == 32 && H <= CSA_ITH && D <= CSA_ITD && D % 32 == 0;
  const float* qt = a.q + t * a.heads * a.dim;
  // the queries as bf16 (valid where every one is a bf16 value: nar), their least
  // nonzero and largest magnitudes
  int nar = 1;
  float lo = F32_INF, hi = 0;
  for (int i = tid; i < CSA_ITH * CSA_ITD / 8; i += 128) qf[i] = make_uint4(0, 0, 0, 0);  // (rows past H)
  __syncthreads();
  for (int i = tid; i < (shape ? H * D : 0); i += 128) {
    const float x = qt[i], m = fabsf(x);
    nar &= (bits_f32(x) & 0xffffu) == 0 && m <= f32_bits(0x7f7f0000u);
    if (m > 0) lo = go_min32(lo, m);
    hi = go_max32(hi, m);
    qb[csa_itc_qidx(i / D, i % D, D, fmt == 1)] = (unsigned short)(bits_f32(x) >> 16);
  }
  qlo[tid] = lo, qhi[tid] = hi, qnarrow[tid] = nar;
  if (tid < H) wts[tid] = q_bf16(a.w[t * a.heads + tid] * (float)a.scale);
  for (int j = tid; j < CSA_ITK; j += 128) kbad[j] = 0;
  __syncthreads();
  if (shape && tid < H) {
    // (meaningful only where the queries are bf16 values)
    int m = CSA_ITC_NOBITS;
    double l1 = 0;
    for (int i = 0; i < D; i++) {
      const u32 b = qb[csa_itc_qidx(tid, i, D, fmt == 1)];
      if (b & 0x7fff) m = min(m, csa_itc_qbit(b));
      l1 += fabs((double)f32_bits(b << 16));
    }
    qmin[tid] = m;
    // (the double sum's rounding is below 2^-40 of it)
    qsum[tid] = l1 > 0 ? ilogb(l1 * (1 + 0x1p-40)) + 1 : -CSA_ITC_NOBITS;
  }
  if (tid < 32) {
    for (int i = tid + 32; i < 128; i += 32) {
      nar &= qnarrow[i];
      lo = go_min32(lo, qlo[i]);
      hi = go_max32(hi, qhi[i]);
    }
    qlo[tid] = lo, qhi[tid] = hi, qnarrow[tid] = nar;
  }
  __syncthreads();
  for (int i = 0; i < 32; i++) {
    nar &= qnarrow[i];
    lo = go_min32(lo, qlo[i]);
    hi = go_max32(hi, qhi[i]);
  }
  csa_TopkElem* sc = a.work + t * a.ecap;
  if (!nar || !shape) {
    // queries that are not bf16 values (or a shape the binder does not send here): the
    // item loop, key by key
    for (i64 b0 = c0 * CSA_ITK; b0 < width; b0 += nb * CSA_ITK)
      for (i64 e = b0 + tid; e < imin(width, b0 + CSA_ITK); e += 128) {
        CSA_ITC_COUNT(2);
        csa_index_item(a, t, e);
        if (PROBE) a.kept[t * a.ecap + e] = 255;
      }
    return;
  }
  const int w = tid >> 5;
  const unsigned char* kbase = v.state + a.owners[3 * k + 2];
  const i64 kend = imin(width, clen);
  // the scales that keep a key value a normal bf16 value and its products with every
  // query exact and normal in float32
  const double kmin = fmt == 1 ? 0x1p-9 : 0.5, kmax = fmt == 1 ? 448.0 : 6.0;
  const double smin = go_max64(0x1p-126 / kmin, 0x1p-126 / ((double)lo * kmin));
  const double smax = (double)hi > 1 ? 0x1p126 / ((double)hi * kmax) : 0x1p126 / kmax;
  for (i64 base = c0 * CSA_ITK; base < width; base += nb * CSA_ITK) {
    __syncthreads();  // (the chunk before's sums done with rd and kbad)
    const i64 w0 = base + 64 * w;
    if (w0 < kend) {
      if (fmt == 1) csa_itc_tiles<true>(a, t, qb, qmin, qsum, rd, kbad, kbase, w0, kend, base, smin, smax, H, D, tid & 31);
      else csa_itc_tiles<false>(a, t, qb, qmin, qsum, rd, kbad, kbase, w0, kend, base, smin, smax, H, D, tid & 31);
    }
    __syncthreads();
    // per key, the heads' weighted sum in head order (csa_index_score_words')
    for (int j = tid; j < CSA_ITK; j += 128) {
      const i64 e = base + j;
      const unsigned char* key = csa_index_key(a, v, t, e, width, clen, k);
      if (!key) continue;
      if (kbad[j]) {
        CSA_ITC_COUNT(2);
        csa_index_item(a, t, e);
        if (PROBE) a.kept[t * a.ecap + e] = 255;
        continue;
      }
      float sum = 0;
      int slow = 0;
      for (int h = 0; h < H; h++) {
        float r = rd[j * CSA_ITS + h];
        if (bits_f32(r) == CSA_ITC_MARK) {
          CSA_ITC_COUNT(1);
          slow++;
          r = go_max32(CSA_IX_ROUND(csa_itc_dot(qb, h, D, key, fmt)), 0.0f);
        } else {
          CSA_ITC_COUNT(0);
        }
        // (a +0 term changes no sum of this chain, which is never −0, unless the weight
        // is not finite: 0·inf is NaN)
        if (r != 0 || !(fabsf(wts[h]) < F32_INF)) sum += CSA_IX_ROUND(r * wts[h]);
      }
      sc[e].v = CSA_IX_ROUND(sum);
      if (PROBE) a.kept[t * a.ecap + e] = (unsigned char)min(slow, 254);
    }
    for (int j = tid; j < CSA_ITK; j += 128) kbad[j] = 0;  // (this thread's keys: for the next chunk)
  }
#endif
}
KERNEL(csa_index_score_tc, csa_IndexArgs) {
  csa_itc_body<false>(a, GIDX, GSTRIDE);
}
// csa_index_score_tc_probe: the same scores, and each key's path in a.kept (a test's)
KERNEL(csa_index_score_tc_probe, csa_IndexArgs) {
  csa_itc_body<true>(a, GIDX, GSTRIDE);
}
#undef KERNEL_BOUNDS
#define KERNEL_BOUNDS

// csa_select_row: row t's view, widths and index-key owner for csa_index_select; false
// (with the error set where the row's keys are not there) for a row it skips.
DEV bool csa_select_row(const csa_IndexArgs& a, i64 t, csa_View* v, i64* width, i64* clen, bool report) {
  if (!csa_view_at(a.seqs, a.nseq, a.keep, t, v)) return false;
  i64 p = v->pos + (t - v->row);
  csa_index_widths(a, *v, p, width, clen);
  i64 k = csa_index_owner(a, *v, p);
  if (k < 0) {
    if (report) *a.err = 403;
    return false;
  }
  if (*width > csa_owner_entries(a, k, *v) || *width > a.ecap) {
    if (report) *a.err = 402;
    return false;
  }
  return true;
}

// csa_cand_last is the candidate block select_candidate_blocks always keeps (the newest
// visible one), or -1.
DEV i64 csa_cand_last(const csa_IndexArgs& a, i64 clen, i64 nb) {
  i64 c1 = clen - 1;
  i64 last = c1 / a.cand_size;
  if (c1 % a.cand_size != 0 && c1 < 0) last--;
  return last >= 0 && last < nb ? last : -1;
}

// csa_index_select: per row, the candidate blocks (publish) or the restriction to the
// given ones, then the top k keys in position order (-1 pads). The selection is the
// cpu's (torch.topk's libstdc++ order, ties included), or under DEEPINFER_INDEX_TIES=low
// (lowtie) csa_lowtie_kept's; the candidate blocks are always the cpu's. On the device a row is a launch
// block (ROW_SPREAD threads, csa_topk_blk); the emulated device runs the serial loop.
KERNEL(csa_index_select, csa_IndexArgs) {
#ifdef DI_EMULATE
  for (i64 it = GIDX; it < a.rows * ROW_SPREAD; it += GSTRIDE) {
    if (it % ROW_SPREAD != 0) continue;
    i64 t = it / ROW_SPREAD, width, clen;
    csa_View v;
    if (!csa_select_row(a, t, &v, &width, &clen, true)) continue;
    csa_TopkElem* q = a.work + t * a.ecap;
    if (a.publish) {
      // select_candidate_blocks: blocks scored by their best key, the newest visible
      // block always kept
      i64 nb = (width + a.cand_size - 1) / a.cand_size;
      csa_TopkElem* bq = a.bwork + t * a.nbcap;
      for (i64 b = 0; b < nb; b++) {
        float m = -F32_INF;
        for (i64 e = b * a.cand_size; e < imin((b + 1) * a.cand_size, width); e++) m = go_max32(m, q[e].v);
        bq[b].v = m;
        bq[b].i = (int)b;
      }
      i64 last = csa_cand_last(a, clen, nb);
      if (last >= 0) bq[last].v = F32_INF;
      int* out = a.cand_out + t * a.cand_blocks;
      for (i64 j = 0; j < a.cand_blocks; j++) out[j] = -1;
      i64 kk = csa_topk(bq, nb, a.cand_blocks), n = 0;
      for (i64 j = 0; j < kk; j++)
        if (bq[j].v != -F32_INF) out[n++] = bq[j].i;
    } else if (a.cand_in) {
      const unsigned char* mark = a.cmark + t * a.nbcap;
      for (i64 e = 0; e < width; e++)
        if (!mark[e / a.cand_size]) q[e].v = -F32_INF;
    }
    if (a.lowtie) {
      csa_lowtie_kept(q, width, a.topk, clen, a.kept + t * a.ecap, a.idx_out + t * a.topk, a.topk);
      continue;
    }
    i64 kk = csa_topk(q, width, a.topk);
    csa_kept_list(q, kk, width, clen, a.kept + t * a.ecap, a.idx_out + t * a.topk, a.topk);
  }
#else
  __shared__ csa_BlkShared S;
  const int tid = (int)(GIDX % ROW_SPREAD);
  for (i64 t = GIDX / ROW_SPREAD; t < a.rows; t += GSTRIDE / ROW_SPREAD) {
    i64 width, clen;
    csa_View v;
    if (!csa_select_row(a, t, &v, &width, &clen, tid == 0)) continue;  // the whole block
    csa_TopkElem* q = a.work + t * a.ecap;
    if (a.publish) {
      i64 nb = (width + a.cand_size - 1) / a.cand_size, last = csa_cand_last(a, clen, nb);
      csa_TopkElem* bq = a.bwork + t * a.nbcap;
      for (i64 b = tid; b < nb; b += ROW_SPREAD) {
        float m = -F32_INF;
        for (i64 e = b * a.cand_size; e < imin((b + 1) * a.cand_size, width); e++) m = go_max32(m, q[e].v);
        bq[b].v = b == last ? F32_INF : m;
        bq[b].i = (int)b;
      }
      int* out = a.cand_out + t * a.cand_blocks;
      for (i64 j = tid; j < a.cand_blocks; j += ROW_SPREAD) out[j] = -1;
      __syncthreads();
      i64 kk = csa_topk_blk(bq, nb, a.cand_blocks, tid, S);
      csa_blk_compact(kk, out, tid, S, [&](i64 j) { return bq[j].v != -F32_INF; }, [&](i64 j) { return bq[j].i; });
    } else if (a.cand_in) {
      const unsigned char* mark = a.cmark + t * a.nbcap;
      for (i64 e = tid; e < width; e += ROW_SPREAD)
        if (!mark[e / a.cand_size]) q[e].v = -F32_INF;
    }
    __syncthreads();
    if (a.lowtie) {
      csa_lowtie_kept_blk(q, width, a.topk, clen, a.kept + t * a.ecap, a.idx_out + t * a.topk, a.topk, tid, S);
      continue;
    }
    // (the kept keys only: the heap select's elements need no sort)
    i64 kk = csa_topk_blk(q, width, a.topk, tid, S, false);
    csa_kept_list_blk(q, kk, width, clen, a.kept + t * a.ecap, a.idx_out + t * a.topk, a.topk, tid, S);
  }
#endif
}

// ---- csa_attention ----

struct csa_AttnArgs {
  const float* q;
  const float* kv;
  Weight sink;
  const int* idx;
  float* out;
  const SeqRec* seqs;
  i64 nseq, rows, keep;
  i64 heads, dim, window, block;
  double scale;
  i64 ratio, topk;
  i64 ring_off, ring_rows, ring_fmt, ring_group, ring_rowbytes;
  i64 kv_off, kv_fmt, kv_group, kv_rowbytes, kv_ratio;
  i64* err;
  // the split kernels' scratch (csa_attn_*): keys widened [rows, lmax, dim], per-key
  // logits then bf16 probabilities [rows, lmax, heads], unrounded probabilities
  // [rows, heads, lmax], block rescales [rows, nblk, heads], denominators [rows, heads],
  // key flags [rows, lmax]
  float* kf; float* pb; float* ps; float* bsc; float* den; unsigned char* valid; i64 lmax; i64 nblk;
  i64* rlen;  // [rows]: each row's key count (csa_attn_len), -1 for a row in no view
  struct csa_Key* kref;  // [rows, lmax]: each key's row bytes and format (csa_attn_keys)
  // the tensor-core kernels' layouts (tc = 1; tensorcore_attn.cu, csa_tc_*): pb is
  // [rows, heads, lmax], kf holds the keys' bf16 halves (hi [rows, lmax, dim], then lo),
  // and rlo[t] is nonzero where a key of row t has a nonzero lo half, klo[t, j] where
  // key j does (its lo halves are written only then)
  unsigned* rlo;
  i64 tc;
  unsigned char* klo;  // [rows, lmax]
};

struct csa_Key {
  const unsigned char* p;  // 0: an empty slot
  i64 fmt, g;
};

// csa_attn_key is key j of the list of the query at position p, row t (cpu: windowList,
// then the compressed entries idx selects).
DEV csa_Key csa_attn_key(const csa_AttnArgs& a, const csa_View& v, i64 t, i64 p, i64 W, i64 j) {
  csa_Key k = {0, 0, 1};
  if (j < W) {
    i64 q;
    if (v.fromZero) {
      q = imax(0, p - a.window + 1) + j;
      if (q > p) return k;
    } else {
      q = p - a.window + 1 + j;
      if (q < 0) return k;
    }
    if (q >= v.pos) {
      k.p = (const unsigned char*)(a.kv + (v.row + q - v.pos) * a.dim);
      return k;
    }
    if (a.ring_rows > 0 && q < v.spos && q >= v.spos - a.ring_rows) {
      k.p = v.state + a.ring_off + (q % a.ring_rows) * a.ring_rowbytes;
      k.fmt = a.ring_fmt;
      k.g = a.ring_group;
    }
    return k;
  }
  i64 e = a.idx[t * a.topk + (j - W)];
  if (e < 0 || e >= (v.spos + v.sn) / a.kv_ratio) return k;
  k.p = v.state + a.kv_off + e * a.kv_rowbytes;
  k.fmt = a.kv_fmt;
  k.g = a.kv_group;
  return k;
}

// csa_attn_len is the length of row t's key list (window slots W, then the top-k).
DEV i64 csa_attn_len(const csa_AttnArgs& a, const csa_View& v, i64 p, i64* W) {
  *W = v.fromZero ? imin(v.n, a.window) : a.window;
  i64 C = 0;
  if (a.ratio > 0) C = imin(a.topk, v.fromZero ? (v.pos + v.n) / a.ratio : (p + 1) / a.ratio);
  return *W + C;
}

// csa_attention (cpu: blockSoftmax, the reference's blocked online softmax with bf16
// probabilities and the sink) in four launches, each value as the cpu computes it:
// csa_attn_kdec widens each row's keys once (one (row, key, value) a work item);
// csa_attn_logits scores them (one (row, key, head), heads adjacent so that they share
// the key's loads); csa_attn_softmax runs the blocked online softmax's scalars per
// (row, head); csa_attn_out sums each output value over the blocks and keys in order.
// csa_attn_rows: each row's key count, once (the launches after read it rather than
// look the row's sequence up per value).
KERNEL(csa_attn_rows, csa_AttnArgs) {
  for (i64 t = GIDX; t < a.rows; t += GSTRIDE) {
    csa_View v;
    if (!csa_view_at(a.seqs, a.nseq, a.keep, t, &v)) {
      a.rlen[t] = -1;
      continue;
    }
    i64 W;
    a.rlen[t] = csa_attn_len(a, v, v.pos + (t - v.row), &W);
    if (a.tc) a.rlo[t] = 0;  // csa_attn_kdec marks it
  }
}

// csa_kdec4: values d0..d0+3 of key k (0 past dim or for an empty slot), as
// csa_row_val gives them. FP8 and FP4 pieces that lie in one scale group are read as one
// word (FP8: 4 bytes where aligned; FP4: 2 bytes) with the group's scale read once: the
// same codes times the same scale, so the same values.
// csa_kdec_word: the codes of values d0..d0+3 of an FP8 (4 bytes) or FP4 (2 bytes) key
// row, value u at bits 8u (FP8) or 4u (FP4); d0 a multiple of 4.
DEV u32 csa_kdec_word(const csa_Key& k, i64 d0) {
  if (k.fmt == 1) {
    const unsigned char* c = k.p + d0;
    return ((u64)c & 3) == 0 ? *(const u32*)c : (u32)c[0] | (u32)c[1] << 8 | (u32)c[2] << 16 | (u32)c[3] << 24;
  }
  const unsigned char* c = k.p + d0 / 2;
  return (u32)c[0] | (u32)c[1] << 8;
}
DEV void csa_kdec4(const csa_Key& k, i64 dim, i64 d0, float* v) {
  if (k.p && k.fmt != 0 && d0 + 4 <= dim && (k.g & 3) == 0) {
    const unsigned char* sc = k.p + csa_code_bytes(k.fmt, dim);
    // the scale's index by a 32-bit division (a 64-bit one is a long call on the device;
    // 0 ≤ d0 < dim and 0 < g, which fit in 32 bits, so the same quotient)
    const u32 gi = (u32)d0 / (u32)k.g;
    const float s = k.fmt == 3 ? e4m3_f32(sc[gi]) : ue8m0_f32(sc[gi]);
    const u32 x = csa_kdec_word(k, d0);
    if (k.fmt == 1) {
      UNROLL for (int u = 0; u < 4; u++) v[u] = e4m3_f32((unsigned char)(x >> (8 * u))) * s;
    } else {
      UNROLL for (int u = 0; u < 4; u++) v[u] = e2m1_f32((unsigned char)((x >> (4 * u)) & 15)) * s;
    }
    return;
  }
  UNROLL for (int u = 0; u < 4; u++) v[u] = k.p && d0 + u < dim ? csa_row_val(k.p, k.fmt, k.g, dim, d0 + u) : 0;
}

// csa_attn_keys: one (row, key) a work item: where the key's row lies (csa_attn_key),
// and whether it is one; csa_attn_kdec then widens each value, one (row, key, value) a
// work item. The index check of a row with keys (every index below the compressed
// entries its sequence holds) is spread over the row's items, item j checking index j
// (lmax = window + topk ≥ topk): one thread checking all topk of them in a row was
// ~40 µs a launch at any batch (run 22c).
KERNEL(csa_attn_keys, csa_AttnArgs) {
  for (i64 tj = GIDX; tj < a.rows * a.lmax; tj += GSTRIDE) {
    const i64 j = qmod(tj, a.lmax), t = qdiv(tj, a.lmax);
    const i64 len = a.rlen[t];
    const bool check = a.ratio > 0 && j < a.topk && len > 0;
    if (j >= len && !check) continue;  // past the row's keys, or a row in no view (-1)
    csa_View v;
    if (!csa_view_at(a.seqs, a.nseq, a.keep, t, &v)) continue;
    if (check && a.idx[t * a.topk + j] >= (v.spos + v.sn) / a.kv_ratio) *a.err = 404;
    if (j >= len) continue;
    i64 p = v.pos + (t - v.row), W;
    csa_attn_len(a, v, p, &W);
    csa_Key k = csa_attn_key(a, v, t, p, W, j);
    a.kref[tj] = k;
    a.valid[tj] = k.p != 0;
  }
}

// (4 values a work item, stored together where the rows allow: one value an item, until
// run 14, read the key's record and stored one float for each value). With tc, the
// values' bf16 halves hi = bf16(v) and lo = bf16(v − hi) (tensorcore.cu's split): a warp
// a (row, key) since run 19 (the key's record, the row's length and the divisions once a
// key instead of once 4 values; csa_kdec4's word reads). V4.1's FP8 and FP4 keys are
// bf16 values but for scales at the ends of the range, so the lo halves are written
// only for a key that has a nonzero one (since run 20: the key widened a second time),
// marked in klo[t, j] and rlo[t]; the tensor-core kernels read a key's lo halves only
// where both are marked, and skip the lo mma of a row with none.
// csa_kdec_store: 4 halves w to o (values d0.. of a row of dim; vec: 8 bytes at once).
DEV void csa_kdec_store(unsigned short* o, const u32* w, i64 d0, i64 dim, bool vec) {
  if (vec) {  // 8 bytes: d0 a multiple of 4 values
    *(u64*)o = (u64)(w[0] | w[1] << 16) | (u64)(w[2] | w[3] << 16) << 32;
  } else {
    UNROLL for (int u = 0; u < 4; u++)
      if (d0 + u < dim) o[u] = (unsigned short)w[u];
  }
}
// csa_kdec_halves_any: the hi (lo_pass false) or lo halves of values d0..d0+3 of key k,
// stored at o (kh or kl + the value's offset); their lo halves' bits or'ed together.
DEVM u32 csa_kdec_halves_any(const csa_Key& k, i64 dim, i64 d0, unsigned short* o, bool vec, bool lo_pass) {
  float v[4];
  csa_kdec4(k, dim, d0, v);
  u32 h[4], l[4];
  UNROLL for (int u = 0; u < 4; u++) {
    const float hv = q_bf16(v[u]);
    h[u] = bits_f32(hv) >> 16, l[u] = hv == v[u] ? 0 : bits_f32(q_bf16(v[u] - hv)) >> 16;
  }
  csa_kdec_store(o, lo_pass ? l : h, d0, dim, vec);
  return l[0] | l[1] | l[2] | l[3];
}
// The integer widening of an FP8 (e4m3, fmt 1) or FP4 (e2m1, fmt 2) code with a UE8M0
// scale byte sc: the code's bf16 bits with sc − 127 added to the exponent field. Where
// csa_kdec_fast allows it (every product of a code and the scale a normal float, so
// exact in bf16: FP4 values 0.5-6 need sc in [2, 252], FP8's 2^-9 to 448 [10, 246]),
// that is q_bf16(code value · 2^(sc − 127)) bit for bit and the lo half is 0: about 5
// integer operations a value instead of the float widening, the product and two bf16
// roundings (TestKeyWideningIntegerPath: every code and scale byte against
// csa_kdec_halves_any).
DEV bool csa_kdec_fast(i64 fmt, u32 sc) { return fmt == 2 ? sc >= 2 && sc <= 252 : fmt == 1 && sc >= 10 && sc <= 246; }
DEV u32 csa_fp4_bf16(u32 c, u32 sc) {
  // magnitudes 1..7: 0.5 (0x3f00), then 1, 1.5, 2, 3, 4, 6 = 0x3f00 + 0x40·mag
  const u32 mag = c & 7;
  return (c & 8) << 12 | (mag ? 0x3f00u + (mag > 1 ? mag << 6 : 0u) + ((sc - 127) << 7) : 0u);
}
DEV u32 csa_fp8_bf16(u32 c, u32 sc) {
  const u32 e = (c >> 3) & 15, m = c & 7, s = (c & 0x80) << 8;
  if (e == 0 && m == 0) return s;
  u32 b;
  if (e != 0) {
    b = (e + 120) << 7 | m << 4;  // 2^(e − 7) · (1 + m/8)
  } else {
    // m · 2^-9: m's leading bit at 2^(2 − sh), the rest the mantissa's top bits
    const u32 sh = m >= 4 ? 0 : m >= 2 ? 1 : 2;
    b = (120 - sh) << 7 | ((m << sh) & 3) << 5;
  }
  return s | (b + ((sc - 127) << 7));
}
// csa_e2m1_bits: e2m1_f32's bits (the FP4 code c's value as a float32), from the code
// directly: magnitudes 2-7 are 0x3f000000 + m · 2^22 (1, 1.5, 2, 3, 4, 6), 1 is 0.5.
DEV u32 csa_e2m1_bits(u32 c) {
  const u32 m = c & 7;
  return (c & 8) << 28 | (m > 1 ? 0x3f000000u + (m << 22) : m ? 0x3f000000u : 0u);
}
// csa_kdec_piece: the hi halves h of values d0..d0+3 (a whole piece of one scale group)
// of a key of format F (k.fmt) with scale byte e, and whether they are exact with lo
// halves 0: FP8 and FP4 pieces whose scale csa_kdec_fast allows (and no FP8 NaN code) by
// the integer widening; FP4 pieces with E4M3 scales (fmt 3: V4.1's compressed entries)
// whose scale byte is not NaN by one float32 product a value: a code's value has at most
// two significant bits and an E4M3 scale's at most four, so every product is zero or a
// normal float of magnitude 2^-10 to 2,688 with at most six significant bits, exact in
// bf16: its hi half is the product's top 16 bits and its lo half 0, as the float path's
// two roundings give (TestKeyWideningIntegerPath: every code and scale byte).
template <int F>
DEV bool csa_kdec_piece(const csa_Key& k, i64 d0, u32 e, u32 (&h)[4]) {
  const u32 x = csa_kdec_word(k, d0);
  if constexpr (F == 1) {
    bool ok = csa_kdec_fast(1, e);
    UNROLL for (int u = 0; u < 4; u++) {
      const u32 b = (x >> (8 * u)) & 0xff;
      ok = ok && (b & 0x7f) != 0x7f;
      h[u] = csa_fp8_bf16(b, e);
    }
    return ok;
  } else if constexpr (F == 2) {
    UNROLL for (int u = 0; u < 4; u++) h[u] = csa_fp4_bf16((x >> (4 * u)) & 15, e);
    return csa_kdec_fast(2, e);
  } else {
    const float s = e4m3_f32((unsigned char)e);
    UNROLL for (int u = 0; u < 4; u++) h[u] = bits_f32(f32_bits(csa_e2m1_bits(x >> (4 * u))) * s) >> 16;
    return (e & 0x7f) != 0x7f;
  }
}
// csa_kdec_halves: csa_kdec_halves_any's halves, a whole piece of a block-format key by
// csa_kdec_piece where that allows it (the lo halves then 0). gsh: log2 of k.g where the
// caller found it a power of two (the scale's index a shift), else -1 (a 32-bit
// division, as csa_kdec4: 0 ≤ d0 < dim, 0 < g fit 32 bits).
DEVM u32 csa_kdec_halves(const csa_Key& k, i64 dim, i64 d0, unsigned short* o, bool vec, bool lo_pass, int gsh = -1) {
  if (k.p && k.fmt >= 1 && k.fmt <= 3 && d0 + 4 <= dim && (k.g & 3) == 0) {
    const unsigned char* sc = k.p + csa_code_bytes(k.fmt, dim);
    const u32 e = sc[gsh >= 0 ? (u32)d0 >> gsh : (u32)d0 / (u32)k.g];
    u32 h[4];
    if (k.fmt == 1 ? csa_kdec_piece<1>(k, d0, e, h) : k.fmt == 2 ? csa_kdec_piece<2>(k, d0, e, h) : csa_kdec_piece<3>(k, d0, e, h)) {
      const u32 z[4] = {0, 0, 0, 0};
      csa_kdec_store(o, lo_pass ? z : h, d0, dim, vec);
      return 0;
    }
  }
  return csa_kdec_halves_any(k, dim, d0, o, vec, lo_pass);
}
// csa_kdec_key_hi: csa_kdec_halves' hi halves of a lane's pieces of key k (values d0,
// d0 + 128, ... from d0 = 4 · lane) into o (the key's row of kh), for a key whose format
// (F = k.fmt) and group (a multiple of 4, 2^gsh) were tested once for the key rather than
// once a piece, in 32-bit offsets (the piece past the last whole one too). It returns
// the pieces' lo bits or'ed together.
template <int F>
DEVM u32 csa_kdec_key_hi(const csa_Key& k, u32 dim, u32 d0, unsigned short* o, bool vec, int gsh) {
  const unsigned char* sc = k.p + (F == 1 ? dim : dim / 2);
  u32 any = 0;
  for (; d0 + 4 <= dim; d0 += 128) {
    u32 h[4];
    if (csa_kdec_piece<F>(k, d0, sc[d0 >> gsh], h)) csa_kdec_store(o + d0, h, d0, dim, vec);
    else any |= csa_kdec_halves_any(k, dim, d0, o + d0, vec, false);
  }
  if (d0 < dim) any |= csa_kdec_halves_any(k, dim, d0, o + d0, vec, false);
  return any;
}
KERNEL(csa_attn_kdec, csa_AttnArgs) {
  const i64 nd = (a.dim + 3) / 4;
  const bool vec = (a.dim & 3) == 0 && csa_al16(a.kf);
  if (a.tc) {
    // a warp per (row, key): lane l widens values 4l, 4l + 128, ... (the row's 4-value
    // pieces, so a warp's stores are contiguous), the key located once
    unsigned short* kh = (unsigned short*)a.kf;
    unsigned short* kl = kh + a.rows * a.lmax * a.dim;
    for (i64 it = GIDX; it < a.rows * a.lmax * 32; it += GSTRIDE) {
      const i64 tj = it >> 5, t = qdiv(tj, a.lmax);
      if (tj - t * a.lmax >= a.rlen[t]) continue;
      const csa_Key k = a.kref[tj];
#ifdef DI_EMULATE
      // the key at its first lane
      if ((it & 31) != 0) continue;
      u32 any = 0;
      for (i64 d0 = 0; d0 < a.dim; d0 += 4) any |= csa_kdec_halves(k, a.dim, d0, kh + tj * a.dim + d0, vec, false);
      if (any != 0)
        for (i64 d0 = 0; d0 < a.dim; d0 += 4) csa_kdec_halves(k, a.dim, d0, kl + tj * a.dim + d0, vec, true);
      a.klo[tj] = any != 0;
      if (any != 0) a.rlo[t] = 1;
#else
      // (the scale's index a shift where the group is a power of two: V4.1's 32 and 128)
      const int gsh = k.g > 0 && k.g <= (1 << 30) && (k.g & (k.g - 1)) == 0 ? __popc((u32)(k.g - 1)) : -1;
      u32 any = 0;
      // (a key of a block format whose group is a power of two and a multiple of 4 — every
      // key of V4.1's plans but the float32 ones — tested once: csa_kdec_key_hi)
      const bool once = k.p && k.fmt >= 1 && k.fmt <= 3 && (k.g & 3) == 0 && gsh >= 0 && a.dim < (1ll << 31);
      const u32 l4 = 4 * (u32)(it & 31);
      if (once && k.fmt == 3) any = csa_kdec_key_hi<3>(k, (u32)a.dim, l4, kh + tj * a.dim, vec, gsh);
      else if (once && k.fmt == 2) any = csa_kdec_key_hi<2>(k, (u32)a.dim, l4, kh + tj * a.dim, vec, gsh);
      else if (once) any = csa_kdec_key_hi<1>(k, (u32)a.dim, l4, kh + tj * a.dim, vec, gsh);
      else
        for (i64 d0 = l4; d0 < a.dim; d0 += 128) any |= csa_kdec_halves(k, a.dim, d0, kh + tj * a.dim + d0, vec, false, gsh);
      const bool kany = __any_sync(0xffffffffu, any != 0);  // (tj, and so the branch above, is the warp's)
      if (kany)
        for (i64 d0 = 4 * (it & 31); d0 < a.dim; d0 += 128) csa_kdec_halves(k, a.dim, d0, kl + tj * a.dim + d0, vec, true, gsh);
      if ((it & 31) == 0) {
        a.klo[tj] = kany;
        if (kany) atomicOr(a.rlo + t, 1u);
      }
#endif
    }
    return;
  }
  for (i64 it = GIDX; it < a.rows * a.lmax * nd; it += GSTRIDE) {
    const i64 d0 = it % nd * 4, tj = it / nd, t = tj / a.lmax;
    if (tj % a.lmax >= a.rlen[t]) continue;
    const csa_Key k = a.kref[tj];
    float v[4];
    UNROLL for (int u = 0; u < 4; u++) v[u] = k.p && d0 + u < a.dim ? csa_row_val(k.p, k.fmt, k.g, a.dim, d0 + u) : 0;
    float* o = a.kf + tj * a.dim + d0;
    if (vec) {
      float4 f;
      f.x = v[0], f.y = v[1], f.z = v[2], f.w = v[3];
      *(float4*)o = f;
    } else {
      UNROLL for (int u = 0; u < 4; u++)
        if (d0 + u < a.dim) o[u] = v[u];
    }
  }
}

// csa_attn_logits: one (row, key, group of CSA_HG heads) a work item, the key's values
// read once for the group; each head's dot product in the same order as alone.
#define CSA_HG 16
KERNEL(csa_attn_logits, csa_AttnArgs) {
  i64 groups = (a.heads + CSA_HG - 1) / CSA_HG;
  for (i64 it = GIDX; it < a.rows * a.lmax * groups; it += GSTRIDE) {
    i64 h0 = (it % groups) * CSA_HG, tj = it / groups, j = tj % a.lmax, t = tj / a.lmax;
    if (j >= a.rlen[t]) continue;
    i64 hn = imin(CSA_HG, a.heads - h0);
    float* pb = a.pb + tj * a.heads + h0;
    if (!a.valid[tj]) {
      for (i64 h = 0; h < hn; h++) pb[h] = -F32_INF;
      continue;
    }
    const float* q = a.q + t * a.heads * a.dim + h0 * a.dim;
    const float* kr = a.kf + tj * a.dim;
    float dot[CSA_HG];
    UNROLL for (int h = 0; h < CSA_HG; h++) dot[h] = 0;
    for (i64 d = 0; d < a.dim; d++) {
      float k = kr[d];
      UNROLL for (int h = 0; h < CSA_HG; h++)
        if (h < hn) dot[h] += q[h * a.dim + d] * k;
    }
    for (i64 h = 0; h < hn; h++) pb[h] = dot[h] * (float)a.scale;
  }
}

// csa_attn_softmax: a warp per (row, head). Per block of keys, in order (softmax_block,
// quant.h): the block's maximum (the lanes' maxima of their keys, then across the lanes:
// a maximum does not depend on the order), the rescale, each key's probability (ps, and
// its bf16 rounding in pb: a lane's keys), then the block's sum in cascade order and the
// running sum; the sink's term last. The emulated device runs a warp's work at its lane
// 0, the keys in order.
DEV void csa_softmax_row(const csa_AttnArgs& a, i64 it, int lane) {
  i64 t = it / a.heads, h = it % a.heads;
  i64 L = a.rlen[t];
  if (L < 0) return;
  float* ps = a.ps + it * a.lmax;
  // key j's logit (then probability) at pr[j·ks]: pb [rows, lmax, heads], or [rows,
  // heads, lmax] (tc), where a warp's loads of adjacent keys are adjacent
  const i64 ks = a.tc ? 1 : a.heads;
  float* pr = a.pb + (a.tc ? it * a.lmax : t * a.lmax * a.heads + h);
  float m = -F32_INF, sum = 0;
  for (i64 b = 0; b < L; b += a.block)
    softmax_block(pr + b * ks, ks, a.valid + t * a.lmax + b, ps + b, imin(a.block, L - b), lane,
                  a.bsc + (t * a.nblk + b / a.block) * a.heads + h, m, sum);
  if (lane == 0) {
    sum += (float)exp((double)(wval(a.sink, 0, h) - m));
    a.den[it] = sum;
  }
}
KERNEL(csa_attn_softmax, csa_AttnArgs) {
  for (i64 i = GIDX; i < a.rows * a.heads * 32; i += GSTRIDE) {
#ifdef DI_EMULATE
    if (i & 31) continue;
#endif
    csa_softmax_row(a, i >> 5, (int)(i & 31));
  }
}

// csa_attn_out: one (row, group of CSA_HG heads, value d) a work item, each key value
// read once for the group; each head's sum in the same order as alone.
KERNEL(csa_attn_out, csa_AttnArgs) {
  i64 groups = (a.heads + CSA_HG - 1) / CSA_HG;
  for (i64 it = GIDX; it < a.rows * groups * a.dim; it += GSTRIDE) {
    i64 d = it % a.dim, tg = it / a.dim, t = tg / groups, h0 = (tg % groups) * CSA_HG;
    i64 L = a.rlen[t];
    if (L < 0) continue;
    i64 hn = imin(CSA_HG, a.heads - h0);
    float acc[CSA_HG];
    UNROLL for (int h = 0; h < CSA_HG; h++) acc[h] = 0;
    for (i64 b = 0; b < L; b += a.block) {
      const float* bsc = a.bsc + (t * a.nblk + b / a.block) * a.heads + h0;
      UNROLL for (int h = 0; h < CSA_HG; h++)
        if (h < hn && bsc[h] >= 0) acc[h] *= bsc[h];
      i64 bl = imin(a.block, L - b);
      for (i64 e = 0; e < bl; e++) {
        i64 j = b + e;
        if (!a.valid[t * a.lmax + j]) continue;
        float v = a.kf[(t * a.lmax + j) * a.dim + d];
        const float* p = a.pb + (t * a.lmax + j) * a.heads + h0;
        UNROLL for (int h = 0; h < CSA_HG; h++)
          if (h < hn && bsc[h] >= 0) acc[h] += p[h] * v;
      }
    }
    for (i64 h = 0; h < hn; h++) {
      i64 th = t * a.heads + h0 + h;
      a.out[th * a.dim + d] = q_bf16(acc[h] / a.den[th]);
    }
  }
}

// ---- csa_attention, fast numerics mode ----
//
// The key lookup, widening and softmax are the exact kernels above; the logits and the
// output are computed here in fused multiply-adds. Each logit is one chain over the
// head's values in order, each output value one chain over the keys in order with the
// block's rescale first, as csa_attn_out: the order depends on the shapes alone (never
// on the batch). What differs from the exact kernels is the rounding (a fused
// multiply-add rounds once) and how work items share their loads. The tolerance is in
// docs/cuda.md ("Numerics modes").

// CSA_FK: the keys one csa_fast_logits work item scores (for CSA_HG heads).
#define CSA_FK 2


// csa_fast_logits_item: the logits of heads h0.. (HG of them, those that exist) and keys
// j0.. (FK, those in the row's list) of row t; pb as csa_attn_logits writes it.
template <int HG, int FK>
DEVM void csa_fast_logits_item(const csa_AttnArgs& a, i64 t, i64 h0, i64 j0, bool vec) {
  i64 L = a.rlen[t];
  if (j0 >= L) return;  // past the row's keys, or a row in no view (-1)
  i64 hn = imin(HG, a.heads - h0), jn = imin(FK, L - j0);
  const float* q = a.q + (t * a.heads + h0) * a.dim;
  const float* kr[FK];
  // a key past the row's list reads the first one again (its logits are not written)
  UNROLL for (int k = 0; k < FK; k++) kr[k] = a.kf + (t * a.lmax + j0 + (k < jn ? k : 0)) * a.dim;
  float acc[FK][HG];
  UNROLL for (int k = 0; k < FK; k++) UNROLL for (int h = 0; h < HG; h++) acc[k][h] = 0;
  i64 d = 0;
  if (vec) {
    for (; d < a.dim; d += 4) {
      float4 kv[FK];
      UNROLL for (int k = 0; k < FK; k++) kv[k] = *(const float4*)(kr[k] + d);
      UNROLL for (int h = 0; h < HG; h++) {
        if (h < hn) {
          float4 x = *(const float4*)(q + h * a.dim + d);
          UNROLL for (int k = 0; k < FK; k++) {
            acc[k][h] = fmaf(x.x, kv[k].x, acc[k][h]);
            acc[k][h] = fmaf(x.y, kv[k].y, acc[k][h]);
            acc[k][h] = fmaf(x.z, kv[k].z, acc[k][h]);
            acc[k][h] = fmaf(x.w, kv[k].w, acc[k][h]);
          }
        }
      }
    }
  }
  for (; d < a.dim; d++) {
    float kv[FK];
    UNROLL for (int k = 0; k < FK; k++) kv[k] = kr[k][d];
    UNROLL for (int h = 0; h < HG; h++) {
      if (h < hn) {
        float x = q[h * a.dim + d];
        UNROLL for (int k = 0; k < FK; k++) acc[k][h] = fmaf(x, kv[k], acc[k][h]);
      }
    }
  }
  UNROLL for (int k = 0; k < FK; k++) {
    if (k >= jn) break;
    i64 tj = t * a.lmax + j0 + k;
    float* pb = a.pb + tj * a.heads + h0;
    bool ok = a.valid[tj] != 0;
    // (h a constant of the unrolled loop: acc stays in registers)
    UNROLL for (int h = 0; h < HG; h++)
      if (h < hn) pb[h] = ok ? acc[k][h] * (float)a.scale : -F32_INF;
  }
}

// csa_fast_logits: the logits of larger steps, a launch block of 128 threads per (row,
// CSA_TH heads, CSA_TK keys): per stage of CSA_TD dim values the block copies the heads'
// query values and the keys' values into shared memory (transposed, a row of odd length
// so that neither the copies nor the reads collide in a bank), then each thread runs its
// 4 heads × 4 keys' chains over the stage's values in order. Each logit is the same
// chain of fused multiply-adds as csa_fast_logits_item's (value d = 0, 1, ... in order
// from 0), so the same value; the emulated device runs the item loop (CSA_HG heads ×
// CSA_FK keys a work item). csa_fast_logits_n, for small steps: one (row, group of 4
// heads, key) a work item.
#define CSA_TH 64
#define CSA_TK 32
#define CSA_TD 32
KERNEL(csa_fast_logits, csa_AttnArgs) {
#ifdef DI_EMULATE
  (void)GIDX;
  (void)GSTRIDE;
  i64 groups = (a.heads + CSA_HG - 1) / CSA_HG, kp = (a.lmax + CSA_FK - 1) / CSA_FK;
  bool vec = (a.dim & 3) == 0 && csa_al16(a.q) && csa_al16(a.kf);
  for (i64 it = 0; it < a.rows * groups * kp; it++) {
    i64 tg = it / kp;
    csa_fast_logits_item<CSA_HG, CSA_FK>(a, tg / groups, (tg % groups) * CSA_HG, (it % kp) * CSA_FK, vec);
  }
#else
  (void)GSTRIDE;
  __shared__ float qs[CSA_TD][CSA_TH + 1];
  __shared__ float ks[CSA_TD][CSA_TK + 1];
  const i64 htiles = (a.heads + CSA_TH - 1) / CSA_TH, ktiles = (a.lmax + CSA_TK - 1) / CSA_TK;
  const i64 blk = GIDX >> 7;
  const int tid = (int)(GIDX & 127), hq = tid & 15, kq = tid >> 4;
  const i64 kt = blk % ktiles, ht = (blk / ktiles) % htiles, t = blk / (ktiles * htiles);
  const i64 L = a.rlen[t], j0 = kt * CSA_TK, h0 = ht * CSA_TH;
  if (j0 >= L) return;  // the whole block: past the row's keys, or a row in no view (-1)
  const float* q = a.q + t * a.heads * a.dim;
  const float* kf = a.kf + t * a.lmax * a.dim;
  float acc[4][4];
  UNROLL for (int h = 0; h < 4; h++) UNROLL for (int k = 0; k < 4; k++) acc[h][k] = 0;
  for (i64 d0 = 0; d0 < a.dim; d0 += CSA_TD) {
    const int nd = (int)imin(CSA_TD, a.dim - d0);
    // the stage: adjacent threads copy adjacent dim values (coalesced reads)
    for (int e = tid; e < CSA_TD * CSA_TH; e += 128) {
      const int hh = e / CSA_TD, dd = e % CSA_TD;
      const i64 h = h0 + hh;
      qs[dd][hh] = h < a.heads && dd < nd ? q[h * a.dim + d0 + dd] : 0.0f;
    }
    for (int e = tid; e < CSA_TD * CSA_TK; e += 128) {
      const int kk = e / CSA_TD, dd = e % CSA_TD;
      const i64 j = j0 + kk;
      ks[dd][kk] = j < L && dd < nd ? kf[j * a.dim + d0 + dd] : 0.0f;
    }
    __syncthreads();
    for (int dd = 0; dd < nd; dd++) {
      float qv[4], kv[4];
      UNROLL for (int u = 0; u < 4; u++) qv[u] = qs[dd][4 * hq + u], kv[u] = ks[dd][4 * kq + u];
      UNROLL for (int h = 0; h < 4; h++) UNROLL for (int k = 0; k < 4; k++) acc[h][k] = fmaf(qv[h], kv[k], acc[h][k]);
    }
    __syncthreads();
  }
  UNROLL for (int k = 0; k < 4; k++) {
    const i64 j = j0 + 4 * kq + k;
    if (j >= L) continue;
    const i64 tj = t * a.lmax + j;
    const bool ok = a.valid[tj] != 0;
    float* pb = a.pb + tj * a.heads;
    UNROLL for (int h = 0; h < 4; h++) {
      const i64 hh = h0 + 4 * hq + h;
      if (hh < a.heads) pb[hh] = ok ? acc[h][k] * (float)a.scale : -F32_INF;
    }
  }
#endif
}
KERNEL(csa_fast_logits_n, csa_AttnArgs) {
  i64 groups = (a.heads + 3) / 4;
  bool vec = (a.dim & 3) == 0 && csa_al16(a.q) && csa_al16(a.kf);
  for (i64 it = GIDX; it < a.rows * groups * a.lmax; it += GSTRIDE) {
    i64 tg = it / a.lmax;
    csa_fast_logits_item<4, 1>(a, tg / groups, (tg % groups) * 4, it % a.lmax, vec);
  }
}

// csa_fast_out_key adds key tj's term to the output values d0..d0+dn-1 of heads
// h0..h0+hn-1: a fused multiply-add of the key's bf16 probability (csa_attn_softmax's
// pb; 0 for an empty slot, whose pb is its -inf logit) and its value. vk, vp: the key's
// values and the probabilities loaded four at a time.
template <int HG, int DV>
DEVM void csa_fast_out_key(const csa_AttnArgs& a, i64 tj, i64 h0, i64 d0, i64 hn, i64 dn, bool vk, bool vp,
                           float (&acc)[HG][DV]) {
  bool ok = a.valid[tj] != 0;
  const float* kr = a.kf + tj * a.dim + d0;
  const float* pr = a.pb + tj * a.heads + h0;
  float kv[DV], p[HG];
  if (vk) {
    float4 x = *(const float4*)kr;
    float xs[4] = {x.x, x.y, x.z, x.w};
    UNROLL for (int v = 0; v < DV; v++) kv[v] = xs[v & 3];
  } else {
    UNROLL for (int v = 0; v < DV; v++) kv[v] = v < dn ? kr[v] : 0.0f;
  }
  if (vp) {
    UNROLL for (int h = 0; h + 3 < HG; h += 4) {
      float4 x = *(const float4*)(pr + h);
      p[h] = x.x, p[h + 1] = x.y, p[h + 2] = x.z, p[h + 3] = x.w;
    }
  } else {
    UNROLL for (int h = 0; h < HG; h++) p[h] = h < hn ? pr[h] : 0.0f;
  }
  UNROLL for (int h = 0; h < HG; h++) {
    float ph = ok ? p[h] : 0.0f;
    UNROLL for (int v = 0; v < DV; v++) acc[h][v] = fmaf(ph, kv[v], acc[h][v]);
  }
}

// csa_fast_out_item: output values d0..d0+DV-1 of heads h0..h0+HG-1 (those that exist)
// of row t: per block the rescale, then the block's keys in order (csa_fast_out_key).
// A small item (the narrow kernel's, for small steps, where a key's loads wait on
// memory rather than on arithmetic) keeps 8 keys' loads in flight, a large one 2.
template <int HG, int DV>
DEVM void csa_fast_out_item(const csa_AttnArgs& a, i64 t, i64 h0, i64 d0) {
  i64 L = a.rlen[t];
  if (L < 0) return;
  i64 hn = imin(HG, a.heads - h0), dn = imin(DV, a.dim - d0);
  bool vk = DV == 4 && dn == 4 && (a.dim & 3) == 0 && csa_al16(a.kf);
  bool vp = HG % 4 == 0 && hn == HG && (a.heads & 3) == 0 && (h0 & 3) == 0 && csa_al16(a.pb);
  float acc[HG][DV];
  UNROLL for (int h = 0; h < HG; h++) UNROLL for (int v = 0; v < DV; v++) acc[h][v] = 0;
  for (i64 b = 0; b < L; b += a.block) {
    const float* bsc = a.bsc + (t * a.nblk + b / a.block) * a.heads + h0;
    UNROLL for (int h = 0; h < HG; h++) {
      float s = h < hn ? bsc[h] : -1.0f;
      if (s >= 0) UNROLL for (int v = 0; v < DV; v++) acc[h][v] *= s;
    }
    i64 be = imin(b + a.block, L);
    if (HG * DV > 4) {
      UNROLL_BY(2)
      for (i64 j = b; j < be; j++) csa_fast_out_key<HG, DV>(a, t * a.lmax + j, h0, d0, hn, dn, vk, vp, acc);
    } else {
      UNROLL_BY(8)
      for (i64 j = b; j < be; j++) csa_fast_out_key<HG, DV>(a, t * a.lmax + j, h0, d0, hn, dn, vk, vp, acc);
    }
  }
  UNROLL for (int h = 0; h < HG; h++) {
    if (h >= hn) break;
    i64 th = t * a.heads + h0 + h;
    float den = a.den[th];
    UNROLL for (int v = 0; v < DV; v++)
      if (v < dn) a.out[th * a.dim + d0 + v] = q_bf16(acc[h][v] / den);
  }
}

// csa_fast_out: one (row, group of CSA_HG heads, 4 values) a work item, the values
// fastest (a key row's loads coalesced across a warp, its probabilities one address);
// csa_fast_out_n, for small steps: one (row, head, value) a work item, 64× the items (a
// latency-bound kernel at batch 1: run 13d measured 4 heads a work item at 64 launch
// blocks, 6.3% achieved occupancy; run 14 times 1 head, 4× the keys' loads in flight). Each output value is the same chain in both, so the same value. (A launch
// block per (row, 64 heads, 32 values) with the stages in shared memory, tried in run
// 11c on the H200, took 8.42 ms against this kernel's 4.14 at batch 256.)
KERNEL(csa_fast_out, csa_AttnArgs) {
  i64 groups = (a.heads + CSA_HG - 1) / CSA_HG, nd = (a.dim + 3) / 4;
  for (i64 it = GIDX; it < a.rows * groups * nd; it += GSTRIDE) {
    i64 tg = it / nd;
    csa_fast_out_item<CSA_HG, 4>(a, tg / groups, (tg % groups) * CSA_HG, (it % nd) * 4);
  }
}

KERNEL(csa_fast_out_n, csa_AttnArgs) {
  for (i64 it = GIDX; it < a.rows * a.heads * a.dim; it += GSTRIDE) {
    i64 th = it / a.dim;
    csa_fast_out_item<1, 1>(a, th / a.heads, th % a.heads, it % a.dim);
  }
}

#ifndef DI_EMULATE
// csa_pack_group_lanes is csa_pack_group on a warp: the group's largest magnitude by
// shuffles (a maximum whatever the order; a NaN's payload does not reach the codes or
// the scale byte), then value j on lane j mod 32 (FP4: a byte, values 2p and 2p + 1, on
// lane p mod 32; a group of an odd length, whose bytes it would share, on lane 0 alone).
DEV void csa_pack_group_lanes(const float* x, i64 fmt, i64 g, i64 dim, i64 gi, unsigned char* dst, int lane) {
  const float* grp = x + gi * g;
  if (fmt == 0) {
    float* o = (float*)dst;
    for (i64 j = lane; j < g; j += 32) o[gi * g + j] = grp[j];
    return;
  }
  if (fmt != 1 && (g & 1)) {
    if (lane == 0) csa_pack_group(x, fmt, g, dim, gi, dst);
    return;
  }
  float amax = 0;
  for (i64 j = lane; j < g; j += 32) amax = go_max32(amax, fabsf(grp[j]));
  for (int off = 16; off >= 1; off >>= 1) amax = go_max32(amax, __shfl_xor_sync(0xffffffffu, amax, off));
  const float s = csa_fmt_scale(fmt, amax);
  if (lane == 0) dst[csa_code_bytes(fmt, dim) + gi] = fmt == 3 ? q_enc_e4m3(s) : (unsigned char)(bits_f32(s) >> 23);
  if (fmt == 1) {
    for (i64 j = lane; j < g; j += 32) dst[gi * g + j] = q_enc_e4m3(go_min32(go_max32(grp[j] / s, -448.0f), 448.0f));
    return;
  }
  for (i64 p = lane; 2 * p < g; p += 32) {
    const unsigned char c0 = q_enc_e2m1(go_min32(go_max32(grp[2 * p] / s, -6.0f), 6.0f));
    const unsigned char c1 = q_enc_e2m1(go_min32(go_max32(grp[2 * p + 1] / s, -6.0f), 6.0f));
    dst[(gi * g + 2 * p) / 2] = (unsigned char)(c0 | (c1 << 4));
  }
}
#endif

// csa_ring_push: the step's rows into the window ring (the last ring_rows of them), a
// warp a group of a row (csa_pack_group_lanes; it was a thread a group, its 64 values'
// maximum and codes one after another: 17 µs a launch at batch 1 in run 29b's profile).
// The emulated device packs a group on one thread.
KERNEL(csa_ring_push, csa_AttnArgs) {
  i64 ng = a.dim / a.ring_group;
#ifdef DI_EMULATE
  for (i64 it = GIDX; it < a.rows * ng; it += GSTRIDE) {
#else
  const int lane = (int)(GIDX & 31);
  for (i64 it = GIDX >> 5; it < a.rows * ng; it += GSTRIDE >> 5) {
#endif
    i64 t = it / ng, gi = it % ng;
    csa_View v;
    if (!csa_view_at(a.seqs, a.nseq, a.keep, t, &v)) continue;  // (the same for a warp's lanes)
    i64 i = t - v.row;
    if (i < v.n - a.ring_rows) continue;
    i64 q = v.pos + i;
    unsigned char* dst = v.state + a.ring_off + (q % a.ring_rows) * a.ring_rowbytes;
#ifdef DI_EMULATE
    csa_pack_group(a.kv + t * a.dim, a.ring_fmt, a.ring_group, a.dim, gi, dst);
#else
    csa_pack_group_lanes(a.kv + t * a.dim, a.ring_fmt, a.ring_group, a.dim, gi, dst, lane);
#endif
  }
}
