// attention.cu: DeepSeek-V4's attention path, ported from the cpu target: the KV
// compressor (targets/cpu/compress.go), the lightning indexer (indexer.go), window and
// sparse attention with sinks (attention.go), and the RoPE helpers rope.cu uses too
// (rope.go; this file sorts before rope.cu).
//
// Per-sequence state (docs in ops_attention.go): every layer's window ring keeps position
// p at row p % cap (cap = window-1, the ring holds positions [pos-min(pos,cap), pos));
// a compressor cache holds the open window's raw projections at slot p % ratio, the
// previous closed window's Ca slice (CSA), and entry w (window w closed) at row w. The
// number of closed entries before position p is p / ratio.

// ---- Go's float64 math, as the cpu target evaluates it ----

// rope_sincos is Go's math.Sincos (pure Go on amd64) operation for operation, for
// |x| < 2^29 (Cody-Waite reduction); past that Go reduces with Payne-Hanek and this
// falls back to the C library.
DEV void rope_sincos(double x, double* sp, double* cp) {
  const double PI4A = 7.85398125648498535156e-1;
  const double PI4B = 3.77489470793079817668e-8;
  const double PI4C = 2.69515142907905952645e-15;
  const double FOUR_OVER_PI = 0x1.45f306dc9c883p+0;  // Go's constant 4/Pi, rounded
  if (x == 0) { *sp = x; *cp = 1; return; }
  if (x != x || x == F64_INF || x == -F64_INF) {
    *sp = f64_bits(0x7ff8000000000001ull);
    *cp = *sp;
    return;
  }
  bool sinSign = false, cosSign = false;
  double ax = x;
  if (ax < 0) { ax = -ax; sinSign = true; }
  if (ax >= 536870912.0) { *sp = sin(x); *cp = cos(x); return; }
  u64 j = (u64)(ax * FOUR_OVER_PI);
  double y = (double)j;
  if (j & 1) { j++; y++; }
  j &= 7;
  double z = ((ax - y * PI4A) - y * PI4B) - y * PI4C;
  if (j > 3) { j -= 4; sinSign = !sinSign; cosSign = !cosSign; }
  if (j > 1) cosSign = !cosSign;
  double zz = z * z;
  double c = 1.0 - 0.5 * zz + zz * zz * ((((((-1.13585365213876817300e-11 * zz) + 2.08757008419747316778e-9) * zz +
      -2.75573141792967388112e-7) * zz + 2.48015872888517045348e-5) * zz + -1.38888888888730564116e-3) * zz +
      4.16666666666665929218e-2);
  double s = z + z * zz * ((((((1.58962301576546568060e-10 * zz) + -2.50507477628578072866e-8) * zz +
      2.75573136213857245213e-6) * zz + -1.98412698295895385996e-4) * zz + 8.33333333332211858878e-3) * zz +
      -1.66666666666666307295e-1);
  if (j == 1 || j == 2) { double t = s; s = c; c = t; }
  if (cosSign) c = -c;
  if (sinSign) s = -s;
  *sp = s;
  *cp = c;
}

// att_exp is Go's math.Exp as the cpu target runs it on amd64 (math/exp_amd64.s, its
// path for CPUs with AVX and FMA), operation for operation.
DEV double att_exp(double x) {
  const double LOG2E = 1.4426950408889634073599246810018920;
  const double LN2U = 0.69314718055966295651160180568695068359375;
  const double LN2L = 0.28235290563031577122588448175013436025525412068e-12;
  const double OVERFLOW = 7.09782712893384e+02;
  u64 bx = bits_f64(x);
  if ((bx & ~(1ull << 63)) >= 0x7ff0000000000000ull) {
    if (bx == 0xfff0000000000000ull) return 0;
    return x;  // NaN, +Inf
  }
  if (x > OVERFLOW) return F64_INF;
  double t = LOG2E * x;
  double rt = rint(t);  // CVTSD2SL rounds to nearest even; out of range: 0x80000000
  int e = (rt >= 2147483648.0 || rt < -2147483648.0) ? (-2147483647 - 1) : (int)rt;
  double fx = (double)e;
  double y = fma(-fx, LN2U, x);
  y = fma(-fx, LN2L, y);
  y = y * 0.0625;
  double p = 2.4801587301587301587e-5;
  p = fma(p, y, 1.9841269841269841270e-4);
  p = fma(p, y, 1.3888888888888888889e-3);
  p = fma(p, y, 8.3333333333333333333e-3);
  p = fma(p, y, 4.1666666666666666667e-2);
  p = fma(p, y, 1.6666666666666666667e-1);
  p = fma(p, y, 0.5);
  p = fma(p, y, 1.0);
  y = y * p;
  y = y * (y + 2.0);
  y = y * (y + 2.0);
  y = y * (y + 2.0);
  y = fma(y, y + 2.0, 1.0);
  long long be = (long long)e + 0x3FF;
  if (be <= 0) {
    if (be < -52) return 0;
    be += 0x3FE;
    y = y * f64_bits((u64)be << 52);
    be = 1;
  } else if (be >= 0x7FF) {
    return F64_INF;
  }
  return y * f64_bits((u64)be << 52);
}

// ---- RoPE (cpu: ropeSpec) ----

#define ROPE_MAXF 64

// RopeSpec is the binder's ropeSpec (ops_rope.go): the inverse frequencies, computed on
// the host as the cpu target computes them (float32 values under fp32).
struct RopeSpec {
  i64 head_dim;
  i64 rope_dim;
  i64 fp32;
  double attn;
  double inv[ROPE_MAXF];
};

// rope_rotate writes the rotated trailing rope_dim channels of one head (x may be y):
// ropeSpec.tables then ropeSpec.apply; rope_angle is one frequency's cosine and sine at a
// position.
DEV void rope_angle(const RopeSpec& r, i64 pos, i64 i, double sign, double* c, double* s) {
  if (r.fp32) {
    float ang = (float)pos * (float)r.inv[i];
    rope_sincos((double)ang, s, c);
    *s = sign * *s;
  } else {
    rope_sincos((double)pos * r.inv[i], s, c);
    *c = *c * r.attn;
    *s = sign * *s * r.attn;
  }
}
// rope_pair rotates channel pair (j, j+1) of x into y by the angle's cosine and sine.
DEV void rope_pair(const float* x, float* y, i64 j, double c, double s) {
  double x0 = (double)x[j], x1 = (double)x[j + 1];
  y[j] = (float)(x0 * c - x1 * s);
  y[j + 1] = (float)(x1 * c + x0 * s);
}
DEV void rope_rotate(const RopeSpec& r, const float* x, float* y, i64 pos, double sign) {
  i64 off = r.head_dim - r.rope_dim;
  for (i64 i = 0; i < r.rope_dim / 2; i++) {
    double c, s;
    rope_angle(r, pos, i, sign, &c, &s);
    rope_pair(x, y, off + 2 * i, c, s);
  }
}

// ---- state ----

// att_seq_of is the index of the sequence holding token row t, or -1 (prelude.h
// seq_find).
DEV i64 att_seq_of(const SeqRec* seqs, i64 nseq, i64 t) { return seq_find(seqs, nseq, t); }

// AttCache is one compressor cache of a sequence (floats): the open window's raw kv and
// gate projections (ratio × width, row p % ratio), the previous closed window's Ca slice
// (ratio × dim: kv, and gate + ape rounded to float32), then the entries (row w).
struct AttCache {
  float* pkv;
  float* pgate;
  float* vkv;
  float* vgate;
  float* ent;
};

