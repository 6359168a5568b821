// rope.cu: the interleaved partial RoPE (cpu: targets/cpu/rope.go newRope). The tables
// and the rotation (RopeSpec, rope_rotate) live in attention.cu, which sorts before this
// file, because the compressor rotates its entries too.

// rope_apply: one work item per (token, group of ROPE_HG heads, channel pair) of
// x[T, heads·head_dim]: the pair's angle at the token's position (sign -1: the inverse
// rotation) computed once for the group's heads, each head's pair of the trailing
// rope_dim channels rotated into y (y may be x); rope_copy copies the channels before
// them when y is not x. The same operations a value as ropeSpec.apply.
#define ROPE_HG 8
struct RopeArgs { const float* x; const int* pos; float* y; i64 n; i64 heads; double sign; RopeSpec r; };
KERNEL(rope_apply, RopeArgs) {
  const i64 half = a.r.rope_dim / 2, groups = (a.heads + ROPE_HG - 1) / ROPE_HG, off = a.r.head_dim - a.r.rope_dim;
  for (i64 i = GIDX; i < a.n * groups * half; i += GSTRIDE) {
    const i64 p = i % half, g = (i / half) % groups, t = i / (half * groups);
    double c, s;
    rope_angle(a.r, (i64)a.pos[t], p, a.sign, &c, &s);
    const i64 h1 = imin(a.heads, (g + 1) * ROPE_HG);
    for (i64 h = g * ROPE_HG; h < h1; h++) {
      const i64 o = (t * a.heads + h) * a.r.head_dim;
      rope_pair(a.x + o, a.y + o, off + 2 * p, c, s);
    }
  }
}
KERNEL(rope_copy, RopeArgs) {
  const i64 keep = a.r.head_dim - a.r.rope_dim;
  for (i64 i = GIDX; i < a.n * a.heads * keep; i += GSTRIDE) {
    const i64 c = i % keep, th = i / keep;
    a.y[th * a.r.head_dim + c] = a.x[th * a.r.head_dim + c];
  }
}
