// dspark41.cu: DeepSeek-V4.1's DSpark drafter (cpu: targets/cpu/v41_dspark.go).
//
// A DSpark stage's window ring lives in each sequence's state block (ops_dspark41.go
// claims it as "dspark.ring.<layer>"): cap i64 position tags (position + 1 of the row a
// slot holds, 0 for an empty slot), then cap rows of dim float32 values. Position p
// sits in slot p % cap. The cpu stores the rows as MXFP8; the ring here keeps the
// values the cpu would unpack (quantized, then dequantized on store).
//
// dspark_push writes the ring at prefill and decode; the draft phase only reads it
// (dspark_attention), and dspark_head touches no state, so a draft step changes nothing
// that later steps see.

// dspark_mxfp8 is one value of a row packed and unpacked as MXFP8 with scale s
// (quant.Format.Pack, then Unpack).
DEV float dspark_mxfp8(float v, float s) {
  float c = go_min32(go_max32(v / s, -448.0f), 448.0f);
  return e4m3_f32(q_enc_e4m3(c)) * s;
}

// dspark_push: pushed row r's place: its ring row and its position (false: r is no
// sequence's pushed row, or a later row of the push fills its slot). rows of kv are the
// step's tokens, or with keep > 0 each sequence's last keep rows, packed; a sequence
// keeps only its last cap.
struct DSparkPushArgs { const float* kv; const SeqRec* seqs; i64 nseq; i64 rows; i64 dim; i64 cap; i64 keep; i64 off; i64 mxfp8; };
DEV bool dspark_push_at(const DSparkPushArgs& a, i64 r, float** dst, i64** tag, i64* pos) {
  i64 start = 0, n = 0;
  const i64 q = seq_view_at(a.seqs, a.nseq, a.keep, r, &start, &n);
  if (q < 0) return false;
  const SeqRec sq = a.seqs[q];
  const i64 i = r - start;
  if (i < n - a.cap) return false;  // dropped: later rows of the push fill its slot
  *pos = sq.pos + sq.n - n + i;
  char* st = (char*)sq.state + a.off;
  *tag = (i64*)st + *pos % a.cap;
  *dst = (float*)(st + 8 * a.cap) + (*pos % a.cap) * a.dim;
  return true;
}

// dspark_push_group: pushed row r's group of 32 values from g on one thread (what the
// emulated device runs; the warp form's reference).
DEV void dspark_push_group(const DSparkPushArgs& a, i64 r, i64 g) {
  i64 ge = imin(g + 32, a.dim), pos;
  float* dst;
  i64* tag;
  if (!dspark_push_at(a, r, &dst, &tag, &pos)) return;
  const float* src = a.kv + r * a.dim;
  if (!a.mxfp8) {
    for (i64 d = g; d < ge; d++) dst[d] = src[d];
  } else {
    float amax = 0;
    for (i64 d = g; d < ge; d++) amax = go_max32(amax, fabsf(src[d]));
    float s = q_pow2ceil(go_max32(amax, 1e-4f) * (float)(1.0 / 448));
    for (i64 d = g; d < ge; d++) dst[d] = dspark_mxfp8(src[d], s);
  }
  if (g == 0) *tag = pos + 1;
}

// dspark_push: a warp a (pushed row, group of 32 values), a value a lane, the group's
// largest magnitude by shuffles (a maximum whatever the order); the group holding
// value 0 writes the position tag. (It was a thread a group, its 32 values one after
// another: 17 µs a launch at batch 1 in run 29b's profile.) The emulated device packs a
// group on one thread.
KERNEL(dspark_push, DSparkPushArgs) {
  i64 groups = (a.dim + 31) / 32;
#ifdef DI_EMULATE
  for (i64 it = GIDX; it < a.rows * groups; it += GSTRIDE) dspark_push_group(a, it / groups, (it % groups) * 32);
#else
  const int lane = (int)(GIDX & 31);
  for (i64 it = GIDX >> 5; it < a.rows * groups; it += GSTRIDE >> 5) {
    i64 r = it / groups, g = (it % groups) * 32, pos;
    float* dst;
    i64* tag;
    if (!dspark_push_at(a, r, &dst, &tag, &pos)) continue;  // (the same for a warp's lanes)
    const i64 d = g + lane;
    const bool in = d < a.dim;
    const float v = in ? a.kv[r * a.dim + d] : 0.0f;
    if (!a.mxfp8) {
      if (in) dst[d] = v;
    } else {
      float amax = go_max32(0.0f, fabsf(v));
      for (int off = 16; off >= 1; off >>= 1) amax = go_max32(amax, __shfl_xor_sync(0xffffffffu, amax, off));
      const float s = q_pow2ceil(go_max32(amax, 1e-4f) * (float)(1.0 / 448));
      if (in) dst[d] = dspark_mxfp8(v, s);
    }
    if (g == 0 && lane == 0) *tag = pos + 1;
  }
#endif
}