DEV AttCache att_cache(const SeqRec& s, i64 off, i64 ratio, i64 width, i64 dim) {
  float* b = (float*)((char*)(u64)s.state + off);
  AttCache c;
  c.pkv = b;
  c.pgate = b + ratio * width;
  c.vkv = b + 2 * ratio * width;
  c.vgate = c.vkv + ratio * dim;
  c.ent = c.vgate + ratio * dim;
  return c;
}

DEV float* att_ring(const SeqRec& s, i64 off) { return (float*)((char*)(u64)s.state + off); }

// ---- compress (cpu: compressKernel) ----

// att_gonum_dots is gonum's float32 DotUnitary on amd64 (lanes SUM and P_SUM of four,
// 16 values a round, SUM += P_SUM, then blocks of four into SUM, single values into
// SUM[0], and (s0+s1)+(s2+s3)) for the rows x, x + ldx, ... of nt ≤ MT tokens against
// one weight row: each token's sum in that order, a weight value read once
// for all of them.
template <int MT>
DEVM void att_gonum_dots(const float* x, i64 ldx, i64 nt, const Weight& w, i64 r, i64 k0, i64 n, float* out) {
  float s[MT][4], p[MT][4];
  UNROLL for (int u = 0; u < MT; u++) UNROLL for (int l = 0; l < 4; l++) s[u][l] = 0, p[u][l] = 0;
  i64 n16 = n / 16, i = 0;
  for (i64 b = 0; b < n16; b++, i += 16) {
    UNROLL for (int q = 0; q < 4; q++) {
      UNROLL for (int l = 0; l < 4; l++) {
        float wv = wval(w, r, k0 + i + 4 * q + l);
        UNROLL for (int u = 0; u < MT; u++) {
          if (u >= nt) break;
          float v = x[u * ldx + i + 4 * q + l] * wv;
          if (q & 1) p[u][l] += v;
          else s[u][l] += v;
        }
      }
    }
  }
  if (n16 > 0) UNROLL for (int u = 0; u < MT; u++) UNROLL for (int l = 0; l < 4; l++) s[u][l] += p[u][l];
  for (; i + 4 <= n; i += 4)
    UNROLL for (int l = 0; l < 4; l++) {
      float wv = wval(w, r, k0 + i + l);
      UNROLL for (int u = 0; u < MT; u++) if (u < nt) s[u][l] += x[u * ldx + i + l] * wv;
    }
  for (; i < n; i++) {
    float wv = wval(w, r, k0 + i);
    UNROLL for (int u = 0; u < MT; u++) if (u < nt) s[u][0] += x[u * ldx + i] * wv;
  }
  UNROLL for (int u = 0; u < MT; u++) out[u] = (s[u][0] + s[u][1]) + (s[u][2] + s[u][3]);
}

// att_cmp_proj: kv and gate projections of every token row, as the cpu's gemmNT (gonum
// Sgemm: one dot per output, or, when blocked, sums of dots over 64-wide k blocks). A
// work item is one (projection, group of ATT_CMP_MT tokens, channel): the weight row is
// read once for the group, each token's value computed in the cpu's order.
#define ATT_CMP_MT 8
struct AttProjArgs { const float* x; Weight wkv; Weight wgate; float* kv; float* gate; i64 T; i64 width; i64 in; i64 blocked; };
KERNEL(att_cmp_proj, AttProjArgs) {
  i64 groups = (a.T + ATT_CMP_MT - 1) / ATT_CMP_MT, per = groups * a.width;
  for (i64 i = GIDX; i < 2 * per; i += GSTRIDE) {
    i64 which = i / per, rem = i % per, g = rem / a.width, c = rem % a.width;
    i64 t0 = g * ATT_CMP_MT, nt = imin(ATT_CMP_MT, a.T - t0);
    const float* x = a.x + t0 * a.in;
    const Weight& w = which ? a.wgate : a.wkv;
    float acc[ATT_CMP_MT], d[ATT_CMP_MT];
    UNROLL for (int u = 0; u < ATT_CMP_MT; u++) acc[u] = 0;
    if (a.blocked) {
      for (i64 k = 0; k < a.in; k += 64) {
        att_gonum_dots<ATT_CMP_MT>(x + k, a.in, nt, w, c, k, imin(64, a.in - k), d);
        UNROLL for (int u = 0; u < ATT_CMP_MT; u++) acc[u] += d[u];
      }
    } else {
      att_gonum_dots<ATT_CMP_MT>(x, a.in, nt, w, c, 0, a.in, d);
      UNROLL for (int u = 0; u < ATT_CMP_MT; u++) acc[u] += d[u];
    }
    float* out = which ? a.gate : a.kv;
    UNROLL for (int u = 0; u < ATT_CMP_MT; u++)
      if (u < nt) out[(t0 + u) * a.width + c] = acc[u];
  }
}

// att_cmp_pool: one work item per (token row, channel d) of a row that closes a
// window: the softmax-gated sum of channel d over the window's rows (with the previous
// window's Ca slice under overlap: the cache's for the first window the step closes,
// else the previous window's rows, kv and gate + ape rounded to float32 as the cache
// keeps them) into pooled[the row]. att_cmp_save (one work item per (sequence, channel
// d), after it) then keeps the Ca slice of the last closed window and stores the rows
// left open in the pending slots. An item touches only its own channels (d, and dim+d
// under overlap). The same operations a value as one pass over the windows in order.
struct AttPoolArgs {
  const SeqRec* seqs; i64 nseq; const float* kv; const float* gate; Weight ape; double* pooled;
  i64 off; i64 ratio; i64 dim; i64 overlap; i64 T;
};
// att_cmp_row is row P's (a position of sequence s) kv or gate projection: the pending
// slot for a row before the step, else the step's row.
DEV const float* att_cmp_row(const AttPoolArgs& a, const SeqRec& s, const float* pend, const float* step, i64 P, i64 w) {
  return P < s.pos ? pend + (P % a.ratio) * w : step + (s.row + P - s.pos) * w;
}
// att_cmp_window pools channel d of window win of sequence s into pooled[its last row].
DEV void att_cmp_window(const AttPoolArgs& a, const SeqRec& s, i64 win, i64 d) {
  const i64 r = a.ratio, dim = a.dim, w = a.overlap ? 2 * a.dim : a.dim, off = a.overlap ? a.dim : 0;
  AttCache c = att_cache(s, a.off, r, w, dim);
  const bool prev = a.overlap && win >= 1, cached = win == s.pos / r;
  // the previous window's Ca slice value j: (kv, gate + ape)
  auto ca = [&](i64 j, double* kv) -> double {
    if (cached) {
      *kv = (double)c.vkv[j * dim + d];
      return (double)c.vgate[j * dim + d];
    }
    i64 Q = (win - 1) * r + j;
    *kv = (double)att_cmp_row(a, s, c.pkv, a.kv, Q, w)[d];
    return (double)(float)(att_cmp_row(a, s, c.pgate, a.gate, Q, w)[d] + wval(a.ape, j, d));
  };
  double mx = -F64_INF;
  for (i64 j = 0; j < r; j++) {
    const float* g = att_cmp_row(a, s, c.pgate, a.gate, win * r + j, w);
    mx = fmax64(mx, (double)g[off + d] + (double)wval(a.ape, j, off + d));
    if (prev) {
      double kv;
      mx = fmax64(mx, ca(j, &kv));
    }
  }
  double num = 0, den = 0;
  for (i64 j = 0; j < r; j++) {
    const float* g = att_cmp_row(a, s, c.pgate, a.gate, win * r + j, w);
    const float* v = att_cmp_row(a, s, c.pkv, a.kv, win * r + j, w);
    double e = att_exp((double)g[off + d] + (double)wval(a.ape, j, off + d) - mx);
    num += e * (double)v[off + d];
    den += e;
    if (prev) {
      double kv, vg = ca(j, &kv);
      e = att_exp(vg - mx);
      num += e * kv;
      den += e;
    }
  }
  a.pooled[(s.row + (win + 1) * r - 1 - s.pos) * dim + d] = num / den;
}
// att_cmp_pool: a (token row, channel) a work item, the rows that close a window (steps
// of many rows a sequence); att_cmp_pool_seq: a (sequence, channel) a work item, its
// windows in turn (decode steps, where a row-a-item launch would search the sequence
// table for every row). The same values either way.
KERNEL(att_cmp_pool, AttPoolArgs) {
  for (i64 i = GIDX; i < a.T * a.dim; i += GSTRIDE) {
    const i64 t = i / a.dim, d = i % a.dim;
    const i64 q = att_seq_of(a.seqs, a.nseq, t);
    if (q < 0) continue;
    const SeqRec s = a.seqs[q];
    const i64 P = s.pos + t - s.row;
    if ((P + 1) % a.ratio != 0) continue;
    att_cmp_window(a, s, (P + 1) / a.ratio - 1, d);
  }
}
KERNEL(att_cmp_pool_seq, AttPoolArgs) {
  for (i64 i = GIDX; i < a.nseq * a.dim; i += GSTRIDE) {
    const SeqRec s = a.seqs[i / a.dim];
    for (i64 win = s.pos / a.ratio; (win + 1) * a.ratio <= s.pos + s.n; win++) att_cmp_window(a, s, win, i % a.dim);
  }
}
KERNEL(att_cmp_save, AttPoolArgs) {
  const i64 r = a.ratio, dim = a.dim, w = a.overlap ? 2 * a.dim : a.dim;
  for (i64 i = GIDX; i < a.nseq * dim; i += GSTRIDE) {
    const SeqRec s = a.seqs[i / dim];
    const i64 d = i % dim, end = s.pos + s.n;
    AttCache c = att_cache(s, a.off, r, w, dim);
    const i64 last = end / r - 1;  // the last window closed, if the step closed one
    if (a.overlap && last >= s.pos / r) {
      for (i64 j = 0; j < r; j++) {
        i64 P = last * r + j;
        const float* g = att_cmp_row(a, s, c.pgate, a.gate, P, w);
        const float* v = att_cmp_row(a, s, c.pkv, a.kv, P, w);
        c.vkv[j * dim + d] = v[d];
        c.vgate[j * dim + d] = g[d] + wval(a.ape, j, d);
      }
    }
    for (i64 P = imax(s.pos, end / r * r); P < end; P++) {
      i64 j = P % r, t = s.row + P - s.pos;
      c.pkv[j * w + d] = a.kv[t * w + d];
      c.pgate[j * w + d] = a.gate[t * w + d];
      if (a.overlap) {
        c.pkv[j * w + dim + d] = a.kv[t * w + dim + d];
        c.pgate[j * w + dim + d] = a.gate[t * w + dim + d];
      }
    }
  }
}

