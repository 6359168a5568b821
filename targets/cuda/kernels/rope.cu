// rope.cu: the interleaved partial RoPE (cpu: targets/cpu/rope.go newRope). The tables
// and the rotation (RopeSpec, rope_rotate) live in attention.cu, which sorts before this
// file, because the compressor rotates its entries too.

// rope_apply: one work item per (token, group of ROPE_HG heads, channel pair) of
// x[T, heads·head_dim]: the pair's angle at the token's position (sign -1: the inverse
// rotation) computed once for the group's heads, each head's pair of the trailing
// rope_dim channels rotated into y (y may be x); rope_copy copies the channels before
// them when y is not x. The same operations a value as ropeSpec.apply. round: every value
// stored rounded to bf16 (a fake_quant to bf16 run as the epilogue, ops_fuse.go; y is
// then not x, so rope_copy or rope_copy4 rounds the channels before the rotated ones).
#define ROPE_HG 8
struct RopeArgs { const float* x; const int* pos; float* y; i64 n; i64 heads; double sign; i64 round; RopeSpec r; };
// rope_apply_items: rope_apply's work items; rope_apply_item: item i.
DEVM i64 rope_apply_items(const RopeArgs& a) { return a.n * ((a.heads + ROPE_HG - 1) / ROPE_HG) * (a.r.rope_dim / 2); }
DEVM void rope_apply_item(const RopeArgs& a, i64 i) {
  const i64 half = a.r.rope_dim / 2, groups = (a.heads + ROPE_HG - 1) / ROPE_HG, off = a.r.head_dim - a.r.rope_dim;
  const i64 p = i % half, g = (i / half) % groups, t = i / (half * groups);
  double c, s;
  rope_angle(a.r, (i64)a.pos[t], p, a.sign, &c, &s);
  const i64 h1 = imin(a.heads, (g + 1) * ROPE_HG);
  for (i64 h = g * ROPE_HG; h < h1; h++) {
    const i64 o = (t * a.heads + h) * a.r.head_dim;
    rope_pair(a.x + o, a.y + o, off + 2 * p, c, s);
    if (a.round) {
      float* y = a.y + o + off + 2 * p;
      y[0] = q_bf16(y[0]), y[1] = q_bf16(y[1]);
    }
  }
}
KERNEL(rope_apply, RopeArgs) {
  for (i64 i = GIDX; i < rope_apply_items(a); i += GSTRIDE) rope_apply_item(a, i);
}
// rope_copy_item: rope_copy's item i (kept channel i % keep of head row i / keep).
DEVM void rope_copy_item(const RopeArgs& a, i64 keep, i64 i) {
  const i64 c = i % keep, th = i / keep;
  const float v = a.x[th * a.r.head_dim + c];
  a.y[th * a.r.head_dim + c] = a.round ? q_bf16(v) : v;
}
KERNEL(rope_copy, RopeArgs) {
  const i64 keep = a.r.head_dim - a.r.rope_dim;
  for (i64 i = GIDX; i < a.n * a.heads * keep; i += GSTRIDE) rope_copy_item(a, keep, i);
}
// rope_copy4: rope_copy four channels a work item (Go: head_dim and the kept channels
// multiples of four, x and y 16-byte aligned), with 32-bit index arithmetic where the
// items fit (rope_copy's 64-bit division a value was most of its time: run 22c, V4.1's
// query rows at batch 256, 0.33 ms a step for ~0.12 GB copied). hv: head rows (tokens ×
// heads), hd4 and keep4: a head's and its kept channels' float4s.
struct RopeCopyArgs { const float* x; float* y; i64 hv; i64 hd4; i64 keep4; i64 round; };
DEV float4 rope_round4(float4 v, i64 round) {
  if (round) v.x = q_bf16(v.x), v.y = q_bf16(v.y), v.z = q_bf16(v.z), v.w = q_bf16(v.w);
  return v;
}
// rope_copy4_item: rope_copy4's item i (kept float4 i % keep4 of head row i / keep4),
// in 32-bit index arithmetic (I u32: the items fit) or 64-bit.
template <class I>
DEVM void rope_copy4_item(const float* x, float* y, I i, I keep4, I hd4, i64 round) {
  const I th = i / keep4, c = i - th * keep4;
  ((float4*)y)[(i64)th * hd4 + c] = rope_round4(((const float4*)x)[(i64)th * hd4 + c], round);
}
KERNEL(rope_copy4, RopeCopyArgs) {
  const i64 n = a.hv * a.keep4;
  if (n < (1ll << 31) && GSTRIDE < (1ll << 31)) {
    const u32 keep4 = (u32)a.keep4, hd4 = (u32)a.hd4, stride = (u32)GSTRIDE;
    for (u32 i = (u32)GIDX; i < (u32)n; i += stride) rope_copy4_item(a.x, a.y, i, keep4, hd4, a.round);
    return;
  }
  for (i64 i = GIDX; i < n; i += GSTRIDE) rope_copy4_item(a.x, a.y, i, a.keep4, a.hd4, a.round);
}

// rope_one: rope_copy4's items (copy4 = 1; else rope_copy's), then rope_apply's, in one
// launch: the same operations on the same values, one launch where there were two
// (DEEPINFER_CUDA_ROPE_ONE=0 keeps the two). The copies write only the kept channels and
// the rotations only the rotated ones, so no item reads what another writes.
struct RopeOneArgs { RopeArgs r; i64 hd4; i64 keep4; i64 copy4; i64 ncopy; };
KERNEL(rope_one, RopeOneArgs) {
  const i64 n = a.ncopy + rope_apply_items(a.r), keep = a.r.r.head_dim - a.r.r.rope_dim;
  if (a.copy4 && n < (1ll << 31) && GSTRIDE < (1ll << 31)) {
    // (32-bit index arithmetic for the copies, as rope_copy4's)
    const u32 keep4 = (u32)a.keep4, hd4 = (u32)a.hd4, stride = (u32)GSTRIDE, nc = (u32)a.ncopy;
    for (u32 i = (u32)GIDX; i < (u32)n; i += stride) {
      if (i >= nc) rope_apply_item(a.r, (i64)(i - nc));
      else rope_copy4_item(a.r.x, a.r.y, i, keep4, hd4, a.r.round);
    }
    return;
  }
  for (i64 i = GIDX; i < n; i += GSTRIDE) {
    if (i >= a.ncopy) rope_apply_item(a.r, i - a.ncopy);
    else if (a.copy4) rope_copy4_item(a.r.x, a.r.y, i, a.keep4, a.hd4, a.r.round);
    else rope_copy_item(a.r, keep, i);
  }
}