// dspark_attention: one work item per (token, head). A sequence's block starts at the
// position after its last decoded token p; its keys are the ring's rows at positions
// p - (p-j) % window for j < min(window, p+1), then the block's own rows (not causal),
// through the V4.1 block online softmax (cpu: blockSoftmax): the keys in chunks of
// `block`, each chunk's scores' maximum, its probabilities exp(score − m) summed by
// cascade_sum and, rounded to bf16, multiplied into the accumulators in key order.
struct DSparkAttnArgs {
  const float* q; const float* kv; Weight sink; float* out; const SeqRec* seqs; i64 nseq; i64 T;
  i64 heads; i64 dim; i64 window; i64 block; double scale; i64 off; i64 cap; float* scratch; i64* err;
  i64 stride;  // scratch floats a work item (Go's dsparkAttnStride)
};
// DSPARK_ATT_DMAX: the largest head_dim whose accumulators the warp form keeps in
// registers (DSPARK_ATT_DMAX / 32 a lane); a larger one runs dspark_attn_item at lane 0.
#define DSPARK_ATT_DMAX 1024
// dspark_attn_seq: the sequence holding row t, -1 if none.
DEVM i64 dspark_attn_seq(const DSparkAttnArgs& a, i64 t) { return seq_find(a.seqs, a.nseq, t); }
// dspark_attn_key: key e of the sequence's block (nring ring rows, then the block's own).
DEVM const float* dspark_attn_key(const DSparkAttnArgs& a, const SeqRec& sq, const float* ring, i64 p, i64 nring,
                                  i64 e) {
  if (e < nring) return ring + ((p - (p - e) % a.window) % a.cap) * a.dim;
  return a.kv + (sq.row + e - nring) * a.dim;
}
// dspark_attn_item: work item it, serially (the emulated device; the device's warps past
// DSPARK_ATT_DMAX or with more keys than their scratch holds). s: block + dim floats.
DEVM void dspark_attn_item(const DSparkAttnArgs& a, i64 it, float* s) {
  i64 t = it / a.heads, h = it % a.heads;
  i64 qi = dspark_attn_seq(a, t);
  if (qi < 0) return;
  const SeqRec sq = a.seqs[qi];
  i64 p = sq.pos - 1;
  if (p < 0) { *a.err = 501; return; }
  const char* st = (const char*)sq.state + a.off;
  const i64* tags = (const i64*)st;
  const float* ring = (const float*)(st + 8 * a.cap);
  i64 nring = imin(a.window, p + 1);
  bool ok = a.cap > 0;
  for (i64 j = 0; ok && j < nring; j++) {
    i64 qp = p - (p - j) % a.window;
    if (tags[qp % a.cap] != qp + 1) ok = false;
  }
  if (!ok) { *a.err = 502; return; }
  i64 nk = nring + sq.n;
  float scale = (float)a.scale;
  const float* qh = a.q + (t * a.heads + h) * a.dim;
  float* acc = s + a.block;
  float m = -F32_INF, sum = 0;
  for (i64 d = 0; d < a.dim; d++) acc[d] = 0;
  for (i64 b0 = 0; b0 < nk; b0 += a.block) {
    i64 b1 = imin(b0 + a.block, nk);
    float bm = m;
    for (i64 e = b0; e < b1; e++) {
      const float* k = dspark_attn_key(a, sq, ring, p, nring, e);
      float dot = 0;
      for (i64 d = 0; d < a.dim; d++) dot += qh[d] * k[d];
      s[e - b0] = dot * scale;
      bm = go_max32(bm, s[e - b0]);
    }
    if (bm == -F32_INF) continue;
    float sc = (float)exp((double)(m - bm));
    m = bm;
    for (i64 d = 0; d < a.dim; d++) acc[d] *= sc;
    for (i64 e = b0; e < b1; e++) {
      const float* k = dspark_attn_key(a, sq, ring, p, nring, e);
      float pr = (float)exp((double)(s[e - b0] - m));
      s[e - b0] = pr;
      float pb = q_bf16(pr);
      for (i64 d = 0; d < a.dim; d++) acc[d] += pb * k[d];
    }
    FRow sr = {s};
    float bsum = cascade_sum(sr, b1 - b0);
    sum = sum * sc + bsum;
  }
  sum += (float)exp((double)(wval(a.sink, 0, h) - m));
  float* o = a.out + (t * a.heads + h) * a.dim;
  for (i64 d = 0; d < a.dim; d++) o[d] = q_bf16(acc[d] / sum);
}
#ifndef DI_EMULATE
// dspark_attn_warp: work item it by a warp, the serial form's values bit for bit: lane l
// checks the ring's tags j = l, l + 32, …; computes the scores of keys l, l + 32, … (each
// dot in d order, as the serial form) into the item's scratch; then chunk by chunk (the
// softmax's blocks of `block` keys, 64 in V4.1's plans) every lane takes the chunk's
// maximum in key order (the same go_max32 chain), lane l the probabilities of the chunk's
// keys l, l + 32, …, and the accumulators of values l, l + 32, … in key order; every
// lane sums the chunk's probabilities by cascade_sum. Until this form a
// thread ran a whole item (18.3 ms of a 100 ms draft step at 64 requests in run 29d).
DEV void dspark_attn_warp(const DSparkAttnArgs& a, i64 it, int lane) {
  const i64 t = it / a.heads, h = it % a.heads;
  const i64 qi = dspark_attn_seq(a, t);
  if (qi < 0) return;
  const SeqRec sq = a.seqs[qi];
  const i64 p = sq.pos - 1;
  if (p < 0) {
    if (lane == 0) *a.err = 501;
    return;
  }
  const char* st = (const char*)sq.state + a.off;
  const i64* tags = (const i64*)st;
  const float* ring = (const float*)(st + 8 * a.cap);
  const i64 nring = imin(a.window, p + 1);
  bool bad = a.cap <= 0;
  for (i64 j = lane; !bad && j < nring; j += 32) {
    const i64 qp = p - (p - j) % a.window;
    if (tags[qp % a.cap] != qp + 1) bad = true;
  }
  if (__any_sync(0xffffffffu, bad)) {
    if (lane == 0) *a.err = 502;
    return;
  }
  const i64 nk = nring + sq.n;
  float* s = a.scratch + it * a.stride;
  if (a.dim > DSPARK_ATT_DMAX || nk > a.stride) {  // (the whole warp)
    if (lane == 0) dspark_attn_item(a, it, s);
    return;
  }
  const float scale = (float)a.scale;
  const float* qh = a.q + (t * a.heads + h) * a.dim;
  for (i64 e = lane; e < nk; e += 32) {
    const float* k = dspark_attn_key(a, sq, ring, p, nring, e);
    float dot = 0;
    for (i64 d = 0; d < a.dim; d++) dot += qh[d] * k[d];
    s[e] = dot * scale;
  }
  __syncwarp();
  float acc[DSPARK_ATT_DMAX / 32];
  UNROLL for (int r = 0; r < DSPARK_ATT_DMAX / 32; r++) acc[r] = 0;
  float m = -F32_INF, sum = 0;
  for (i64 b0 = 0; b0 < nk; b0 += a.block) {
    const i64 b1 = imin(b0 + a.block, nk);
    float bm = m;
    for (i64 e = b0; e < b1; e++) bm = go_max32(bm, s[e]);
    if (bm == -F32_INF) continue;
    const float sc = (float)exp((double)(m - bm));
    m = bm;
    UNROLL for (int r = 0; r < DSPARK_ATT_DMAX / 32; r++) acc[r] *= sc;
    __syncwarp();  // (every lane has read the chunk's scores)
    for (i64 e = b0 + lane; e < b1; e += 32) s[e] = (float)exp((double)(s[e] - m));
    __syncwarp();
    for (i64 e = b0; e < b1; e++) {
      const float* k = dspark_attn_key(a, sq, ring, p, nring, e);
      const float pb = q_bf16(s[e]);
      UNROLL for (int r = 0; r < DSPARK_ATT_DMAX / 32; r++) {
        const i64 d = lane + 32 * r;
        if (d < a.dim) acc[r] += pb * k[d];
      }
    }
    FRow sr = {s + b0};
    sum = sum * sc + cascade_sum(sr, b1 - b0);
  }
  sum += (float)exp((double)(wval(a.sink, 0, h) - m));
  float* o = a.out + (t * a.heads + h) * a.dim;
  UNROLL for (int r = 0; r < DSPARK_ATT_DMAX / 32; r++) {
    const i64 d = lane + 32 * r;
    if (d < a.dim) o[d] = q_bf16(acc[r] / sum);
  }
}
#endif
// A warp a work item on the device (dspark_attn_warp), lane 0 of each running
// dspark_attn_item on the emulated device.
KERNEL(dspark_attention, DSparkAttnArgs) {
  for (i64 w = GIDX; w < a.T * a.heads * 32; w += GSTRIDE) {
    const i64 it = w >> 5;
    const int lane = (int)(w & 31);
#ifdef DI_EMULATE
    if (lane == 0) dspark_attn_item(a, it, a.scratch + it * a.stride);
#else
    dspark_attn_warp(a, it, lane);
#endif
  }
}