// att_cmp_emit: one work item per token row that closes a window: RMSNorm of the pooled
// entry (sum of squares in float64), the norm weight, RoPE at the window's first
// position, stored as entry w.
struct AttEmitArgs {
  const SeqRec* seqs; i64 nseq; i64 T; const double* pooled; Weight norm; i64 off; i64 ratio; i64 dim; i64 width;
  i64 maxe; double eps; i64* err; RopeSpec rope;
};
KERNEL(att_cmp_emit, AttEmitArgs) {
  for (i64 t = GIDX; t < a.T; t += GSTRIDE) {
    i64 q = att_seq_of(a.seqs, a.nseq, t);
    if (q < 0) continue;
    const SeqRec s = a.seqs[q];
    i64 P = s.pos + t - s.row;
    if ((P + 1) % a.ratio != 0) continue;
    i64 win = (P + 1) / a.ratio - 1;
    if (win >= a.maxe) { *a.err = 301; continue; }
    const double* v = a.pooled + t * a.dim;
    double ss = 0;
    for (i64 d = 0; d < a.dim; d++) ss += v[d] * v[d];
    double inv = 1 / sqrt(ss / (double)a.dim + a.eps);
    float* out = att_cache(s, a.off, a.ratio, a.width, a.dim).ent + win * a.dim;
    for (i64 d = 0; d < a.dim; d++) out[d] = (float)(v[d] * inv) * wval(a.norm, 0, d);
    rope_rotate(a.rope, out, out, win * a.ratio, 1.0);
  }
}

// ---- index_topk (cpu: indexKernel) ----

// The indexer in four launches: att_index_qd widens the step's index queries to doubles
// once (scratch qd); att_index_score scores every visible entry of the layer's indexer
// cache, one (token, entry) a work item, into per-token scratch of maxe doubles;
// att_index_pad fills each token's top-k row with -1; att_index_rank places
// each entry at its rank among the token's visible entries by (score desc, entry asc)
// when that rank is below topk — the cpu's insertion order, best first. (A NaN score
// ranks as -inf here; the cpu's insertion treats it otherwise. Neither happens on
// finite inputs.)
struct AttIndexArgs {
  const float* q; const float* w; const int* pos; int* out; double* scores; const SeqRec* seqs; i64 nseq; i64 T;
  i64 off; i64 ratio; i64 width; i64 cdim; i64 heads; i64 dim; i64 topk; double scale; i64 maxe;
  double* qd;  // [T, heads·dim]: q as doubles (att_index_qd)
  u64* sel;    // [T, 2·topk + 1]: att_index_select's list
  i64* vis;    // [T, 2]: each row's att_index_visible (-1: no sequence) and sequence (att_index_qd)
};

// att_index_visible_of is how many entries token t of sequence q may see (-1: q < 0, no
// sequence); att_index_visible finds the sequence.
DEV i64 att_index_visible_of(const AttIndexArgs& a, i64 t, i64 q, SeqRec* s) {
  if (q < 0) return -1;
  *s = a.seqs[q];
  return imin(imin((s->pos + s->n) / a.ratio, ((i64)a.pos[t] + 1) / a.ratio), a.maxe);
}
DEV i64 att_index_visible(const AttIndexArgs& a, i64 t, SeqRec* s) {
  return att_index_visible_of(a, t, att_seq_of(a.seqs, a.nseq, t), s);
}

KERNEL(att_index_qd, AttIndexArgs) {
  for (i64 i = GIDX; i < a.T * a.heads * a.dim; i += GSTRIDE) {
    a.qd[i] = (double)a.q[i];
    if (i < a.T) {
      SeqRec s;
      const i64 q = att_seq_of(a.seqs, a.nseq, i);
      a.vis[2 * i] = att_index_visible_of(a, i, q, &s);
      a.vis[2 * i + 1] = q;
    }
  }
}

