// rope.cu: the interleaved partial RoPE (cpu: targets/cpu/rope.go newRope). The tables
// and the rotation (RopeSpec, rope_rotate) live in attention.cu, which sorts before this
// file, because the compressor rotates its entries too.

// rope_apply: one work item per (token, head) of x[T, heads·head_dim]: y = x with the
// trailing rope_dim channels of the head rotated at the token's position (sign -1: the
// inverse rotation). y may be x.
struct RopeArgs { const float* x; const int* pos; float* y; i64 n; i64 heads; double sign; RopeSpec r; };
KERNEL(rope_apply, RopeArgs) {
  for (i64 i = GIDX; i < a.n; i += GSTRIDE) {
    const float* x = a.x + i * a.r.head_dim;
    float* y = a.y + i * a.r.head_dim;
    for (i64 c = 0; c < a.r.head_dim - a.r.rope_dim; c++) y[c] = x[c];
    rope_rotate(a.r, x, y, (i64)a.pos[i / a.heads], a.sign);
  }
}
