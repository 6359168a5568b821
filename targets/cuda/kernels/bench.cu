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

// read_probe (ReadProbe, BenchmarkFP4ReadProbe): the FP4 register tiles' reads without
// their arithmetic, to tell the memory's rate for the tiles' access pattern from the
// rate of the tiles themselves. The weights are two matrices (w1 and w3) of E experts ×
// N rows × K FP4 codes (K/2 bytes a row) and their UE8M0 scale bytes (K/32 a row).
// mode 0: the codes read as 16-byte words by a grid-stride loop (a stream's rate).
// modes 1 and 2: the _rega tiles' loads: a launch block of 128 work items per (expert,
// 64 rows, slice of K/S values); warp w's lane (g, t) reads, at each step of 128 values,
// the 16 code bytes at values kb + 128h + 32t of rows r0 + 16w + g and + 8 of both
// matrices and their four scale bytes. Mode 1 holds 46 KB of shared memory a block
// (read_probe_s), so that at most four blocks share a multiprocessor whatever carveout
// the driver picks (the tiles' occupancy: four blocks of 128, run 56's counters); mode 2
// none; mode 3 is mode 1 without the scale bytes (the tiles' byte loads of eight
// rows a load, a quarter of their L2 sectors excessive, left out). Modes 4 and 5 are
// modes 1 and 3 over the same bytes laid out in tiles of (16-row group, step): a tile's
// 16 rows × 64 code bytes contiguous (1 KB, rows in order), and its 16 rows × 4 scale
// bytes (64 bytes), so that a warp's code load reads 512 contiguous bytes (four whole
// lines, where the row layout's touches eight rows' halves of lines) and its scale load
// one 32-byte sector (where the row layout's touches eight).
// Each work item writes the XOR of every word and scale byte it read to out[item], so
// that nothing is left unread and the host can check which bytes were.
struct ReadProbeArgs { const uint4* w[2]; const unsigned char* s[2]; i64 E, N, K, S; u32* out; i64 mode, items; };
DEVM u32 probe_word(uint4 q) { return q.x ^ q.y ^ q.z ^ q.w; }
DEVM void read_probe_item(const ReadProbeArgs& a, i64 gi) {
  if (a.mode == 0) {
    u32 acc = 0;
    const i64 words = a.E * a.N * a.K / 32;  // 16-byte words of w[0]
    for (i64 i = gi; i < words; i += a.items) acc ^= probe_word(a.w[0][i]);
    a.out[gi] = acc;
    return;
  }
  const i64 rb = a.N / 64, blk = gi >> 7;
  const int tid = (int)(gi & 127), warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const i64 e = blk / (rb * a.S), r0 = ((blk / a.S) % rb) * 64 + 16 * warp, sl = blk % a.S;
  const i64 ks = a.K / a.S, kb = sl * ks, row = a.K / 2, srow = a.K / 32;
  u32 acc = 0;
  if (a.mode == 4 || a.mode == 5) {  // the tiled layout: tile (16-row group, step) at (group · K/128 + step)
    const i64 steps = a.K / 128, grp = (e * a.N + r0) / 16;
    for (i64 q = kb / 128; q < (kb + ks) / 128; q++) {
      const i64 T = grp * steps + q;
      for (int p = 0; p < 2; p++) {
        const unsigned char* c = (const unsigned char*)a.w[p] + T * 1024 + 64 * g + 16 * t;
        acc ^= probe_word(*(const uint4*)c) ^ probe_word(*(const uint4*)(c + 512));
        if (a.mode == 4) acc ^= (u32)a.s[p][T * 64 + 4 * g + t] ^ ((u32)a.s[p][T * 64 + 32 + 4 * g + t] << 8);
      }
    }
    a.out[gi] = acc;
    return;
  }
  const unsigned char* wa[2] = {(const unsigned char*)a.w[0] + (e * a.N + r0 + g) * row,
                                 (const unsigned char*)a.w[1] + (e * a.N + r0 + g) * row};
  const unsigned char* sa[2] = {a.s[0] + (e * a.N + r0 + g) * srow, a.s[1] + (e * a.N + r0 + g) * srow};
  for (i64 k = kb + 32 * t; k < kb + ks; k += 128)
    for (int p = 0; p < 2; p++) {
      acc ^= probe_word(*(const uint4*)(wa[p] + k / 2)) ^ probe_word(*(const uint4*)(wa[p] + 8 * row + k / 2));
      if (a.mode != 3) acc ^= (u32)sa[p][k / 32] ^ ((u32)sa[p][8 * srow + k / 32] << 8);
    }
  a.out[gi] = acc;
}
KERNEL(read_probe, ReadProbeArgs) {
  for (i64 gi = GIDX; gi < a.items; gi += GSTRIDE) read_probe_item(a, gi);
}
// read_probe_s: modes 1, 3, 4 and 5, with 46 KB of shared memory a block (at most four blocks
// a multiprocessor: 5 × (46 + 1) KB exceed the 228 KB an sm_90 multiprocessor has)
KERNEL(read_probe_s, ReadProbeArgs) {
#ifndef DI_EMULATE
  __shared__ uint4 pad[2944];
  pad[GIDX & 127] = make_uint4((u32)GIDX, 0, 0, 0);
  if (pad[(GIDX + 1) & 127].y == 1u) a.out[0] = 0;  // (never: keeps pad)
#endif
  for (i64 gi = GIDX; gi < a.items; gi += GSTRIDE) read_probe_item(a, gi);
}