// att_index_score: each head's dot in key order, the heads' sum in head order (the
// cpu's); ATT_IHB heads at a time, so that a key value is read once for them and their
// chains run side by side.
#define ATT_IHB 16
// att_index_heads: heads h0 .. h0 + nh (nh ≤ ATT_IHB) of one (row, entry): each head's dot
// with the key in key order (the heads' queries at qh, dim apart), then their positive
// terms added to sc in head order (wt: the heads' weights from h0).
DEVM double att_index_heads(const double* qh, i64 dim, const float* key, i64 cdim, i64 nh, const float* wt, double sc) {
  double dot[ATT_IHB];
  UNROLL for (int u = 0; u < ATT_IHB; u++) dot[u] = 0;
  for (i64 j = 0; j < cdim; j++) {
    double kj = (double)key[j];
    UNROLL for (int u = 0; u < ATT_IHB; u++)
      if (u < nh) dot[u] += qh[u * dim + j] * kj;
  }
  UNROLL for (int u = 0; u < ATT_IHB; u++)
    if (u < nh && dot[u] > 0) sc += (double)wt[u] * dot[u];
  return sc;
}
DEVM void att_index_score_item(const AttIndexArgs& a, i64 i) {
  i64 t = i / a.maxe, e = i % a.maxe;
  SeqRec s;
  if (e >= att_index_visible(a, t, &s)) return;
  const float* key = att_cache(s, a.off, a.ratio, a.width, a.cdim).ent + e * a.cdim;
  const double* qt = a.qd + t * a.heads * a.dim;
  const float* wt = a.w + t * a.heads;
  double sc = 0;
  for (i64 h0 = 0; h0 < a.heads; h0 += ATT_IHB)
    sc = att_index_heads(qt + h0 * a.dim, a.dim, key, a.cdim, imin(ATT_IHB, a.heads - h0), wt + h0, sc);
  a.scores[i] = sc * a.scale;
}
KERNEL(att_index_score, AttIndexArgs) {
  for (i64 i = GIDX; i < a.T * a.maxe; i += GSTRIDE) att_index_score_item(a, i);
}

// att_index_score_t: V4's index scores a launch block per row and 64 entries, every dot
// of the block's 64 entries × 64 heads in registers: thread (eg, hg) = (tid / 8, tid % 8)
// holds entries 16·v + eg (v < 4) by heads 8·u + hg (u < 8), 32 chains side by side. The
// entries' keys and the row's queries are staged in shared memory 16 key values at a
// time, widened to doubles once (att_index_score reads a row's 64 KB of queries for
// every entry through the caches: 9.9 ms of V4's batch-256 step at 32,768 on the H200
// against this kernel's 2.0, run 27; a form with a block per row and 128 entries that
// staged only the queries, widened a key value for every 16 heads and read a query value
// from shared memory for every product took 6.9 ms and was removed), rows padded so that a warp's 16-byte reads fall in
// distinct banks; a thread issues its part of a stage's loads before the barrier that
// frees the buffer, at most 128 registers so that four blocks share a multiprocessor
// (180 and two blocks with the next stage's loads held through the products: 2.2 ms at
// batch 256 and context 32,768 on the H200, run 27c; 32 values a stage at 128 registers
// spilled, 2.08 ms, run 27d). Each chain adds its products in key order, as
// att_index_score_item's; a product of two floats is exact in a double, so fma(q, k, dot)
// rounds once where the item's product and sum round twice to the same value (and the
// zeros staged past the keys' end add nothing: a chain starts at +0 and never becomes
// -0). Then each (entry, head)'s term — wt·dot where dot > 0, else +0, which leaves a sum
// that started at +0 as it was — goes to shared memory, and thread e < 64 adds entry e's
// terms in head order, as the item does. A row's visible entries come from att_index_qd
// (a.vis, with the row's sequence): the grid covers every row's maxe entries, and most blocks of a short context
// have none, so they return after one load. heads ≤ ATT_ITH (Go checks).
#define ATT_ITE 64            // entries a block
#define ATT_ITJ 16            // key values a stage
#define ATT_ITP (ATT_ITJ + 2) // a staged row, doubles (16-byte steps between rows' banks)
#define ATT_ITH 64            // the most heads
#define ATT_ITT (ATT_ITH + 1) // a row of terms, doubles
#define ATT_ITL (ATT_ITE * ATT_ITJ / 128)  // staged values a thread, of keys and of queries
#ifndef DI_EMULATE
#undef KERNEL_BOUNDS
#define KERNEL_BOUNDS __launch_bounds__(128, 4)
#endif
KERNEL(att_index_score_t, AttIndexArgs) {
  const i64 nch = (a.maxe + ATT_ITE - 1) / ATT_ITE;
#ifdef DI_EMULATE
  for (i64 i = GIDX; i < a.T * nch * ATT_ITE; i += GSTRIDE) {
    const i64 t = i / (nch * ATT_ITE), e = i % (nch * ATT_ITE);
    if (e < a.maxe) att_index_score_item(a, t * a.maxe + e);
  }
#else
  (void)GSTRIDE;  // the grid is exactly the blocks
  // the stage (keys, then queries), later the terms
  __shared__ __align__(16) double buf[ATT_ITE * ATT_ITT > 2 * ATT_ITE * ATT_ITP ? ATT_ITE * ATT_ITT : 2 * ATT_ITE * ATT_ITP];
  double* ks = buf;
  double* qs = buf + ATT_ITE * ATT_ITP;
  const i64 blk = GIDX / 128;
  const int tid = (int)(GIDX % 128), eg = tid >> 3, hg = tid & 7;
  const i64 t = blk / nch, e0 = (blk % nch) * ATT_ITE;
  const i64 vis = a.vis[2 * t];  // the same for the whole block
  if (vis <= e0) return;         // the whole block: no barrier reached
  const SeqRec s = a.seqs[a.vis[2 * t + 1]];
  const i64 ne = imin(ATT_ITE, vis - e0);
  const float* keys = att_cache(s, a.off, a.ratio, a.width, a.cdim).ent + e0 * a.cdim;
  const float* qt = a.q + t * a.heads * a.dim;
  double dot[4][8];
  UNROLL for (int v = 0; v < 4; v++) UNROLL for (int u = 0; u < 8; u++) dot[v][u] = 0;
  for (i64 j0 = 0; j0 < a.cdim; j0 += ATT_ITJ) {
    // thread tid stages the values x = tid + 128·l (l < ATT_ITL) of a stage: row x / ATT_ITJ,
    // value x % ATT_ITJ; every load issued before the first store
    float kr[ATT_ITL], qr[ATT_ITL];
    UNROLL for (int l = 0; l < ATT_ITL; l++) {
      const int x = tid + 128 * l, r = x / ATT_ITJ, j = x % ATT_ITJ;
      const bool in = j0 + j < a.cdim;
      kr[l] = in && r < ne ? keys[r * a.cdim + j0 + j] : 0.0f;
      qr[l] = in && r < a.heads ? qt[r * a.dim + j0 + j] : 0.0f;
    }
    __syncthreads();  // every thread done with the last stage
    UNROLL for (int l = 0; l < ATT_ITL; l++) {
      const int x = tid + 128 * l, r = x / ATT_ITJ, j = x % ATT_ITJ;
      ks[r * ATT_ITP + j] = (double)kr[l];
      qs[r * ATT_ITP + j] = (double)qr[l];
    }
    __syncthreads();
    UNROLL for (int j = 0; j < ATT_ITJ; j += 2) {
      double2 k[4];
      UNROLL for (int v = 0; v < 4; v++) k[v] = *(const double2*)&ks[(16 * v + eg) * ATT_ITP + j];
      UNROLL for (int u = 0; u < 8; u++) {
        const double2 q = *(const double2*)&qs[(8 * u + hg) * ATT_ITP + j];
        UNROLL for (int v = 0; v < 4; v++) {
          dot[v][u] = fma(q.x, k[v].x, dot[v][u]);
          dot[v][u] = fma(q.y, k[v].y, dot[v][u]);
        }
      }
    }
  }
  const float* wt = a.w + t * a.heads;
  __syncthreads();  // every thread done with the stage: the buffer takes the terms
  UNROLL for (int u = 0; u < 8; u++) {
    const int h = 8 * u + hg;
    const double w = h < a.heads ? (double)wt[h] : 0.0;
    UNROLL for (int v = 0; v < 4; v++) buf[(16 * v + eg) * ATT_ITT + h] = dot[v][u] > 0 ? w * dot[v][u] : 0.0;
  }
  __syncthreads();
  if (tid < ne) {
    double sc = 0;
    for (int h = 0; h < ATT_ITH; h++) sc += buf[tid * ATT_ITT + h];
    a.scores[t * a.maxe + e0 + tid] = sc * a.scale;
  }
#endif
}
#ifndef DI_EMULATE
#undef KERNEL_BOUNDS
#define KERNEL_BOUNDS
#endif