// dspark_dot_unitary is gonum's f32.DotUnitary (amd64 SSE) of x[k0:k0+n] and
// y[k0:k0+n]: `trim` leading products into lane 0 while y is not 16-byte aligned, then
// 16 at a time into two 4-lane sums, 4 at a time, one at a time into lane 0, and the
// lanes added pairwise (HADDPS twice).
template <class X, class Y>
DEVM float dspark_dot_unitary(X x, Y y, i64 k0, i64 n, i64 trim) {
  float sum[4] = {0, 0, 0, 0}, ps[4] = {0, 0, 0, 0};
  i64 i = k0, len = n;
  if (len == 0) return 0;
  for (i64 j = 0; j < trim && len > 0; j++, i++, len--) sum[0] += x(i) * y(i);
  if (len == 0) return (sum[0] + sum[1]) + (sum[2] + sum[3]);
  i64 tail = len % 16;
  i64 loops = len / 16;
  if (loops > 0) {
    for (i64 l = 0; l < loops; l++, i += 16) {
      for (int c = 0; c < 4; c++) sum[c] += x(i + c) * y(i + c);
      for (int c = 0; c < 4; c++) ps[c] += x(i + 4 + c) * y(i + 4 + c);
      for (int c = 0; c < 4; c++) sum[c] += x(i + 8 + c) * y(i + 8 + c);
      for (int c = 0; c < 4; c++) ps[c] += x(i + 12 + c) * y(i + 12 + c);
    }
    for (int c = 0; c < 4; c++) sum[c] += ps[c];
  }
  for (i64 l = 0; l < tail / 4; l++, i += 4)
    for (int c = 0; c < 4; c++) sum[c] += x(i + c) * y(i + c);
  for (i64 l = 0; l < tail % 4; l++, i++) sum[0] += x(i) * y(i);
  return (sum[0] + sum[1]) + (sum[2] + sum[3]);
}

