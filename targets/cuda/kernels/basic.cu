// basic.cu: embedding, elementwise ops, RMSNorm (V4), the dense float32 GEMMs of V4
// (linear, lm_head) and the sampler. Each is a port of the cpu target's kernel with the
// same arithmetic in the same order (targets/cpu/dense.go, vm/sampling).

struct EmbedArgs { const int* tokens; Weight table; float* out; i64 T; i64 V; i64 D; i64* err; };
KERNEL(embed, EmbedArgs) {
  for (i64 i = GIDX; i < a.T * a.D; i += GSTRIDE) {
    i64 t = i / a.D, d = i % a.D;
    int tok = a.tokens[t];
    if (tok < 0 || tok >= a.V) { *a.err = 1; continue; }
    a.out[i] = wval(a.table, tok, d);
  }
}

struct AddArgs { const float* x; const float* y; float* z; i64 n; };
KERNEL(add, AddArgs) {
  for (i64 i = GIDX; i < a.n; i += GSTRIDE) a.z[i] = a.x[i] + a.y[i];
}

DEV float silu32(float x) { return x / (1.0f + (float)exp((double)(-x))); }

struct SwiGLUArgs { const float* g; const float* u; float* out; i64 n; double limit; };
KERNEL(swiglu, SwiGLUArgs) {
  float limit = (float)a.limit;
  for (i64 i = GIDX; i < a.n; i += GSTRIDE) {
    float gv = a.g[i], uv = a.u[i];
    if (limit > 0) {
      gv = fmin32(gv, limit);
      uv = fmax32(fmin32(uv, limit), -limit);
    }
    a.out[i] = silu32(gv) * uv;
  }
}

// rmsnorm (V4): per chunk of g values, y = x / sqrt(mean(x²) + eps) (· w), the sum of
// squares in float64.
struct RMSNormArgs { const float* x; Weight w; float* y; i64 chunks; i64 g; double eps; i64 weighted; };
KERNEL(rmsnorm, RMSNormArgs) {
  for (i64 c = GIDX; c < a.chunks; c += GSTRIDE) {
    const float* x = a.x + c * a.g;
    float* y = a.y + c * a.g;
    double ss = 0;
    for (i64 i = 0; i < a.g; i++) ss += (double)x[i] * (double)x[i];
    double inv = 1.0 / sqrt(ss / (double)a.g + a.eps);
    for (i64 i = 0; i < a.g; i++) {
      float v = (float)((double)x[i] * inv);
      y[i] = a.weighted ? v * wval(a.w, 0, i) : v;
    }
  }
}

// gemm_nt: c[m, n] = Σ_k a[m, k]·w[n, k] in float32, in gonum's order (blocks of 64 of
// DotUnitary, as the cpu target's gemmNT). rows (when set) picks a's rows (lm_head's
// logit rows), checked against arows. One work item is a weight row n and a group of
// GEMM_G rows m (rows.h), the groups of a row adjacent.
#define GEMM_G 16
struct GemmArgs { const float* x; const int* rows; Weight w; float* c; i64 M; i64 N; i64 K; i64 arows; i64* err; };
KERNEL(gemm_nt, GemmArgs) {
  i64 ng = (a.M + GEMM_G - 1) / GEMM_G;
  for (i64 i = GIDX; i < a.N * ng; i += GSTRIDE) {
    i64 n = i / ng, m0 = (i % ng) * GEMM_G, cnt = imin(GEMM_G, a.M - m0);
    int rows[GEMM_G];
    bool ok = true;
    UNROLL for (int j = 0; j < GEMM_G; j++) {
      i64 r = m0 + j;
      if (j < cnt && a.rows) {
        r = a.rows[m0 + j];
        if (r < 0 || r >= a.arows) ok = false;
      }
      rows[j] = j < cnt ? (int)r : 0;
    }
    if (!ok) { *a.err = 2; continue; }
    float c[GEMM_G];
    gonum_rows<GEMM_G>(a.x, a.K, rows, 0, cnt, a.w, n, a.K, c);
    UNROLL for (int j = 0; j < GEMM_G; j++)
      if (j < cnt) a.c[(m0 + j) * a.N + n] = c[j];
  }
}