// att_index_score_w: att_index_score with a warp per (token, entry), for steps of few
// rows (where att_index_score has too few work items to fill the device): lane l runs
// the chains of heads l, l + 32, ... (each in key order, as att_index_score's), and
// lane 0 adds the heads' terms in head order from the lanes' dots. The same values.
// The emulated device runs att_index_score's item on lane 0.
KERNEL(att_index_score_w, AttIndexArgs) {
  for (i64 i = GIDX; i < a.T * a.maxe * 32; i += GSTRIDE) {
    int lane = (int)(i & 31);
    i64 it = i >> 5;
#ifdef DI_EMULATE
    if (lane == 0) att_index_score_item(a, it);
#else
    i64 t = it / a.maxe, e = it % a.maxe;
    SeqRec s;
    if (e >= att_index_visible(a, t, &s)) continue;  // the same for the warp's lanes
    const float* key = att_cache(s, a.off, a.ratio, a.width, a.cdim).ent + e * a.cdim;
    const double* qt = a.qd + t * a.heads * a.dim;
    const float* wt = a.w + t * a.heads;
    double sc = 0;
    for (i64 h0 = 0; h0 < a.heads; h0 += 32) {
      i64 h = h0 + lane;
      double dot = 0;
      if (h < a.heads) {
        const double* qh = qt + h * a.dim;
        UNROLL_BY(8) for (i64 j = 0; j < a.cdim; j++) dot += qh[j] * (double)key[j];
      }
      for (int u = 0; u < 32 && h0 + u < a.heads; u++) {
        double d = __shfl_sync(0xffffffffu, dot, u);
        if (d > 0) sc += (double)wt[h0 + u] * d;
      }
    }
    if (lane == 0) a.scores[it] = sc * a.scale;
#endif
  }
}

KERNEL(att_index_pad, AttIndexArgs) {
  for (i64 i = GIDX; i < a.T * a.topk; i += GSTRIDE) a.out[i] = -1;
}

DEV double att_rank_key(double v) { return v != v ? -F64_INF : v; }

KERNEL(att_index_rank, AttIndexArgs) {
  for (i64 i = GIDX; i < a.T * a.maxe; i += GSTRIDE) {
    i64 t = i / a.maxe, e = i % a.maxe;
    SeqRec s;
    i64 visible = att_index_visible(a, t, &s);
    if (e >= visible) continue;
    const double* sc = a.scores + t * a.maxe;
    double v = att_rank_key(sc[e]);
    i64 rank = 0;
    for (i64 f = 0; f < visible && rank < a.topk; f++) {
      double u = att_rank_key(sc[f]);
      if (u > v || (u == v && f < e)) rank++;
    }
    if (rank < a.topk) a.out[t * a.topk + rank] = (int)e;
  }
}

// att_index_select and att_index_order: att_index_rank's result for steps of many rows,
// in O(entries + topk²) a row instead of up to O(entries · topk). att_index_select (a
// row a launch block's first work item) finds the row's topk-th largest score by radix
// selection over the scores' order-preserving 64-bit keys (8 passes of 8 bits), then
// lists, in entry order, the entries above it and the first of those equal to it that
// fill topk (lower entries first on ties, as the rank); att_index_order places each
// listed entry at its rank among the listed ones. sel holds per row a count and topk
// (key, entry) pairs.
DEV u64 att_order_key(double v) {
  v = att_rank_key(v);
  if (v == 0) v = 0;  // -0 ranks as +0
  u64 b = bits_f64(v);
  return (b >> 63) ? ~b : b | 0x8000000000000000ull;
}
KERNEL(att_index_select, AttIndexArgs) {
#ifdef DI_EMULATE
  for (i64 it = GIDX; it < a.T * ROW_SPREAD; it += GSTRIDE) {
    if (it % ROW_SPREAD != 0) continue;
    i64 t = it / ROW_SPREAD;
    u64* list = a.sel + t * (2 * a.topk + 1);
    list[0] = 0;
    SeqRec s;
    i64 visible = att_index_visible(a, t, &s);
    if (visible <= 0) continue;
    const double* sc = a.scores + t * a.maxe;
    i64 K = imin(a.topk, visible), need = K;
    u64 prefix = 0, mask = 0;
    if (visible > a.topk) {
      for (int shift = 56; shift >= 0; shift -= 8) {
        i64 hist[256];
        for (int d = 0; d < 256; d++) hist[d] = 0;
        for (i64 f = 0; f < visible; f++) {
          u64 key = att_order_key(sc[f]);
          if ((key & mask) == prefix) hist[(key >> shift) & 255]++;
        }
        int d = 255;
        for (; d > 0 && hist[d] < need; d--) need -= hist[d];
        prefix |= (u64)d << shift;
        mask |= 0xffull << shift;
      }
    } else {
      need = 0;  // every entry: none is compared with a threshold
    }
    i64 n = 0, eq = 0;
    for (i64 f = 0; f < visible; f++) {
      u64 key = att_order_key(sc[f]);
      bool take = visible <= a.topk || key > prefix || (key == prefix && eq++ < need);
      if (!take) continue;
      list[1 + 2 * n] = key;
      list[2 + 2 * n] = (u64)f;
      n++;
    }
    list[0] = (u64)n;
  }
#else
  // a launch block a row: each pass's histogram in shared memory (atomic adds), the
  // digit picked by thread 0; then the selected entries listed in any order (the order
  // kernel ranks them by key and entry), the equal ones the first `need` in entry order
  // (each thread counts those in its contiguous chunk; thread 0 adds the counts up)
  (void)GSTRIDE;
  __shared__ int hist[256];
  __shared__ int eqbase[ROW_SPREAD];
  __shared__ u64 s_prefix;
  __shared__ long long s_need;
  __shared__ int s_count;
  const i64 t = GIDX / ROW_SPREAD;
  const int tid = (int)(GIDX % ROW_SPREAD);
  if (t >= a.T) return;  // the whole block
  u64* list = a.sel + t * (2 * a.topk + 1);
  SeqRec s;
  i64 visible = att_index_visible(a, t, &s);
  if (visible <= 0) {
    if (tid == 0) list[0] = 0;
    return;
  }
  const double* sc = a.scores + t * a.maxe;
  if (visible <= a.topk) {
    for (i64 f = tid; f < visible; f += ROW_SPREAD) {
      list[1 + 2 * f] = att_order_key(sc[f]);
      list[2 + 2 * f] = (u64)f;
    }
    if (tid == 0) list[0] = (u64)visible;
    return;
  }
  u64 prefix = 0, mask = 0;
  i64 need = a.topk;
  for (int shift = 56; shift >= 0; shift -= 8) {
    hist[tid] = 0;
    hist[tid + 128] = 0;
    __syncthreads();
    for (i64 f = tid; f < visible; f += ROW_SPREAD) {
      u64 key = att_order_key(sc[f]);
      if ((key & mask) == prefix) atomicAdd(&hist[(key >> shift) & 255], 1);
    }
    __syncthreads();
    if (tid == 0) {
      int d = 255;
      for (; d > 0 && hist[d] < need; d--) need -= hist[d];
      s_prefix = prefix | ((u64)d << shift);
      s_need = need;
    }
    __syncthreads();
    prefix = s_prefix;
    need = s_need;
    mask |= 0xffull << shift;
  }
  const i64 chunk = (visible + ROW_SPREAD - 1) / ROW_SPREAD, f0 = tid * chunk, f1 = imin(visible, f0 + chunk);
  int eq = 0;
  for (i64 f = f0; f < f1; f++) eq += att_order_key(sc[f]) == prefix;
  eqbase[tid] = eq;
  if (tid == 0) s_count = 0;
  __syncthreads();
  if (tid == 0) {
    int run = 0;
    for (int i = 0; i < ROW_SPREAD; i++) {
      int c = eqbase[i];
      eqbase[i] = run;
      run += c;
    }
  }
  __syncthreads();
  i64 e = eqbase[tid];
  for (i64 f = f0; f < f1; f++) {
    u64 key = att_order_key(sc[f]);
    if (key > prefix || (key == prefix && e++ < need)) {
      int slot = atomicAdd(&s_count, 1);
      list[1 + 2 * slot] = key;
      list[2 + 2 * slot] = (u64)f;
    }
  }
  __syncthreads();
  if (tid == 0) list[0] = (u64)s_count;
#endif
}
KERNEL(att_index_order, AttIndexArgs) {
  for (i64 i = GIDX; i < a.T * a.topk; i += GSTRIDE) {
    i64 t = i / a.topk, j = i % a.topk;
    const u64* list = a.sel + t * (2 * a.topk + 1);
    i64 n = (i64)list[0];
    if (j >= n) continue;
    u64 key = list[1 + 2 * j], e = list[2 + 2 * j];
    i64 rank = 0;
    for (i64 q = 0; q < n; q++) {
      u64 kq = list[1 + 2 * q], eq = list[2 + 2 * q];
      if (kq > key || (kq == key && eq < e)) rank++;
    }
    a.out[t * a.topk + rank] = (int)e;
  }
}