// read_probe_b (mode 6): the tiles' bytes brought into shared memory by Hopper's bulk
// copies instead of the lanes' loads: the form a producer/consumer tile kernel would
// take. A block (the tiles' blocks: expert, 64 rows, slice) keeps PB_NS stages of PB_ST
// steps in flight (dynamic shared memory, ReadProbe's probeBulkShared bytes): thread i
// copies row i % 64 of matrix i / 64, its PB_ST · 64 code bytes and PB_ST · 4 scale
// bytes, as two cp.async.bulk into the stage, arriving on the stage's mbarrier with
// those bytes expected; every thread waits on the barrier's phase, then reads what the
// tiles' lane (g, t) of its warp would (rows g and g+8 of both matrices, 16 code bytes
// and one scale byte each a step) from the stage and XORs it as read_probe's mode 1
// does (the same XOR); after a barrier the stage takes the copies of PB_NS stages on.
// Go requires the slice's steps to be whole stages and every copy 16-byte aligned (K
// and K/S multiples of 512). The emulated device reads as mode 1.
#define PB_ST 4
#define PB_NS 3
#define PB_CODES (128 * PB_ST * 64)        // a stage's code bytes (2 matrices × 64 rows)
#define PB_STAGE (PB_CODES + 128 * PB_ST * 4)  // and its scale bytes
#ifndef DI_EMULATE
DEVM void pb_issue(const ReadProbeArgs& a, unsigned char* stage, u64* bar, i64 e, i64 r0, i64 kb, i64 h0, int tid) {
  const int p = tid >> 6, row = tid & 63;
  const i64 r = e * a.N + r0 + row;
  const unsigned char* c = (const unsigned char*)a.w[p] + r * (a.K / 2) + (kb + 128 * h0) / 2;
  const unsigned char* sc = a.s[p] + r * (a.K / 32) + (kb + 128 * h0) / 32;
  fast_async_fence();  // (the generic reads of this stage before)
  fast_bar_arrive_tx(bar, PB_ST * 68);
  fast_bulk(stage + tid * PB_ST * 64, c, PB_ST * 64, bar);
  fast_bulk(stage + PB_CODES + tid * PB_ST * 4, sc, PB_ST * 4, bar);
}
#endif
KERNEL(read_probe_b, ReadProbeArgs) {
#ifdef DI_EMULATE
  for (i64 gi = GIDX; gi < a.items; gi += GSTRIDE) read_probe_item(a, gi);
#else
  (void)GSTRIDE;  // the grid is exactly the blocks
  DYN_SHARED(pb);
  __shared__ __align__(8) unsigned long long bars[PB_NS];
  const i64 rb = a.N / 64, blk = GIDX >> 7;
  const int tid = (int)(GIDX & 127), warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const i64 e = blk / (rb * a.S), r0 = ((blk / a.S) % rb) * 64, sl = blk % a.S;
  const i64 ks = a.K / a.S, kb = sl * ks;
  const int nst = (int)(ks / (128 * PB_ST));  // stages of the slice
  if (tid < PB_NS) fast_bar_init(&bars[tid], 128);
  fast_bar_fence();
  __syncthreads();
  for (int q = 0; q < PB_NS && q < nst; q++) pb_issue(a, pb + q * PB_STAGE, &bars[q], e, r0, kb, (i64)q * PB_ST, tid);
  u32 acc = 0;
  for (int q = 0; q < nst; q++) {
    const int b = q % PB_NS;
    unsigned char* st = pb + b * PB_STAGE;
    fast_bar_wait(&bars[b], (u32)((q / PB_NS) & 1));
    for (int h = 0; h < PB_ST; h++)
      for (int p = 0; p < 2; p++) {
        const int ra = p * 64 + 16 * warp + g, rb8 = ra + 8;
        acc ^= probe_word(*(const uint4*)(st + ra * PB_ST * 64 + 64 * h + 16 * t)) ^
               probe_word(*(const uint4*)(st + rb8 * PB_ST * 64 + 64 * h + 16 * t));
        acc ^= (u32)st[PB_CODES + ra * PB_ST * 4 + 4 * h + t] ^ ((u32)st[PB_CODES + rb8 * PB_ST * 4 + 4 * h + t] << 8);
      }
    __syncthreads();  // every thread done with the stage
    if (q + PB_NS < nst) pb_issue(a, st, &bars[b], e, r0, kb, (i64)(q + PB_NS) * PB_ST, tid);
  }
  a.out[GIDX] = acc;
#endif
}