// dspark_gemm_nt is element [·, row] of the cpu's gemmNT (gonum Sgemm, A·Bᵀ, alpha 1,
// beta 0) for an x row against weight row `row` of K values: in 64-wide k blocks when
// gonum goes parallel (at least 4 blocks of 64×64 in m×n), else one dot. y's alignment
// assumes the weight's base is 16-byte aligned, as Go allocates the widened weights.
template <class X, class Y>
DEVM float dspark_gemm_nt(X x, Y y, i64 row, i64 K, bool parallel) {
  float c = 0;
  i64 step = parallel ? 64 : K;
  if (step <= 0) return c;
  for (i64 k0 = 0; k0 < K; k0 += step) {
    i64 n = imin(step, K - k0);
    i64 mis = ((row * K + k0) * 4) & 15;
    i64 trim = mis ? (16 - mis) / 4 : 0;
    c += dspark_dot_unitary(x, y, k0, n, trim);
  }
  return c;
}

DEV bool dspark_gonum_parallel(i64 m, i64 n) { return true; }

// dspark_head_logits: logits[t, v] = head[v]·hn[t] (cpu: gemmRows).
struct DSparkLogitsArgs { const float* hn; Weight head; float* logits; i64 T; i64 V; i64 D; i64 block; i64* err; };
KERNEL(dspark_head_logits, DSparkLogitsArgs) {
  for (i64 i = GIDX; i < a.T * a.V; i += GSTRIDE) {
    if (a.T % a.block != 0) {
      if (i == 0) *a.err = 503;
      continue;
    }
    i64 t = i / a.V, v = i % a.V;
    FRow x = {a.hn + t * a.D};
    WRow y = {a.head, v};
    a.logits[i] = dspark_gemm_nt(x, y, v, a.D, dspark_gonum_parallel(a.T, a.V));
  }
}