// For a few rows (decode at small batch), a product in two launches, with the same
// values: dense_part computes every block's DotUnitary, one (weight row, block of 64) a
// work item over all M ≤ SPLIT_M rows (the blocks of a row adjacent, so that a warp
// reads a weight row's bytes in one sweep); dense_sum adds each output's blocks in
// order, as dense_gonum does. Rows of x are rows[m] (or m); a weight row n reads x from
// column (n / xdiv)·K when xdiv > 0 (grouped_linear's groups); y[m·ldy + n], rounded to
// bf16 when out_bf16.
#define SPLIT_M 8
struct DenseSplitArgs {
  const float* x; const int* rows; Weight w; float* y; float* part; i64 M; i64 N; i64 K; i64 nb;
  i64 ldx; i64 xdiv; i64 ldy; i64 out_bf16; i64 arows; i64* err;
};
KERNEL(dense_part, DenseSplitArgs) {
  for (i64 i = GIDX; i < a.N * a.nb; i += GSTRIDE) {
    i64 n = i / a.nb, b = i % a.nb;
    int rows[SPLIT_M];
    bool ok = true;
    UNROLL for (int j = 0; j < SPLIT_M; j++) {
      i64 r = j;
      if (j < a.M && a.rows) {
        r = a.rows[j];
        if (r < 0 || r >= a.arows) ok = false;
      }
      rows[j] = j < a.M ? (int)r : 0;
    }
    if (!ok) { *a.err = 2; continue; }
    const float* x = a.x + (a.xdiv > 0 ? (n / a.xdiv) * a.K : 0);
    float d[SPLIT_M];
    gonum_block<SPLIT_M>(x, a.ldx, rows, 0, a.M, a.w, n, a.K, b * 64, d);
    UNROLL for (int j = 0; j < SPLIT_M; j++)
      if (j < a.M) a.part[(j * a.N + n) * a.nb + b] = d[j];
  }
}
KERNEL(dense_sum, DenseSplitArgs) {
  for (i64 i = GIDX; i < a.M * a.N; i += GSTRIDE) {
    i64 m = i / a.N, n = i % a.N;
    const float* p = a.part + i * a.nb;
    float c = 0;
    for (i64 b = 0; b < a.nb; b++) c += p[b];
    a.y[m * a.ldy + n] = a.out_bf16 ? q_bf16(c) : c;
  }
}

// sample: one token per logits row, vm/sampling.Row. scratch holds, per row, V doubles
// (probabilities) and V ints (the candidate order).
DEV bool sample_allowed(const int* words, i64 id) {
  u32 w = (u32)words[2 * (id >> 6) + ((id >> 5) & 1)];
  return ((w >> (id & 31)) & 1) != 0;
}

// before reports whether candidate x sorts before y: higher probability, then lower id.
DEV bool sample_before(const double* prob, int x, int y) {
  if (prob[x] != prob[y]) return prob[x] > prob[y];
  return x < y;
}

DEV void sample_sift(int* order, const double* prob, i64 root, i64 n) {
  // a max-heap on "sorts after", so that popping yields the sorted order at the end
  for (;;) {
    i64 child = 2 * root + 1;
    if (child >= n) return;
    if (child + 1 < n && sample_before(prob, order[child], order[child + 1])) child++;
    if (!sample_before(prob, order[root], order[child])) return;
    int t = order[root]; order[root] = order[child]; order[child] = t;
    root = child;
  }
}

struct SampleArgs { const float* logits; const float* params; const int* mask; int* out; i64 R; i64 V; i64 cols; char* scratch; };