// ---- window / sparse attention (cpu: attnKernel) ----

// AttArgs: q[T, heads·dim], kv[T, dim], pos[T], sink[heads], idx[T, topk] (or null);
// acc is per-(token, head) scratch of dim doubles.
struct AttArgs {
  const float* q; const float* kv; const int* pos; Weight sink; const int* idx; float* out; double* acc;
  const SeqRec* seqs; i64 nseq; i64 T; i64 heads; i64 dim; i64 window; double scale;
  i64 ring_off; i64 cap; i64 decode; i64 sparse; i64 topk;
  i64 cache_off; i64 ratio; i64 cwidth; i64* err; const unsigned char* mark; i64 maxe;
  u64* keys; i64* nkeys; double* lg; double* den; i64 kmax;
  unsigned* pp; i64 kp;  // the fast mode's probability halves (att_tc_softmax), kp a row
};

// att_mark_clear and att_mark_set turn each token's top-k list into a byte per entry
// (mark), so that att_key asks "is e in the list" in one read, not a scan of topk.
struct AttMarkArgs { const int* idx; unsigned char* mark; i64 T; i64 topk; i64 maxe; };
KERNEL(att_mark_clear, AttMarkArgs) {
  for (i64 i = GIDX; i < a.T * a.maxe; i += GSTRIDE) a.mark[i] = 0;
}
KERNEL(att_mark_set, AttMarkArgs) {
  for (i64 i = GIDX; i < a.T * a.topk; i += GSTRIDE) {
    i64 t = i / a.topk;
    int e = a.idx[i];
    if (e >= 0 && e < a.maxe) a.mark[t * a.maxe + e] = 1;
  }
}

// att_key is key k of query row t (at position p) of sequence s, in the cpu's order
// (window ring oldest first, the step's rows, then the compressed entries), or null when
// the query does not attend to it (attnKernel.visible).
DEV const float* att_key(const AttArgs& a, const SeqRec& s, i64 ringLen, i64 k, i64 t, i64 p) {
  const bool dec = a.decode != 0;
  if (k < ringLen) {
    i64 kp = s.pos - ringLen + k;
    if (!dec && !(kp <= p && kp > p - a.window)) return 0;
    return att_ring(s, a.ring_off) + (kp % a.cap) * a.dim;
  }
  k -= ringLen;
  if (k < s.n) {
    i64 kp = a.pos[s.row + k];
    if (!dec && !(kp <= p && kp > p - a.window)) return 0;
    return a.kv + (s.row + k) * a.dim;
  }
  i64 e = k - s.n;
  if (a.idx) {
    if (e >= a.maxe || !a.mark[t * a.maxe + e]) return 0;
  } else if (!dec && !(e < (p + 1) / a.ratio)) {
    return 0;
  }
  return att_cache(s, a.cache_off, a.ratio, a.cwidth, a.dim).ent + e * a.dim;
}

// att_attention: one work item per (token, head): softmax over the visible keys and the
// head's sink (whose logit joins the denominator only), float64 throughout. The logits
// are recomputed in the second pass (the same operations, the same values).
KERNEL(att_attention, AttArgs) {
  for (i64 i = GIDX; i < a.T * a.heads; i += GSTRIDE) {
    i64 t = i / a.heads, h = i % a.heads;
    i64 q = att_seq_of(a.seqs, a.nseq, t);
    if (q < 0) continue;
    const SeqRec s = a.seqs[q];
    if (a.decode && s.n != 1) { *a.err = 302; continue; }
    i64 ringLen = imin(s.pos, a.cap);
    i64 nkeys = ringLen + s.n + (a.sparse ? (s.pos + s.n) / a.ratio : 0);
    i64 p = a.pos[t];
    const float* qh = a.q + t * a.heads * a.dim + h * a.dim;
    double sink = (double)wval(a.sink, 0, h);
    double mx = sink;
    for (i64 k = 0; k < nkeys; k++) {
      const float* row = att_key(a, s, ringLen, k, t, p);
      if (!row) continue;
      double dot = 0;
      for (i64 d = 0; d < a.dim; d++) dot += (double)qh[d] * (double)row[d];
      mx = fmax64(mx, dot * a.scale);
    }
    double den = att_exp(sink - mx);
    double* acc = a.acc + i * a.dim;
    for (i64 d = 0; d < a.dim; d++) acc[d] = 0;
    for (i64 k = 0; k < nkeys; k++) {
      const float* row = att_key(a, s, ringLen, k, t, p);
      if (!row) continue;
      double dot = 0;
      for (i64 d = 0; d < a.dim; d++) dot += (double)qh[d] * (double)row[d];
      double e = att_exp(dot * a.scale - mx);
      den += e;
      for (i64 d = 0; d < a.dim; d++) acc[d] += e * (double)row[d];
    }
    float* o = a.out + t * a.heads * a.dim + h * a.dim;
    for (i64 d = 0; d < a.dim; d++) o[d] = (float)(acc[d] / den);
  }
}

// Decode attention in four launches, each value computed as att_attention computes it:
// att_dec_keys lists each token's visible keys in att_attention's order (one token a
// work item); att_dec_logits computes every (token, head, key) logit; att_dec_softmax
// takes each (token, head)'s maximum and denominator in key order and turns the logits
// into exp(logit − max); att_dec_out sums each output value over the keys in order.
KERNEL(att_dec_keys, AttArgs) {
  for (i64 t = GIDX; t < a.T; t += GSTRIDE) {
    a.nkeys[t] = 0;
    i64 q = att_seq_of(a.seqs, a.nseq, t);
    if (q < 0) continue;
    const SeqRec s = a.seqs[q];
    if (s.n != 1) { *a.err = 302; continue; }
    i64 ringLen = imin(s.pos, a.cap);
    i64 nkeys = ringLen + s.n + (a.sparse ? (s.pos + s.n) / a.ratio : 0);
    i64 p = a.pos[t], nk = 0;
    for (i64 k = 0; k < nkeys; k++) {
      const float* row = att_key(a, s, ringLen, k, t, p);
      if (!row) continue;
      if (nk == a.kmax) { *a.err = 303; break; }
      a.keys[t * a.kmax + nk++] = (u64)row;
    }
    a.nkeys[t] = nk;
  }
}