// dspark_head_tok is the token before row i of block b: the anchor, then each draft.
DEV int dspark_head_tok(const int* tokens, const int* ids, i64 b, i64 i, i64 block) {
  return i == 0 ? tokens[b * block] : ids[b * block + i - 1];
}

// dspark_head_bias: for row i of every block, logits += markov_head·markov_embed[tok].
// Each (block, entry)'s dot is dspark_gemm_nt's, in its order, however the work is laid
// out. On the device (rank ≤ DSPARK_BIAS_RMAX): a launch block a tile of
// DSPARK_BIAS_ROWS vocabulary entries, their head rows staged in shared memory by
// coalesced loads (each row padded by one value, so the lanes' rows sit in different
// banks), lane l computing entry v0 + l; warp w takes blocks w, w + 4, …, staging each
// block's embedding row once for its 32 lanes. Until run 29 a thread an entry read its
// head row from memory for every block (at 64 blocks, 11 ms a launch on the H200; until
// run 28 a thread a (block, entry)). The emulated device (and a larger rank) runs a
// thread an entry looping over the blocks.
#define DSPARK_BIAS_ROWS 32
#define DSPARK_BIAS_RMAX 256
struct DSparkBiasArgs { const int* tokens; const int* ids; Weight membed; Weight mhead; float* logits; i64 T; i64 V; i64 R; i64 block; i64 i; i64* err; };
// dspark_bias_entry: entry v's bias for every block, a block at a time (the serial form).
DEVM void dspark_bias_entry(const DSparkBiasArgs& a, i64 v, i64 nb) {
  WRow y = {a.mhead, v};
  for (i64 b = 0; b < nb; b++) {
    int tok = dspark_head_tok(a.tokens, a.ids, b, a.i, a.block);
    if (tok < 0 || tok >= a.V) {
      if (v == 0) *a.err = 504;
      continue;
    }
    WRow x = {a.membed, tok};
    float bias = dspark_gemm_nt(x, y, v, a.R, dspark_gonum_parallel(1, a.V));
    a.logits[(b * a.block + a.i) * a.V + v] += bias;
  }
}
// dspark_bias_tiled: whether the device runs the tiles (Go's launch size follows it).
DEVM bool dspark_bias_tiled(const DSparkBiasArgs& a) { return a.R <= DSPARK_BIAS_RMAX; }
KERNEL(dspark_head_bias, DSparkBiasArgs) {
  const i64 nb = a.T % a.block == 0 ? a.T / a.block : 0;
#ifndef DI_EMULATE
  if (dspark_bias_tiled(a)) {
    __shared__ float hs[DSPARK_BIAS_ROWS][DSPARK_BIAS_RMAX + 1];
    __shared__ float es[4][DSPARK_BIAS_RMAX];
    const i64 tiles = nb > 0 ? (a.V + DSPARK_BIAS_ROWS - 1) / DSPARK_BIAS_ROWS : 0;
    // (a block's threads take the same trips: GSTRIDE is a multiple of 128)
    for (i64 it = GIDX; it < tiles * 128; it += GSTRIDE) {
      const i64 v0 = it / 128 * DSPARK_BIAS_ROWS;
      const int tid = (int)(it % 128), w = tid >> 5, l = tid & 31;
      for (i64 q = tid; q < DSPARK_BIAS_ROWS * a.R; q += 128) {
        const i64 r = q / a.R, k = q % a.R;
        hs[r][k] = v0 + r < a.V ? wval(a.mhead, v0 + r, k) : 0.0f;
      }
      __syncthreads();
      const i64 v = v0 + l;
      for (i64 b = w; b < nb; b += 4) {
        const int tok = dspark_head_tok(a.tokens, a.ids, b, a.i, a.block);  // (the warp's)
        if (tok < 0 || tok >= a.V) {
          if (v == 0) *a.err = 504;
          continue;
        }
        for (i64 k = l; k < a.R; k += 32) es[w][k] = wval(a.membed, tok, k);
        __syncwarp();
        if (v < a.V) {
          FRow x = {es[w]}, y = {hs[l]};
          const float bias = dspark_gemm_nt(x, y, v, a.R, dspark_gonum_parallel(1, a.V));
          a.logits[(b * a.block + a.i) * a.V + v] += bias;
        }
        __syncwarp();  // every lane's dot read es before the next block's row
      }
      __syncthreads();  // every warp done with hs before the next tile's rows
    }
    return;
  }
#endif
  for (i64 v = GIDX; v < (nb > 0 ? a.V : 0); v += GSTRIDE) dspark_bias_entry(a, v, nb);
}

