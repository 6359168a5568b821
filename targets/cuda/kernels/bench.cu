// Benchmark-only kernels: launched only when a benchmark setting asks for them, never in
// the numerics a plan is checked against.

// moe_route_uniform (DEEPINFER_CUDA_ROUTE=uniform): each token's k expert ids, after the
// router wrote them, replaced by k distinct experts drawn uniformly from a hash of the
// token's row, its hidden values' first (up to) four words and the slot; the routing
// weights are left as the router computed them. A random-weight model's router sends
// rows that share a context to a few experts; a trained router spreads them (DeepSeek's
// bias-balanced top-k), and this stands in for it where a step's experts' bytes are
// what is being measured. One token a work item.
struct MoEUniformArgs { const float* x; i64 D; int* ids; i64 T; i64 k; i64 E; };
DEV u64 bench_mix(u64 z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
KERNEL(moe_route_uniform, MoEUniformArgs) {
  for (i64 t = GIDX; t < a.T; t += GSTRIDE) {
    u64 h = bench_mix((u64)t);
    const u32* xb = (const u32*)(a.x + t * a.D);
    for (i64 i = 0; i < 4 && i < a.D; i++) h = bench_mix(h ^ (u64)xb[i]);
    int* o = a.ids + t * a.k;
    for (i64 j = 0; j < a.k; j++) {
      int e = 0;
      for (;;) {
        h = bench_mix(h);
        e = (int)(h % (u64)a.E);
        bool dup = false;
        for (i64 q = 0; q < j; q++) dup = dup || o[q] == e;
        if (!dup) break;
      }
      o[j] = e;
    }
  }
}