// The greedy scan in parts: sample_argmax_part scans SAMPLE_CHUNK ids of a greedy row
// (one (row, chunk) a work item) for its first allowed id and its first largest
// non-NaN allowed value; sample combines the parts in order. The serial scan keeps the
// first allowed id while nothing is strictly larger, so its answer is that id when its
// logit is NaN, else the first id of the largest non-NaN logit: what the parts give.
#define SAMPLE_CHUNK 256
struct SamplePart { float maxv; int maxi; int first; int pad; };
DEV const int* sample_words(const SampleArgs& a, i64 r) {
  return (a.mask && a.mask[r * a.cols] != 0) ? a.mask + r * a.cols + 1 : 0;
}
// sample_part_better: whether part b's largest value comes before part a's in the
// greedy scan's order (a larger value, or an equal one at a lower id; -1: none). The
// scan keeps the first id of the largest non-NaN value, so folding parts (or lanes) by
// this order, in any grouping, gives the scan's answer; first is the lowest allowed id.
DEV bool sample_part_better(const SamplePart& a, const SamplePart& b) {
  if (b.maxi < 0) return false;
  if (a.maxi < 0) return true;
  if (b.maxv != a.maxv) return b.maxv > a.maxv;
  return b.maxi < a.maxi;
}
DEV void sample_part_fold(SamplePart* p, const SamplePart& o) {
  if (sample_part_better(*p, o)) p->maxv = o.maxv, p->maxi = o.maxi;
  if (o.first >= 0 && (p->first < 0 || o.first < p->first)) p->first = o.first;
}
#ifndef DI_EMULATE
// sample_part_warp: the lanes' parts folded by shuffles (l and l ^ 16, then ^ 8, … ^ 1);
// every lane ends with the warp's part.
DEV SamplePart sample_part_warp(SamplePart p) {
  for (int off = 16; off >= 1; off >>= 1) {
    SamplePart o;
    o.maxv = __shfl_xor_sync(0xffffffffu, p.maxv, off);
    o.maxi = __shfl_xor_sync(0xffffffffu, p.maxi, off);
    o.first = __shfl_xor_sync(0xffffffffu, p.first, off);
    sample_part_fold(&p, o);
  }
  return p;
}
#endif
// A warp a (row, chunk): lane l scans ids l, l + 32, … of the chunk (coalesced loads),
// the lanes' parts folded by sample_part_better. Until run 29 a thread scanned a chunk
// alone. The emulated device scans the chunk serially at lane 0.
KERNEL(sample_argmax_part, SampleArgs) {
  i64 nch = (a.V + SAMPLE_CHUNK - 1) / SAMPLE_CHUNK;
  for (i64 w = GIDX; w < a.R * nch * 32; w += GSTRIDE) {
    const i64 it = w >> 5;
    const int lane = (int)(w & 31);
    i64 r = it / nch, c = it % nch;
    if (a.params[4 * r] != 0) continue;  // (the whole warp)
    const float* lg = a.logits + r * a.V;
    const int* words = sample_words(a, r);
    SamplePart part = {0, -1, -1, 0};
    const i64 end = imin(a.V, (c + 1) * SAMPLE_CHUNK);
#ifdef DI_EMULATE
    if (lane != 0) continue;
    for (i64 i = c * SAMPLE_CHUNK; i < end; i++) {
#else
    for (i64 i = c * SAMPLE_CHUNK + lane; i < end; i += 32) {
#endif
      if (words && !sample_allowed(words, i)) continue;
      if (part.first < 0) part.first = (int)i;
      if (isnan32(lg[i])) continue;
      if (part.maxi < 0 || lg[i] > part.maxv) {
        part.maxv = lg[i];
        part.maxi = (int)i;
      }
    }
#ifndef DI_EMULATE
    part = sample_part_warp(part);
    if (lane != 0) continue;
#endif
    ((SamplePart*)(a.scratch + r * a.V * 12))[c] = part;
  }
}

// sample_walk: the draw from ids[0..n) of probabilities summing to total: U·total less
// each probability in turn, the id where it falls below 0 (the last one if it never
// does), as vm/sampling.Row walks. One thread.
DEVM int sample_walk(const double* prob, const int* ids, i64 n, double total, double U) {
  double u = U * total;
  for (i64 j = 0; j < n; j++) {
    u -= prob[ids[j]];
    if (u < 0) return ids[j];
  }
  return ids[n - 1];
}
// sample_cut: the draw from the first candidates of the sorted order (sorted[0..m), the
// whole order when m = n): the top-k cut, the top-p cut (the probabilities over sum
// added in order until they reach topP), then a walk down the kept ones, as
// vm/sampling.Row. Returns -1 when the cuts fall past the m sorted candidates (m < n:
// more are needed). One thread.
DEVM int sample_cut(const double* prob, const int* sorted, i64 m, i64 n, double sum, i64 topK, double topP, double U) {
  if (topK > 0 && topK < n) n = topK;
  if (topP > 0 && topP < 1) {
    double acc = 0;
    for (i64 j = 0; j < imin(n, m); j++) {
      acc += prob[sorted[j]] / sum;
      if (acc >= topP) { n = j + 1; break; }
    }
  }
  if (n > m) return -1;
  double kept = 0;
  for (i64 j = 0; j < n; j++) kept += prob[sorted[j]];
  return sample_walk(prob, sorted, n, kept, U);
}
// sample_tau_next: the next, lower probability bound of the top-k/top-p prefix (16×
// lower, then 0: every candidate).
DEV double sample_tau_next(double tau) { return tau < 1e-30 ? 0.0 : tau * 0.0625; }
// sample_sort: candidates order[0..n) heap-sorted into the order sampling.Row sorts by
// (a larger probability first, then the lower id). One thread.
DEVM void sample_sort(int* order, const double* prob, i64 n) {
  for (i64 j = n / 2 - 1; j >= 0; j--) sample_sift(order, prob, j, n);
  for (i64 end = n - 1; end > 0; end--) {
    int t = order[0]; order[0] = order[end]; order[end] = t;
    sample_sift(order, prob, 0, end);
  }
}
// sample_pick: the sampled id of n candidates (order: allowed ids in id order, prob
// their probabilities, sum their sum in that order), as vm/sampling.Row: with neither
// top-k nor top-p a walk down the ids, else every candidate sorted, the cuts and a walk
// down the kept ones. One thread.
DEVM int sample_pick(const double* prob, int* order, i64 n, double sum, i64 topK, double topP, double U) {
  if (n == 0) return 0;
  if (topK == 0 && (topP <= 0 || topP >= 1)) return sample_walk(prob, order, n, sum, U);
  sample_sort(order, prob, n);
  return sample_cut(prob, order, n, n, sum, topK, topP, U);
}
// sample_row: a row sampled at temperature temp by one thread (the serial scan: the
// maximum by fmax64 in id order, the probabilities and their sum in id order).
DEVM int sample_row(const float* lg, const int* words, i64 V, double* prob, int* order, double temp, i64 topK, double topP, double U) {
  double mx = -F64_INF;
  for (i64 i = 0; i < V; i++)
    if (!words || sample_allowed(words, i)) mx = fmax64(mx, (double)lg[i]);
  double sum = 0;
  i64 n = 0;
  for (i64 i = 0; i < V; i++) {
    if (words && !sample_allowed(words, i)) continue;
    prob[i] = exp(((double)lg[i] - mx) / temp);
    sum += prob[i];
    order[n++] = (int)i;
  }
  return sample_pick(prob, order, n, sum, topK, topP, U);
}
// A warp a row: a greedy row's parts folded by the warp (lane l folds parts l, l + 32, …
// in order, then the lanes by shuffles; the emulated device folds them serially at lane
// 0); another row's maximum, probabilities and candidate list by the warp, then its sum
// and draw by lane 0 (a row with a NaN allowed logit, and every row on the emulated
// device, all by lane 0: sample_row). Until run 29 a thread a row did all of it.
KERNEL(sample, SampleArgs) {
  for (i64 w = GIDX; w < a.R * 32; w += GSTRIDE) {
    const i64 r = w >> 5;
    const int lane = (int)(w & 31);
    const float* lg = a.logits + r * a.V;
    const float* p = a.params + 4 * r;
    double temp = (double)p[0], topP = (double)p[1], U = (double)p[3];
    i64 topK = (i64)p[2];
    const int* words = 0;
    if (a.mask && a.mask[r * a.cols] != 0) words = a.mask + r * a.cols + 1;
    if (temp == 0) {
      const SamplePart* parts = (const SamplePart*)(a.scratch + r * a.V * 12);
      const i64 nch = (a.V + SAMPLE_CHUNK - 1) / SAMPLE_CHUNK;
      SamplePart f = {0, -1, -1, 0};
#ifdef DI_EMULATE
      if (lane != 0) continue;
      for (i64 c = 0; c < nch; c++) sample_part_fold(&f, parts[c]);
#else
      for (i64 c = lane; c < nch; c += 32) sample_part_fold(&f, parts[c]);
      f = sample_part_warp(f);
      if (lane != 0) continue;
#endif
      i64 first = f.first, best = f.maxi;
      if (first >= 0 && isnan32(lg[first])) best = first;
      a.out[r] = (int)(best < 0 ? (first < 0 ? 0 : first) : best);
      continue;
    }
    double* prob = (double*)(a.scratch + r * a.V * 12);
    int* order = (int*)(a.scratch + r * a.V * 12 + a.V * 8);
#ifndef DI_EMULATE
    // the warp: the allowed logits' maximum (when none is NaN: then the maximum does not
    // depend on the order; a NaN row goes to lane 0's serial scan, whose fmax64 fold it
    // follows), each allowed id's probability, and the allowed ids in order (a ballot a
    // 32 ids); lane 0 then sums them in that order and samples, as sample_row does
    bool nan = false;
    double mx = -F64_INF;
    for (i64 i = lane; i < a.V; i += 32)
      if (!words || sample_allowed(words, i)) {
        const float v = lg[i];
        if (isnan32(v)) nan = true;
        else mx = fmax64(mx, (double)v);
      }
    if (!__any_sync(0xffffffffu, nan)) {
      for (int off = 16; off >= 1; off >>= 1) mx = fmax64(mx, __shfl_xor_sync(0xffffffffu, mx, off));
      i64 n = 0;
      for (i64 base = 0; base < a.V; base += 32) {
        const i64 i = base + lane;
        const bool ok = i < a.V && (!words || sample_allowed(words, i));
        if (ok) prob[i] = exp(((double)lg[i] - mx) / temp);
        const u32 m = __ballot_sync(0xffffffffu, ok);
        if (ok) order[n + __popc(m & ((1u << lane) - 1u))] = (int)i;
        n += __popc(m);
      }
      __syncwarp();  // every lane's prob and order written before lane 0 reads them
      double sum = 0;
      if (lane == 0)
        for (i64 j = 0; j < n; j++) sum += prob[order[j]];
      if (n == 0 || (topK == 0 && (topP <= 0 || topP >= 1))) {
        if (lane == 0) a.out[r] = sample_pick(prob, order, n, sum, topK, topP, U);
        continue;
      }
      // top-k / top-p: the candidates of probability ≥ tau are a prefix of the sorted
      // order (a larger probability sorts first), so sorting them alone gives its first
      // entries exactly; tau falls (1, 1/16, …, then 0: every candidate) until the prefix
      // holds top-k's candidates or about topP of the mass, and again if the exact cuts
      // fall past it (sample_cut: -1). A row with a +inf logit has probabilities of NaN
      // and 0 only, which no tau above 0 counts, so it sorts every candidate, as the
      // serial form does.
      sum = __shfl_sync(0xffffffffu, sum, 0);
      double tau = 1.0;
      int pick = -1;
      while (pick < 0) {
        int cnt = 0;
        double mass = 0;
        for (i64 i = lane; i < a.V; i += 32)
          if ((!words || sample_allowed(words, i)) && prob[i] >= tau) cnt++, mass += prob[i];
        for (int off = 16; off >= 1; off >>= 1) {
          cnt += __shfl_xor_sync(0xffffffffu, cnt, off);
          mass += __shfl_xor_sync(0xffffffffu, mass, off);
        }
        const bool all = tau == 0 || cnt == n;
        if (!all && !(topK > 0 && topK <= cnt) && !(topP > 0 && topP < 1 && mass >= topP * sum * 1.000001)) {
          tau = sample_tau_next(tau);
          continue;
        }
        // the prefix's ids into order (in id order; the sort does not depend on it)
        i64 m = 0;
        for (i64 base = 0; base < a.V; base += 32) {
          const i64 i = base + lane;
          const bool in = i < a.V && (!words || sample_allowed(words, i)) && (all || prob[i] >= tau);
          const u32 bm = __ballot_sync(0xffffffffu, in);
          if (in) order[m + __popc(bm & ((1u << lane) - 1u))] = (int)i;
          m += __popc(bm);
        }
        __syncwarp();  // the prefix written before lane 0 sorts it
        if (lane == 0) {
          sample_sort(order, prob, m);
          pick = sample_cut(prob, order, m, n, sum, topK, topP, U);
        }
        pick = __shfl_sync(0xffffffffu, pick, 0);
        __syncwarp();  // lane 0's sort read before the next round writes order
        if (pick < 0) tau = sample_tau_next(tau);
      }
      if (lane == 0) a.out[r] = pick;
      continue;
    }
#endif
    if (lane != 0) continue;
    a.out[r] = sample_row(lg, words, a.V, prob, order, temp, topK, topP, U);
  }
}

// resolve_prev: a pipelined step's input tokens that stand for the previous step's
// sampled tokens (targets.FromPrevious(j) = -1 - j) replaced by them, on the device, so
// that a step can be enqueued before the previous one's tokens are back on the host.
// prev holds the previous step's nprev sampled ids.
struct ResolvePrevArgs { int* tokens; const int* prev; i64 T; i64 nprev; i64* err; };
KERNEL(resolve_prev, ResolvePrevArgs) {
  for (i64 i = GIDX; i < a.T; i += GSTRIDE) {
    int t = a.tokens[i];
    if (t >= 0) continue;
    i64 j = -1 - (i64)t;
    if (j >= a.nprev) { *a.err = 3; continue; }
    a.tokens[i] = a.prev[j];
  }
}

// unpack_step: a step's parameters, copied to the device in one piece (the staging
// region; runtime.go packLayout lays it out and passes the word offsets), scattered to
// where the kernels read them, and tokens that stand for the previous step's sampled
// tokens (FromPrevious(j) = -1 - j) replaced by them on the way, as resolve_prev does.
// The region starts with two i64: nprev, how many ids the previous step sampled (-1:
// tokens are copied as they are, for a step that does not resolve them), and m, how
// many logits rows carry a grammar mask. With a mask parameter (mask set) every row's
// flag word is written, and the words of the m masked rows, whose row numbers follow
// the flags; the other rows' words are left as they are (the sampler reads a row's
// words only when its flag is set). Everything here but nprev and m follows from the
// step's shape and fixed addresses, so the launch may sit in the step's graph.
struct UnpackArgs {
  const int* src; const int* prev; i64* err;
  int* tokens; int* positions; int* rows; int* sample; int* seqs; int* mask;
  i64 T; i64 R; i64 seqWords; i64 cols;
  i64 oTok; i64 oPos; i64 oRows; i64 oSample; i64 oSeqs; i64 oFlags; i64 oMaskRows; i64 oMasks;
};
KERNEL(unpack_step, UnpackArgs) {
  const i64* head = (const i64*)a.src;
  i64 nprev = head[0], m = imax(0, imin(head[1], a.R));
  for (i64 i = GIDX; i < a.T; i += GSTRIDE) {
    int t = a.src[a.oTok + i];
    if (t < 0 && nprev >= 0) {
      i64 j = -1 - (i64)t;
      if (j >= nprev) *a.err = 3;
      else t = a.prev[j];
    }
    a.tokens[i] = t;
    a.positions[i] = a.src[a.oPos + i];
  }
  for (i64 i = GIDX; i < a.R; i += GSTRIDE) {
    a.rows[i] = a.src[a.oRows + i];
    if (a.mask) a.mask[i * a.cols] = a.src[a.oFlags + i];
  }
  for (i64 i = GIDX; i < 4 * a.R; i += GSTRIDE) a.sample[i] = a.src[a.oSample + i];
  for (i64 i = GIDX; i < a.seqWords; i += GSTRIDE) a.seqs[i] = a.src[a.oSeqs + i];
  if (a.mask) {
    i64 w = a.cols - 1;
    for (i64 i = GIDX; i < m * w; i += GSTRIDE) {
      i64 k = i / w, r = a.src[a.oMaskRows + k];
      if (r < 0 || r >= a.R) continue;
      a.mask[r * a.cols + 1 + i % w] = a.src[a.oMasks + i];
    }
  }
}

// keep_ids: the step's sampled ids copied next to the error flag (runtime.go's
// read-back region), where the next step's FromPrevious tokens read them and one copy
// brings flag and ids to the host.
struct KeepIdsArgs { const int* ids; int* out; i64 R; };
KERNEL(keep_ids, KeepIdsArgs) {
  for (i64 i = GIDX; i < a.R; i += GSTRIDE) a.out[i] = a.ids[i];
}