// att_tc_keys: the fast mode's key list, the same as att_dec_keys's (in a prefill step
// every row's own visible keys, in att_attention's order), a warp per token:
// the lanes test 32 consecutive keys at a time and the visible ones are placed in order
// by a ballot (a lane's place: the visible keys of the lower lanes, after those of the
// earlier passes). The emulated device runs a pass's lanes one after another at lane 0.
#ifdef DI_EMULATE
DEV int att_popc(u32 m) { return __builtin_popcount(m); }
#else
DEV int att_popc(u32 m) { return __popc(m); }
#endif
KERNEL(att_tc_keys, AttArgs) {
  for (i64 i = GIDX; i < a.T * 32; i += GSTRIDE) {
    const i64 t = i >> 5;
    const int lane = (int)(i & 31);
#ifdef DI_EMULATE
    if (lane) continue;
#endif
    i64 q = att_seq_of(a.seqs, a.nseq, t);
    if (q < 0 || (a.decode && a.seqs[q].n != 1)) {
      if (lane == 0) {
        if (q >= 0) *a.err = 302;
        a.nkeys[t] = 0;
      }
      continue;
    }
    const SeqRec s = a.seqs[q];
    i64 ringLen = imin(s.pos, a.cap);
    i64 nkeys = ringLen + s.n + (a.sparse ? (s.pos + s.n) / a.ratio : 0);
    i64 p = a.pos[t], nk = 0;
    u64* keys = a.keys + t * a.kmax;
    for (i64 k0 = 0; k0 < nkeys && nk <= a.kmax; k0 += 32) {
#ifdef DI_EMULATE
      const float* rows[32];
      u32 m = 0;
      for (int l = 0; l < 32; l++) {
        rows[l] = k0 + l < nkeys ? att_key(a, s, ringLen, k0 + l, t, p) : 0;
        if (rows[l]) m |= 1u << l;
      }
      for (int l = 0; l < 32; l++) {
        i64 at = nk + att_popc(m & ((1u << l) - 1));
        if (rows[l] && at < a.kmax) keys[at] = (u64)rows[l];
      }
#else
      const float* row = k0 + lane < nkeys ? att_key(a, s, ringLen, k0 + lane, t, p) : 0;
      u32 m = __ballot_sync(0xffffffffu, row != 0);
      i64 at = nk + att_popc(m & ((1u << lane) - 1));
      if (row && at < a.kmax) keys[at] = (u64)row;
#endif
      nk += att_popc(m);
    }
    if (lane == 0) {
      if (nk > a.kmax) *a.err = 303;
      a.nkeys[t] = imin(nk, a.kmax);
    }
  }
}

// att_dec_logits: one (token, key, group of ATT_HG heads) a work item, the key's values
// read once for the group; each head's float64 dot product in the same order as alone.
#define ATT_HG 16
KERNEL(att_dec_logits, AttArgs) {
  i64 groups = (a.heads + ATT_HG - 1) / ATT_HG;
  for (i64 i = GIDX; i < a.T * groups * a.kmax; i += GSTRIDE) {
    i64 j = i % a.kmax, tg = i / a.kmax, t = tg / groups, h0 = (tg % groups) * ATT_HG;
    if (j >= a.nkeys[t]) continue;
    const float* row = (const float*)a.keys[t * a.kmax + j];
    const float* q = a.q + t * a.heads * a.dim + h0 * a.dim;
    i64 hn = imin(ATT_HG, a.heads - h0);
    double dot[ATT_HG];
    UNROLL for (int h = 0; h < ATT_HG; h++) dot[h] = 0;
    for (i64 d = 0; d < a.dim; d++) {
      double k = (double)row[d];
      UNROLL for (int h = 0; h < ATT_HG; h++)
        if (h < hn) dot[h] += (double)q[h * a.dim + d] * k;
    }
    for (i64 h = 0; h < hn; h++) a.lg[(t * a.heads + h0 + h) * a.kmax + j] = dot[h] * a.scale;
  }
}

KERNEL(att_dec_softmax, AttArgs) {
  for (i64 th = GIDX; th < a.T * a.heads; th += GSTRIDE) {
    i64 t = th / a.heads, h = th % a.heads, nk = a.nkeys[t];
    double* lg = a.lg + th * a.kmax;
    double sink = (double)wval(a.sink, 0, h);
    double mx = sink;
    for (i64 j = 0; j < nk; j++) mx = fmax64(mx, lg[j]);
    double den = att_exp(sink - mx);
    for (i64 j = 0; j < nk; j++) {
      double e = att_exp(lg[j] - mx);
      den += e;
      lg[j] = e;
    }
    a.den[th] = den;
  }
}

// att_tc_softmax: the fast mode's softmax for tensorcore_attn.cu's att_tc_out, a warp
// per (token, head): lane L takes the groups of four keys L, L+32, ... The maximum is
// att_dec_softmax's (a maximum does not depend on the order); the denominator is the
// sink's exp plus the lanes' float64 sums (each over its keys in order) added in a
// butterfly (lane L with lane L^16, then L^8, ..., L^1: every lane the same value,
// the order set by the row's key count alone). The probabilities exp(logit − max),
// rounded to float32, are written as bf16 halves hi = bf16(p), lo = bf16(p − hi), four
// keys to 16 bytes: hi(k, k+1), hi(k+2, k+3), lo(k, k+1), lo(k+2, k+3) (bf16 pairs, the
// first key in the low half); zero past the row's keys up to a multiple of 16 (the
// output's mma step). The emulated device runs a warp's lanes one after another at its
// lane 0 and the butterfly in a loop.
DEV unsigned att_bf16_pair(float lo, float hi) {
  return (bits_f32(q_bf16(lo)) >> 16) | (bits_f32(q_bf16(hi)) & 0xffff0000u);
}
// att_tc_lane: lane L's part of (token, head) th: its keys' maximum (mx null) or, given
// the maximum, its keys' probabilities written and their sum.
DEV double att_tc_lane(const AttArgs& a, i64 th, i64 nk, int lane, const double* mx) {
  const double* lg = a.lg + th * a.kmax;
  unsigned* pp = a.pp + th * a.kp;
  double r = mx ? 0.0 : -F64_INF;
  for (i64 j = 4 * lane; j < (nk + 15) / 16 * 16; j += 128) {
    if (!mx) {
      for (int u = 0; u < 4; u++)
        if (j + u < nk) r = fmax64(r, lg[j + u]);
      continue;
    }
    float p[4], hi[4];
    for (int u = 0; u < 4; u++) {
      p[u] = 0;
      if (j + u < nk) {
        double e = att_exp(lg[j + u] - *mx);
        r += e;
        p[u] = (float)e;
      }
      hi[u] = q_bf16(p[u]);
    }
    pp[j] = att_bf16_pair(hi[0], hi[1]);
    pp[j + 1] = att_bf16_pair(hi[2], hi[3]);
    pp[j + 2] = att_bf16_pair(p[0] - hi[0], p[1] - hi[1]);
    pp[j + 3] = att_bf16_pair(p[2] - hi[2], p[3] - hi[3]);
  }
  return r;
}
KERNEL(att_tc_softmax, AttArgs) {
  for (i64 i = GIDX; i < a.T * a.heads * 32; i += GSTRIDE) {
    const i64 th = i >> 5, t = qdiv(th, a.heads), h = qmod(th, a.heads), nk = a.nkeys[t];
    const double sink = (double)wval(a.sink, 0, h);
#ifdef DI_EMULATE
    if (i & 31) continue;
    double mx = sink, part[32];
    for (int l = 0; l < 32; l++) mx = fmax64(mx, att_tc_lane(a, th, nk, l, 0));
    for (int l = 0; l < 32; l++) part[l] = att_tc_lane(a, th, nk, l, &mx);
    for (int off = 16; off >= 1; off >>= 1) {
      double next[32];
      for (int l = 0; l < 32; l++) next[l] = part[l] + part[l ^ off];
      for (int l = 0; l < 32; l++) part[l] = next[l];
    }
    a.den[th] = att_exp(sink - mx) + part[0];
#else
    const int lane = (int)(i & 31);
    double mx = fmax64(sink, att_tc_lane(a, th, nk, lane, 0));
    for (int off = 16; off >= 1; off >>= 1) mx = fmax64(mx, __shfl_xor_sync(0xffffffffu, mx, off));
    double part = att_tc_lane(a, th, nk, lane, &mx);
    for (int off = 16; off >= 1; off >>= 1) part += __shfl_xor_sync(0xffffffffu, part, off);
    if (lane == 0) a.den[th] = att_exp(sink - mx) + part;
#endif
  }
}

