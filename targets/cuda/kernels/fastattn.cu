// fastattn.cu: V4 decode attention in the fast numerics mode (targets.Options.Numerics
// "fast"): att_dec_keys and att_dec_softmax as in the exact mode, the logits and the
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