// dspark_head_pick: row i of every block drafts its argmax (NaN over numbers, the first
// of equals) and scores conf·[x, markov_embed(tok)] in float64.
struct DSparkPickArgs {
  const float* x; const int* tokens; Weight membed; Weight conf; const float* logits; int* ids; float* confOut;
  i64 T; i64 V; i64 D; i64 R; i64 block; i64 i; char* parts;
};
// DSPARK_PICK_CHUNK: the logits a warp of dspark_head_pick_part scans (Go's
// dsparkPickChunk sizes the parts' scratch).
#define DSPARK_PICK_CHUNK 4096
struct DSparkPickPart { float v; int j; };
// dspark_pick_better: whether logit a at index ia comes before b at ib in the argmax's
// order: a NaN before a number, a larger number before a smaller, of equals (or two
// NaNs) the lower index. The serial scan (replace the best when a later logit is greater,
// or is NaN where the best is not) returns the first of this order's maxima.
DEV bool dspark_pick_better(float a, i64 ia, float b, i64 ib) {
  const bool na = isnan32(a), nb = isnan32(b);
  if (na != nb) return na;
  if (!na && a != b) return a > b;
  return ia < ib;
}
// dspark_pick_store: the block's draft and its confidence (lane 0's float64 sum in order).
DEVM void dspark_pick_store(const DSparkPickArgs& a, i64 r, int tok, i64 best) {
  double c = 0;
  const float* xi = a.x + r * a.D;
  for (i64 j = 0; j < a.D; j++) c += (double)xi[j] * (double)wval(a.conf, 0, j);
  for (i64 j = 0; j < a.R; j++) c += (double)wval(a.membed, tok, j) * (double)wval(a.conf, 0, a.D + j);
  a.confOut[r] = (float)c;
  a.ids[r] = (int)best;
}
#ifndef DI_EMULATE
// dspark_pick_fold: the warp's (value, index) folded by the order (l and l ^ 16, then
// ^ 8, … ^ 1: a total order on (value, index), so every grouping gives the serial scan's
// result); every lane ends with it.
DEV void dspark_pick_fold(float* bv, i64* best) {
  for (int off = 16; off >= 1; off >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, *bv, off);
    const i64 oi = __shfl_xor_sync(0xffffffffu, *best, off);
    if (dspark_pick_better(ov, oi, *bv, *best)) *bv = ov, *best = oi;
  }
}
#endif
// dspark_head_pick_part: a warp a (block, chunk of DSPARK_PICK_CHUNK logits of its row
// i): lane l scans logits l, l + 32, … of the chunk (a lane past the row's end starts
// at its last logit, a duplicate the fold ignores), the lanes fold, and lane 0 stores
// the chunk's best in parts[block, chunk]. dspark_head_pick folds the chunks. Until run
// 29 a warp scanned a block's 129,280 logits alone (1.2 ms a launch at 64 blocks).
// Nothing on the emulated device, whose dspark_head_pick scans the row serially.
KERNEL(dspark_head_pick_part, DSparkPickArgs) {
#ifndef DI_EMULATE
  const i64 nb = a.T % a.block == 0 ? a.T / a.block : 0, nch = (a.V + DSPARK_PICK_CHUNK - 1) / DSPARK_PICK_CHUNK;
  for (i64 w = GIDX; w < nb * nch * 32; w += GSTRIDE) {
    const i64 b = (w >> 5) / nch, c = (w >> 5) % nch;
    const int lane = (int)(w & 31);
    int tok = dspark_head_tok(a.tokens, a.ids, b, a.i, a.block);
    if (tok < 0 || tok >= a.V) continue;  // (the whole warp)
    const float* row = a.logits + (b * a.block + a.i) * a.V;
    const i64 end = imin(a.V, (c + 1) * DSPARK_PICK_CHUNK);
    i64 best = imin(c * DSPARK_PICK_CHUNK + lane, a.V - 1);
    float bv = row[best];
    for (i64 j = c * DSPARK_PICK_CHUNK + lane + 32; j < end; j += 32) {
      const float v = row[j];
      if (dspark_pick_better(v, j, bv, best)) bv = v, best = j;
    }
    dspark_pick_fold(&bv, &best);
    if (lane == 0) {
      DSparkPickPart* p = (DSparkPickPart*)a.parts + b * nch + c;
      p->v = bv, p->j = (int)best;
    }
  }
#endif
}
// dspark_head_pick: a warp a block: lane l folds the block's chunk parts l, l + 32, …,
// the lanes fold, lane 0 stores the draft and its confidence. The emulated device scans
// the row serially at lane 0.
KERNEL(dspark_head_pick, DSparkPickArgs) {
  i64 nb = a.T % a.block == 0 ? a.T / a.block : 0;
  for (i64 w = GIDX; w < nb * 32; w += GSTRIDE) {
    const i64 b = w >> 5;
    const int lane = (int)(w & 31);
    int tok = dspark_head_tok(a.tokens, a.ids, b, a.i, a.block);
    if (tok < 0 || tok >= a.V) continue;  // (the whole warp)
    i64 r = b * a.block + a.i;
#ifdef DI_EMULATE
    if (lane != 0) continue;
    const float* row = a.logits + r * a.V;
    i64 best = 0;
    for (i64 j = 0; j < a.V; j++)
      if (row[j] > row[best] || (isnan32(row[j]) && !isnan32(row[best]))) best = j;
#else
    const i64 nch = (a.V + DSPARK_PICK_CHUNK - 1) / DSPARK_PICK_CHUNK;
    const DSparkPickPart* p = (const DSparkPickPart*)a.parts + b * nch;
    i64 best = p[imin(lane, nch - 1)].j;
    float bv = p[imin(lane, nch - 1)].v;
    for (i64 c = lane + 32; c < nch; c += 32)
      if (dspark_pick_better(p[c].v, p[c].j, bv, best)) bv = p[c].v, best = p[c].j;
    dspark_pick_fold(&bv, &best);
    if (lane != 0) continue;
#endif
    dspark_pick_store(a, r, tok, best);
  }
}