// att_dec_out: one (token, group of ATT_HG heads, value d) a work item, each key value
// read once for the group; each head's float64 sum over the keys in order.
KERNEL(att_dec_out, AttArgs) {
  i64 groups = (a.heads + ATT_HG - 1) / ATT_HG;
  for (i64 i = GIDX; i < a.T * groups * a.dim; i += GSTRIDE) {
    i64 d = i % a.dim, tg = i / a.dim, t = tg / groups, h0 = (tg % groups) * ATT_HG;
    i64 q = att_seq_of(a.seqs, a.nseq, t);
    if (q < 0 || a.seqs[q].n != 1) continue;
    i64 nk = a.nkeys[t], hn = imin(ATT_HG, a.heads - h0);
    const double* p = a.lg + (t * a.heads + h0) * a.kmax;
    const u64* keys = a.keys + t * a.kmax;
    double acc[ATT_HG];
    UNROLL for (int h = 0; h < ATT_HG; h++) acc[h] = 0;
    for (i64 j = 0; j < nk; j++) {
      double v = (double)((const float*)keys[j])[d];
      UNROLL for (int h = 0; h < ATT_HG; h++)
        if (h < hn) acc[h] += p[h * a.kmax + j] * v;
    }
    for (i64 h = 0; h < hn; h++) {
      i64 th = t * a.heads + h0 + h;
      a.out[th * a.dim + d] = (float)(acc[h] / a.den[th]);
    }
  }
}

// att_ring_push: the last cap rows of each sequence's step
// go to the window ring (after att_attention has read it).
struct AttPushArgs { const float* kv; const SeqRec* seqs; i64 nseq; i64 T; i64 ring_off; i64 cap; i64 dim; };
KERNEL(att_ring_push, AttPushArgs) {
  // a work item per (token row, four values): adjacent items write adjacent values
  const i64 quads = (a.dim + 3) / 4;
  for (i64 i = GIDX; i < a.T * quads; i += GSTRIDE) {
    const i64 t = i / quads, d0 = (i % quads) * 4;
    i64 q = att_seq_of(a.seqs, a.nseq, t);
    if (q < 0) continue;
    const SeqRec s = a.seqs[q];
    i64 j = t - s.row;
    if (j < s.n - a.cap) continue;
    float* dst = att_ring(s, a.ring_off) + ((s.pos + j) % a.cap) * a.dim;
    for (i64 d = d0; d < d0 + 4 && d < a.dim; d++) dst[d] = a.kv[t * a.dim + d];
  }
}

// V4 decode attention in the fast numerics mode (targets.Options.Numerics "fast"):
// att_dec_keys and att_dec_softmax as in the exact mode, the logits and the
// output in float32 with fused multiply-adds instead of float64 sums, and each key row
// read once for a group of heads instead of once per head.

#define FATT_HG 16  // heads one work item serves

// att_fast_logits: one (token, key, group of FATT_HG heads) a work item, the key's
// values read once for the group; lg as att_dec_logits writes it.
KERNEL(att_fast_logits, AttArgs) {
  i64 groups = (a.heads + FATT_HG - 1) / FATT_HG;
  for (i64 i = GIDX; i < a.T * groups * a.kmax; i += GSTRIDE) {
    i64 j = i % a.kmax, tg = i / a.kmax, t = tg / groups, h0 = (tg % groups) * FATT_HG;
    if (j >= a.nkeys[t]) continue;
    const float* row = (const float*)a.keys[t * a.kmax + j];
    const float* q = a.q + t * a.heads * a.dim;
    i64 hn = imin(FATT_HG, a.heads - h0);
    float acc[FATT_HG];
    UNROLL for (int h = 0; h < FATT_HG; h++) acc[h] = 0;
    i64 d = 0;
    if ((a.dim & 3) == 0) {
      // four values a load (rows of dim floats start 16-byte aligned)
      for (; d < a.dim; d += 4) {
        float4 k = *(const float4*)(row + d);
        UNROLL for (int h = 0; h < FATT_HG; h++) {
          if (h < hn) {
            float4 x = *(const float4*)(q + (h0 + h) * a.dim + d);
            acc[h] = fmaf(x.x, k.x, acc[h]);
            acc[h] = fmaf(x.y, k.y, acc[h]);
            acc[h] = fmaf(x.z, k.z, acc[h]);
            acc[h] = fmaf(x.w, k.w, acc[h]);
          }
        }
      }
    }
    for (; d < a.dim; d++) {
      float k = row[d];
      UNROLL for (int h = 0; h < FATT_HG; h++)
        if (h < hn) acc[h] = fmaf(q[(h0 + h) * a.dim + d], k, acc[h]);
    }
    for (i64 h = 0; h < hn; h++) a.lg[((t * a.heads) + h0 + h) * a.kmax + j] = (double)acc[h] * a.scale;
  }
}

// att_fast_out: one (token, group of FATT_HG heads, value d) a work item: the weighted
// sum over the keys in float32, each key value read once for the group.
KERNEL(att_fast_out, AttArgs) {
  i64 groups = (a.heads + FATT_HG - 1) / FATT_HG;
  for (i64 i = GIDX; i < a.T * groups * a.dim; i += GSTRIDE) {
    i64 d = i % a.dim, tg = i / a.dim, t = tg / groups, h0 = (tg % groups) * FATT_HG;
    i64 q = att_seq_of(a.seqs, a.nseq, t);
    if (q < 0 || a.seqs[q].n != 1) continue;
    i64 nk = a.nkeys[t], hn = imin(FATT_HG, a.heads - h0);
    const u64* keys = a.keys + t * a.kmax;
    const double* p = a.lg + (t * a.heads + h0) * a.kmax;
    float acc[FATT_HG];
    UNROLL for (int h = 0; h < FATT_HG; h++) acc[h] = 0;
    UNROLL_BY(4)
    for (i64 j = 0; j < nk; j++) {
      float v = ((const float*)keys[j])[d];
      UNROLL for (int h = 0; h < FATT_HG; h++)
        if (h < hn) acc[h] = fmaf((float)p[h * a.kmax + j], v, acc[h]);
    }
    for (i64 h = 0; h < hn; h++) {
      i64 th = t * a.heads + h0 + h;
      a.out[th * a.dim + d] = (float)((double)acc[h] / a.den[th]);
    }
  }
}
