// engram41.cu: DeepSeek-V4.1's Engram (cpu: targets/cpu/v41_engram.go).
//
// Each sequence's n-gram history lives in its state block (ops_engram41.go claims it as
// "engram.history"): ctx = max_ngram-1 int32 compressed ids, the id of position p in
// slot p % ctx. engram_hash reads it for the positions before the step (launch 1), then
// stores the step's last ids (launch 2).

// ENGRAM_TAB is how many i64 the hash constants may take in engram_hash's arguments:
// per layer, cols (prime | offset << 32) words, then max_ngram multipliers.
#define ENGRAM_TAB 448

// engram_comp is the compressed id at position q of sequence sq (-2: a bad token).
DEV int engram_comp(const int* tokens, const int* tmap, i64 V, const int* hist, i64 ctx, const SeqRec& sq, i64 q) {
  if (q >= sq.pos) {
    int t = tokens[sq.row + q - sq.pos];
    if (t < 0 || t >= V) return -2;
    return tmap[t];
  }
  return hist[q % ctx];
}

struct EngramHashArgs {
  const int* tokens; const int* tmap; int* out; const SeqRec* seqs; i64 nseq; i64 T; i64 V; i64 pad;
  i64 n; i64 heads; i64 L; i64 ctx; i64 off; i64* err; i64 tab[ENGRAM_TAB];
};

// engram_hash: one work item per token; toks[k] is the compressed id k back, the pad id
// from the first position that is before the sequence or dead (-1) on.
KERNEL(engram_hash, EngramHashArgs) {
  i64 cols = (a.n - 1) * a.heads;
  for (i64 t = GIDX; t < a.T; t += GSTRIDE) {
    const i64 qi = seq_find(a.seqs, a.nseq, t);
    if (qi < 0) continue;
    const SeqRec sq = a.seqs[qi];
    const int* hist = (const int*)((const char*)sq.state + a.off);
    i64 p = sq.pos + t - sq.row;
    i64 toks[16];
    i64 pad = a.tmap[a.pad];
    bool blocked = false, bad = false;
    for (i64 sh = 0; sh < a.n; sh++) {
      int c = 0;
      if (!blocked) {
        if (p < sh) {
          blocked = true;
        } else {
          c = engram_comp(a.tokens, a.tmap, a.V, hist, a.ctx, sq, p - sh);
          if (c == -2) bad = true;
          if (c == -1) blocked = true;
        }
      }
      toks[sh] = blocked ? pad : (i64)c;
    }
    if (bad) { *a.err = 510; continue; }
    int* row = a.out + t * cols * a.L;
    for (i64 li = 0; li < a.L; li++) {
      const i64* pr = a.tab + li * (cols + a.n);
      const i64* mult = pr + cols;
      i64 rolling = (i64)((u64)toks[0] * (u64)mult[0]);
      for (i64 k = 1; k < a.n; k++) {
        rolling ^= (i64)((u64)toks[k] * (u64)mult[k]);
        for (i64 h = 0; h < a.heads; h++) {
          i64 c = (k - 1) * a.heads + h;
          i64 prime = pr[c] & 0xffffffffll, base = pr[c] >> 32;
          row[li * cols + c] = (int)(rolling % prime + base);
        }
      }
    }
  }
}

// engram_push: one work item per sequence; the step's last ctx compressed ids into the
// history (after engram_hash has read it).
struct EngramPushArgs { const int* tokens; const int* tmap; const SeqRec* seqs; i64 nseq; i64 V; i64 ctx; i64 off; };
KERNEL(engram_push, EngramPushArgs) {
  for (i64 k = GIDX; k < a.nseq; k += GSTRIDE) {
    const SeqRec sq = a.seqs[k];
    int* hist = (int*)((char*)sq.state + a.off);
    for (i64 i = imax(0, sq.n - a.ctx); i < sq.n; i++) {
      int t = a.tokens[sq.row + i];
      if (t < 0 || t >= a.V) continue;
      hist[(sq.pos + i) % a.ctx] = a.tmap[t];
    }
  }
}

// engram_lookup: out[t, c·d + j] = table[hashes[t, index·cols + c], j].
struct EngramLookupArgs { const int* h; Weight table; float* out; i64 T; i64 w; i64 idx; i64 cols; i64 rows; i64 d; i64* err; };
KERNEL(engram_lookup, EngramLookupArgs) {
  for (i64 i = GIDX; i < a.T * a.cols * a.d; i += GSTRIDE) {
    i64 j = i % a.d, tc = i / a.d;
    i64 t = tc / a.cols, c = tc % a.cols;
    i64 e = a.h[t * a.w + a.idx * a.cols + c];
    if (e < 0 || e >= a.rows) { *a.err = 511; continue; }
    a.out[i] = wval(a.table, e, j);
  }
}

// The gate's fp32 sums, element by element as the cpu fills hh, kk and pp.
struct engram_SqRow {
  const float* p;
  DEVM float operator()(i64 k) const { return p[k] * p[k]; }
};
struct engram_ProdRow {
  const float* h;
  const float* key;
  Weight qw, kw;
  i64 j;
  DEVM float operator()(i64 i) const { return h[i] * (wval(qw, j, i) * wval(kw, j, i)) * key[i]; }
};

// engram_mix: one work item per (token, stream).
struct EngramMixArgs { const float* x; const float* kv; Weight qw; Weight kw; float* y; const SeqRec* seqs; i64 nseq; i64 T; i64 n; i64 d; double eps; };
KERNEL(engram_mix, EngramMixArgs) {
  for (i64 it = GIDX; it < a.T * a.n; it += GSTRIDE) {
    i64 t = it / a.n, j = it % a.n;
    const float* row = a.kv + t * (a.n + 1) * a.d;
    const float* val = row + a.n * a.d;
    const float* h = a.x + (t * a.n + j) * a.d;
    const float* key = row + j * a.d;
    float eps = (float)a.eps, fd = (float)a.d;
    engram_SqRow hh = {h}, kk = {key};
    engram_ProdRow pp = {h, key, a.qw, a.kw, j};
    float rh = 1 / (float)sqrt((double)(cascade_sum(hh, a.d) / fd + eps));
    float rk = 1 / (float)sqrt((double)(cascade_sum(kk, a.d) / fd + eps));
    float g = cascade_sum(pp, a.d) * (rh * rk) * (float)(1 / sqrt((double)a.d));
    float ag = (float)sqrt((double)go_max32(fabsf(g), 1e-6f));
    i64 first, rows;
    seq_rows(a.seqs, a.nseq, a.T, t, &first, &rows);
    float gate = sigmoid_at(copysignf(ag, g), (t - first) * a.n + j, rows * a.n);
    float* dst = a.y + (t * a.n + j) * a.d;
    for (i64 i = 0; i < a.d; i++) dst[i] = q_bf16(h[i] + gate * val[i]);
  }
}
