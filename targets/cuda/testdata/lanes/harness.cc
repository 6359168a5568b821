// harness.cc: runs tensorcore.cu's dense products, or tensorcore_attn.cu's V4.1
// attention tiles (csa_tc_*), on one random problem and writes their outputs, for
// lanes_test.go. It follows the kernel source in one translation
// unit, built one of two ways:
//   - with DI_EMULATE: the emulated device's kernels (emu_*), as the fake driver runs them;
//   - with DI_LANES and lanes.h first: the device branch, each launch block's 128 threads
//     run as coroutines (ucontext, then _setjmp/_longjmp) by a scheduler that plays the warps' collective
//     operations: mma.sync m16n8k16 from the lanes' fragments (PTX's layout; the 16
//     products of an output summed in the order the emulated device sums them), the
//     asynchronous copies (each group applied when a wait lets it complete, the
//     latest moment the device may), __syncthreads, and the warpgroup's wgmma
//     operations (the products read from shared memory through their descriptors).
// Usage: harness KERNEL FMT N K M G S KS OUTBF16 SEED OUTFILE [eager], KERNEL m4, m1,
// m1fp8 (FP8 formats), m1fp8o (FP8, N a multiple of 16, K of 64: fast_gemm_m1_fp8_only), blk, stg (float32 weights: fast_gemm_stage_f32), wide (bf16 x
// only: widex) or the wgmma kernels wgf32 and wgfp8 (float32 or FP8 weights, bf16 x
// with xexact, G 1, K a multiple of 64: wgf32x, wgf32px (two fragment sets), wgfp8x, wgfp8ax
// (the weight bytes two steps ahead), wgfp8nx (the same in blocks of 64 x rows), wgf32p3wx
// (wgf32px with a ring of three x buffers, two warpgroups a launch block), wgbf16wx
// (bf16 weights, in groups too)) and wgbf16,
// wgfp8r (bf16 or FP8 weights, x in two halves or, wgbf16x, wgfp8rx, bf16; wgbf16a[x], wgfp8ra[x]: the
// weight rows two steps ahead; wgfp8r reads
// x's pairs in wgr_pos's order); the file receives y (M×N float32) and, when S > 1, part (S×M×N). With eager
// (DI_LANES), the warps run skewed (lanes::eager); with wgeager, in turn with each
// wgmma played at its issue and copies landing late (lanes::eager_wg). Or: harness csa_tc_logits[_n] or
// csa_tc_out[_n] ROWS HEADS DIM LMAX BLOCK SEED OUTFILE [eager]; the file receives pb
// (ROWS×HEADS×LMAX float32, the logits) or out (ROWS×HEADS×DIM).
#include <cstdio>
#include <functional>
#include <cstdint>
#include <cstdlib>
#include <vector>

namespace {
u64 rng = 0x9e3779b97f4a7c15ull;
u32 rnd() {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (u32)(rng >> 32);
}
float unif(float lo, float hi) { return lo + (hi - lo) * (float)(rnd() >> 8) * (1.0f / 16777216.0f); }
void* zalloc(size_t n) {
  void* p = aligned_alloc(256, (n + 255) / 256 * 256);
  memset(p, 0, (n + 255) / 256 * 256);
  return p;
}
}  // namespace

#ifdef DI_LANES
namespace lanes {
const int TMAX = 384;     // the most threads a launch block takes here
const int WGT = 128;      // a warpgroup's threads
int T = 128;              // this launch's threads a block (128, 256 or 384: one to three warpgroups)
const int STACK = 1 << 17;
enum { RUN, BAR, WARP, WG, NBAR, DONE };
// named barriers (bar.sync / bar.arrive with an id and a thread count): per id, the
// arrivals of its current phase, the count its users named, and each waiting thread's id
const int NBARS = 16;
int nb_arrived[NBARS], nb_count[NBARS], nb_wait[TMAX];
struct Copy {
  void* dst;
  const void* src;
  bool in;
};
struct Thread {
  ucontext_t ctx;
  int state;
  std::vector<Copy> open;
  std::vector<std::vector<Copy>> groups;
};
Thread th[TMAX];
ucontext_t sched;
// a thread starts on its own stack by setcontext and is switched by _setjmp/_longjmp
// after that (swapcontext saves and restores the signal mask, a system call, at every
// switch)
jmp_buf sched_jb, th_jb[TMAX];
bool started[TMAX];
int cur;
char* stacks;
struct MmaIn {
  u32 a[4], b[2];
  float c[4];
};
MmaIn in[TMAX];
// eager: each warp runs on until it waits at __syncthreads or ends, and a copy lands
// when issued (the earliest moment); else the warps advance an mma at a time in turn,
// and a copy lands at the wait that lets it complete (the latest)
bool eager;
// eager_wg (wgeager): the warps in turn and each copy landing at the latest wait that lets
// it, but each wgmma product played at its issue: a stage read as soon as a barrier
// lets the consumers in, before copies its producer did not wait for have landed
bool eager_wg;
float out[TMAX][4];
std::function<void()> body;  // the kernel on its arguments

void block(int st) {
  th[cur].state = st;
  if (!_setjmp(th_jb[cur])) _longjmp(sched_jb, 1);
}
void entry() {
  body();
  th[cur].state = DONE;
  _longjmp(sched_jb, 1);
}
// resume thread i where it blocked (or start it)
void resume(int i) {
  cur = i;
  threadIdx.x = (unsigned)i;
  if (_setjmp(sched_jb)) return;
  if (started[i]) _longjmp(th_jb[i], 1);
  started[i] = true;
  setcontext(&th[i].ctx);
}
float lo(u32 p) { return f32_bits(p << 16); }
float hi(u32 p) { return f32_bits(p & 0xffff0000u); }

// The warpgroup's tensor-core operations (wgmma, m64n128k16 or, both operands in
// shared memory, m64n64k16; bf16 in, float32 accumulators). A thread's call is recorded in wgc and the thread blocks (WG); when all
// 128 threads of its warpgroup are at the same operation, it is played (each warpgroup
// of a block its own products and groups): a product is issued (its
// operands' descriptors, each thread's A fragments in the register form and the address
// of its accumulators), a commit closes the issued products into a group, a wait plays
// the groups it needs complete — reading the operands from shared memory and the A
// fragments from the threads' registers then, the latest moment the device may (eager:
// at the issue, the earliest). A product's output
// (row r of A, column c of B) is its accumulator plus the 16 products a·b added one
// at a time in k order, in float32 (the emulated device's order for its wgmma
// kernels). Thread i = 32w + 4g + t holds, in d[4j + q], row 16w + g + 8·(q ≥ 2) and
// column 8j + 2t + (q & 1) (PTX's fragment layout), j < cols / 8.
enum { WG_FENCE, WG_MMA, WG_COMMIT, WG_WAIT };
struct WgCall {
  int op, n, cols;
  const u32* a;
  u64 da, db;
  float* d;
};
WgCall wgc[TMAX];
struct WgMma {
  bool rs;
  int cols;
  u64 da, db;
  const u32* a[WGT];  // each thread's A fragments, read when the product is played
  float* d[WGT];
};
std::vector<WgMma> wg_open[TMAX / WGT];
std::vector<std::vector<WgMma>> wg_groups[TMAX / WGT];
// shared addresses and descriptors: lanes.h's lanes_smem
u32 smem_addr(const void* p) { return lanes_smem.addr(p); }
// elem: element (r, k) of the K-major bf16 tile descriptor desc names
float elem(u64 desc, int r, int k) {
  const unsigned char* q = lanes_smem.at(desc, r, 2 * (u32)k);
  if (!q) {
    fprintf(stderr, "descriptor %llx: %s\n", (unsigned long long)desc, lanes_smem.why);
    exit(3);
  }
  unsigned short v;
  memcpy(&v, q, 2);
  return f32_bits((u32)v << 16);
}
void play(const WgMma& m) {
  float A[64][16], B[128][16];
  for (int r = 0; r < 64; r++)
    for (int k = 0; k < 16; k++) {
      if (m.rs) {
        const u32* f = m.a[32 * (r >> 4) + 4 * (r & 7) + ((k & 7) >> 1)];  // (registers changed before the wait show)
        u32 v = f[2 * (k >> 3) + ((r >> 3) & 1)];
        A[r][k] = k & 1 ? hi(v) : lo(v);
      } else {
        A[r][k] = elem(m.da, r, k);
      }
    }
  for (int c = 0; c < m.cols; c++)
    for (int k = 0; k < 16; k++) B[c][k] = elem(m.db, c, k);
  for (int i = 0; i < WGT; i++) {
    int w = i >> 5, g = (i & 31) >> 2, t = i & 3;
    for (int e = 0; e < m.cols / 2; e++) {
      int r = 16 * w + g + 8 * ((e >> 1) & 1), c = 8 * (e >> 2) + 2 * t + (e & 1);
      float acc = m.d[i][e];
      for (int k = 0; k < 16; k++) acc += A[r][k] * B[c][k];
      m.d[i][e] = acc;
    }
  }
}
// wg plays the operation every thread of warpgroup q is at; false: they are not at the
// same one
bool wg(int q) {
  const WgCall* wc = wgc + WGT * q;
  const WgCall& c = wc[0];
  std::vector<WgMma>& open = wg_open[q];
  std::vector<std::vector<WgMma>>& groups = wg_groups[q];
  for (int i = 1; i < WGT; i++)
    if (wc[i].op != c.op || wc[i].n != c.n || wc[i].cols != c.cols || wc[i].da != c.da || wc[i].db != c.db || (wc[i].a == nullptr) != (c.a == nullptr))
      return false;
  switch (c.op) {
    case WG_MMA: {
      WgMma m;
      m.rs = c.a != nullptr, m.cols = c.cols, m.da = c.da, m.db = c.db;
      for (int i = 0; i < WGT; i++) {
        m.a[i] = wc[i].a;
        m.d[i] = wc[i].d;
      }
      if (eager || eager_wg) play(m);
      else open.push_back(m);
      break;
    }
    case WG_COMMIT:
      groups.push_back(open);
      open.clear();
      break;
    case WG_WAIT:
      while ((int)groups.size() > c.n) {
        for (const WgMma& m : groups.front()) play(m);
        groups.erase(groups.begin());
      }
      break;
  }
  return true;
}
// mma plays one warp's m16n8k16: A 16×16 (rows × k), B 16×8 (k × columns), C 16×8.
void mma(int w) {
  float A[16][16], B[16][8], C[16][8];
  for (int l = 0; l < 32; l++) {
    const MmaIn& m = in[32 * w + l];
    int g = l >> 2, t = l & 3;
    for (int h = 0; h < 2; h++) {
      A[g][2 * t + 8 * h] = lo(m.a[2 * h]), A[g][2 * t + 8 * h + 1] = hi(m.a[2 * h]);
      A[g + 8][2 * t + 8 * h] = lo(m.a[2 * h + 1]), A[g + 8][2 * t + 8 * h + 1] = hi(m.a[2 * h + 1]);
      B[2 * t + 8 * h][g] = lo(m.b[h]), B[2 * t + 8 * h + 1][g] = hi(m.b[h]);
    }
    C[g][2 * t] = m.c[0], C[g][2 * t + 1] = m.c[1], C[g + 8][2 * t] = m.c[2], C[g + 8][2 * t + 1] = m.c[3];
  }
  // the emulated device's order: a lane quarter t's k pairs 2t and 2t+8 in turn
  static const int order[16] = {0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15};
  for (int l = 0; l < 32; l++) {
    int g = l >> 2, t = l & 3;
    for (int e = 0; e < 4; e++) {
      int r = g + (e >= 2 ? 8 : 0), c = 2 * t + (e & 1);
      float d = 0;
      for (int i = 0; i < 16; i++) d += A[r][order[i]] * B[order[i]][c];
      out[32 * w + l][e] = C[r][c] + d;
    }
  }
}
void apply(const std::vector<Copy>& g) {
  for (const Copy& c : g) {
    if (c.in) memcpy(c.dst, c.src, 16);
    else memset(c.dst, 0, 16);
  }
}
// run runs launch block b to its end; a collective operation that cannot complete
// (lanes of a warp at different ones, or some exited) ends the program.
void run(long long b) {
  blockIdx.x = (unsigned)b;
  for (int id = 0; id < NBARS; id++) nb_arrived[id] = 0, nb_count[id] = 0;
  for (int i = 0; i < T; i++) {
    th[i].state = RUN;
    started[i] = false;
    th[i].open.clear();
    th[i].groups.clear();
    getcontext(&th[i].ctx);
    th[i].ctx.uc_stack.ss_sp = stacks + (size_t)i * STACK;
    th[i].ctx.uc_stack.ss_size = STACK;
    th[i].ctx.uc_link = nullptr;
    makecontext(&th[i].ctx, entry, 0);
  }
  for (;;) {
    int done = 0, bar = 0, released = 0;
    for (int w = 0; w < T / 32; w++) {
      for (;;) {
        for (int i = 32 * w; i < 32 * w + 32; i++) {
          if (th[i].state != RUN) continue;
          resume(i);
        }
        int at = 0;
        for (int l = 0; l < 32; l++) at += th[32 * w + l].state == WARP;
        if (at != 32) break;
        mma(w);
        for (int l = 0; l < 32; l++) th[32 * w + l].state = RUN;
        released++;
        if (!eager) break;
      }
    }
    int atwg = 0;
    for (int i = 0; i < T; i++) done += th[i].state == DONE, bar += th[i].state == BAR, atwg += th[i].state == WG;
    if (done == T) {
      for (int id = 0; id < NBARS; id++)
        if (nb_arrived[id] != 0) {
          fprintf(stderr, "block %lld: ended with %d arrivals at named barrier %d that no phase completed\n", b, nb_arrived[id], id);
          exit(3);
        }
      for (int q = 0; q < T / WGT; q++)
        if (!wg_open[q].empty() || !wg_groups[q].empty()) {
          fprintf(stderr, "block %lld: ended with wgmma products not waited for\n", b);
          exit(3);
        }
      return;
    }
    if (released) continue;
    // a warpgroup whose threads are all at a wgmma operation plays it
    for (int q = 0; q < T / WGT; q++) {
      int at = 0;
      for (int i = WGT * q; i < WGT * (q + 1); i++) at += th[i].state == WG;
      if (at != WGT) continue;
      if (!wg(q)) {
        fprintf(stderr, "block %lld: warpgroup %d's threads at different wgmma operations\n", b, q);
        exit(3);
      }
      for (int i = WGT * q; i < WGT * (q + 1); i++) th[i].state = RUN;
      released++;
    }
    if (released) continue;
    if (bar + done == T) {
      for (int i = 0; i < T; i++)
        if (th[i].state == BAR) th[i].state = RUN;
      continue;
    }
    // a named barrier whose waiting threads and arrivals make its count completes a phase
    for (int id = 0; id < NBARS; id++) {
      int waiting = 0;
      for (int i = 0; i < T; i++) waiting += th[i].state == NBAR && nb_wait[i] == id;
      if (waiting == 0 || waiting + nb_arrived[id] < nb_count[id]) continue;
      if (waiting + nb_arrived[id] > nb_count[id]) {
        fprintf(stderr, "block %lld: named barrier %d: %d threads waiting and %d arrived, more than its count %d\n", b, id, waiting, nb_arrived[id], nb_count[id]);
        exit(3);
      }
      for (int i = 0; i < T; i++)
        if (th[i].state == NBAR && nb_wait[i] == id) th[i].state = RUN;
      nb_arrived[id] = 0, nb_count[id] = 0;
      released++;
    }
    if (released) continue;
    fprintf(stderr, "block %lld: threads stuck (%d exited, %d at __syncthreads, %d at a wgmma operation, the rest at an mma or a named barrier)\n", b, done, bar, atwg);
    exit(3);
  }
}
// launch runs kernel k over items work items in launch blocks of threads (128 or 256)
template <class A>
void launch(void (*k)(const A), const A& a, long long items, int threads = 128) {
  T = threads;
  long long grid = (items + T - 1) / T;
  body = [k, a] { k(a); };
  blockDim.x = T;
  gridDim.x = (unsigned)grid;
  if (!stacks) stacks = (char*)malloc((size_t)TMAX * STACK);
  for (long long b = 0; b < grid; b++) run(b);
}
}  // namespace lanes

void __syncthreads() { lanes::block(lanes::BAR); }
// bar.sync id, n (wait) or bar.arrive id, n: every user of a phase must name the same
// count; an arrival past a phase's count, or left over when the block ends, is an error
void lanes_nbar(int id, int n, bool wait) {
  if (id <= 0 || id >= lanes::NBARS || n <= 0 || n % 32 != 0 || n > lanes::T) {
    fprintf(stderr, "named barrier %d with count %d (block of %d threads)\n", id, n, lanes::T);
    exit(3);
  }
  if (lanes::nb_count[id] != 0 && lanes::nb_count[id] != n) {
    fprintf(stderr, "named barrier %d: counts %d and %d in one phase\n", id, lanes::nb_count[id], n);
    exit(3);
  }
  lanes::nb_count[id] = n;
  if (!wait) {
    if (++lanes::nb_arrived[id] > n) {
      fprintf(stderr, "named barrier %d: more than %d arrivals in one phase\n", id, n);
      exit(3);
    }
    return;
  }
  lanes::nb_wait[lanes::cur] = id;
  lanes::block(lanes::NBAR);
}
void lanes_mma(float* c, u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1) {
  lanes::MmaIn& m = lanes::in[lanes::cur];
  m.a[0] = a0, m.a[1] = a1, m.a[2] = a2, m.a[3] = a3, m.b[0] = b0, m.b[1] = b1;
  for (int e = 0; e < 4; e++) m.c[e] = c[e];
  lanes::block(lanes::WARP);
  for (int e = 0; e < 4; e++) c[e] = lanes::out[lanes::cur][e];
}
unsigned lanes_smem_addr(const void* p) { return lanes::smem_addr(p); }
// (no kernel this harness runs takes ldmatrix: fp4_fibers.h plays it for csa_tc_fused)
void lanes_ldsm4t(unsigned*, const unsigned*) { abort(); }
static void wg_call(int op, int n, const u32* a, u64 da, u64 db, float* d, int cols = 128) {
  lanes::wgc[lanes::cur] = {op, n, cols, a, da, db, d};
  lanes::block(lanes::WG);
}
void lanes_wg_fence() { wg_call(lanes::WG_FENCE, 0, nullptr, 0, 0, nullptr); }
void lanes_wg_mma(float* d, const unsigned* a, unsigned long long da, unsigned long long db) { wg_call(lanes::WG_MMA, 0, a, da, db, d); }
void lanes_wg_mma_n64(float* d, unsigned long long da, unsigned long long db) { wg_call(lanes::WG_MMA, 0, nullptr, da, db, d, 64); }
void lanes_wg_commit() { wg_call(lanes::WG_COMMIT, 0, nullptr, 0, 0, nullptr); }
void lanes_wg_wait(int n) { wg_call(lanes::WG_WAIT, n, nullptr, 0, 0, nullptr); }
void lanes_cp16(void* dst, const void* src, bool in) {
  if (lanes::eager) lanes::apply({{dst, src, in}});
  else lanes::th[lanes::cur].open.push_back({dst, src, in});
}
void lanes_cp_commit() {
  lanes::Thread& t = lanes::th[lanes::cur];
  t.groups.push_back(t.open);
  t.open.clear();
}
void lanes_cp_wait(int n) {
  lanes::Thread& t = lanes::th[lanes::cur];
  while ((int)t.groups.size() > n) {
    lanes::apply(t.groups.front());
    t.groups.erase(t.groups.begin());
  }
}
#endif

// csa_main: the V4.1 attention tiles on random keys, queries and softmax results:
// rows with empty slots, a row in no view (−1), a row without keys, the rescales of some
// blocks absent (−1), and the keys of every third row bf16 values (no lo halves: their
// mma left out).
int csa_main(int argc, char** argv) {
  if (argc != 9 && !(argc == 10 && strcmp(argv[9], "eager") == 0)) {
    fprintf(stderr, "usage: harness csa_tc_logits|csa_tc_logits_n|csa_tc_out|csa_tc_out_n|csa_tc_out_na ROWS HEADS DIM LMAX BLOCK SEED OUTFILE [eager]\n");
    return 2;
  }
#ifdef DI_LANES
  lanes::eager = argc == 10;
#endif
  const char* kernel = argv[1];
  i64 R = atoll(argv[2]), H = atoll(argv[3]), D = atoll(argv[4]), L = atoll(argv[5]), B = atoll(argv[6]);
  rng ^= (u64)atoll(argv[7]) * 0x2545f4914f6cdd1dull;
  const bool ahead = strcmp(kernel, "csa_tc_out_na") == 0;
  const bool out = strncmp(kernel, "csa_tc_out", 10) == 0, narrow = kernel[strlen(kernel) - 1] == 'n' || ahead;
  i64 nblk = (L + B - 1) / B;
  float* q = (float*)zalloc(4 * R * H * D);
  unsigned short* kh = (unsigned short*)zalloc(4 * R * L * D);
  unsigned short* kl = kh + R * L * D;
  unsigned* rlo = (unsigned*)zalloc(4 * R);
  unsigned char* klo = (unsigned char*)zalloc(R * L);
  unsigned char* valid = (unsigned char*)zalloc(R * L);
  i64* rlen = (i64*)zalloc(8 * R);
  float* pb = (float*)zalloc(4 * R * L * H);
  float* bsc = (float*)zalloc(4 * R * nblk * H);
  float* den = (float*)zalloc(4 * R * H);
  float* o = (float*)zalloc(4 * R * H * D);
  for (i64 i = 0; i < R * H * D; i++) q[i] = unif(-2, 2);
  for (i64 r = 0; r < R; r++) {
    rlen[r] = r == 1 ? -1 : r == 2 ? 0 : r == 0 ? L : 1 + (i64)(rnd() % (u32)L);
    for (i64 j = 0; j < L; j++) {
      bool in = j < rlen[r] && rnd() % 5 != 0;
      valid[r * L + j] = in;
      // rows 0, 3, …: bf16 keys (no lo halves); the others mix keys with and without
      const bool bf = r % 3 == 0 || rnd() % 3 == 0;
      for (i64 d = 0; d < D; d++) {
        // a slot past the row's keys holds NaN halves (never read), an empty one zeros
        float v = in ? unif(-3, 3) : j < rlen[r] ? 0.0f : f32_bits(0x7fc0dead);
        if (bf) v = q_bf16(v);
        const float hv = q_bf16(v), lv = v == v ? q_bf16(v - hv) : v;
        kh[(r * L + j) * D + d] = (unsigned short)(bits_f32(hv) >> 16);
        kl[(r * L + j) * D + d] = (unsigned short)(bits_f32(lv) >> 16);
        if (j < rlen[r] && lv != 0) rlo[r] = 1, klo[r * L + j] = 1;
      }
      // a key of the row without lo halves: csa_attn_kdec writes none, so they must not
      // be read; garbage here, a NaN on one side and 1 on the other, shows any read
      if (j < rlen[r] && !klo[r * L + j])
        for (i64 d = 0; d < D; d++)
#ifdef DI_LANES
          kl[(r * L + j) * D + d] = 0x3f80;
#else
          kl[(r * L + j) * D + d] = 0x7fc1;
#endif
      for (i64 h = 0; h < H; h++) pb[(r * H + h) * L + j] = out ? (in ? q_bf16(unif(0, 1)) : -F32_INF) : f32_bits(0x7fc0dead);
    }
    for (i64 i = 0; i < nblk * H; i++) bsc[r * nblk * H + i] = rnd() % 4 == 0 ? -1.0f : unif(0.25f, 1);
    for (i64 h = 0; h < H; h++) den[r * H + h] = unif(1, 8);
  }
  for (i64 i = 0; i < R * H * D; i++) o[i] = f32_bits(0x7fc0dead);
  CsaTcArgs a = {q, kh, kl, valid, rlen, rlo, pb, bsc, den, o, R, H, D, L, nblk, B, 1 / sqrt((double)D), klo};
  const i64 per = narrow ? 8 : 64, groups = (H + FATC_HG - 1) / FATC_HG;
  const long long items = R * (((out ? D : L) + per - 1) / per) * groups * 32;
#ifdef DI_LANES
  lanes::launch(ahead ? csa_tc_out_na : out ? (narrow ? csa_tc_out_n : csa_tc_out) : (narrow ? csa_tc_logits_n : csa_tc_logits), a, items);
#else
  (ahead ? emu_csa_tc_out_na : out ? (narrow ? emu_csa_tc_out_n : emu_csa_tc_out) : (narrow ? emu_csa_tc_logits_n : emu_csa_tc_logits))(&a, items);
#endif
  FILE* f = fopen(argv[8], "wb");
  const float* res = out ? o : pb;
  const i64 n = out ? R * H * D : R * L * H;
  if (!f || fwrite(res, 4, n, f) != (size_t)n || fclose(f) != 0) {
    fprintf(stderr, "cannot write %s\n", argv[8]);
    return 1;
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc > 1 && strncmp(argv[1], "csa_tc_", 7) == 0) return csa_main(argc, argv);
  if (argc != 12 && !(argc == 13 && (strcmp(argv[12], "eager") == 0 || strcmp(argv[12], "wgeager") == 0))) {
    fprintf(stderr, "usage: harness KERNEL FMT N K M G S KS OUTBF16 SEED OUTFILE [eager|wgeager]\n");
    return 2;
  }
#ifdef DI_LANES
  lanes::eager = argc == 13 && strcmp(argv[12], "eager") == 0;
  lanes::eager_wg = argc == 13 && strcmp(argv[12], "wgeager") == 0;
#endif
  // KERNEL's suffix: "b" rounds x to bf16 (lo halves zero); "x" does and sets xexact
  // (the tiles leave the lo mma out)
  char kernel[32];
  snprintf(kernel, sizeof kernel, "%s", argv[1]);
  size_t kl = strlen(kernel);
  bool xbf = kl > 0 && (kernel[kl - 1] == 'b' || kernel[kl - 1] == 'x'), xexact = kl > 0 && kernel[kl - 1] == 'x';
  if (xbf) kernel[kl - 1] = 0;
  int fmt = atoi(argv[2]);
  i64 N = atoll(argv[3]), K = atoll(argv[4]), M = atoll(argv[5]), G = atoll(argv[6]), S = atoll(argv[7]),
      ks = atoll(argv[8]), obf = atoll(argv[9]);
  rng ^= (u64)atoll(argv[10]) * 0x2545f4914f6cdd1dull;
  bool m1o = strcmp(kernel, "m1fp8o") == 0;  // fast_gemm_m1_fp8_only (N % 16 == 0, K % 64 == 0)
  bool blk = strcmp(kernel, "blk") == 0, m1p = m1o || strcmp(kernel, "m1fp8") == 0, m1 = m1p || strcmp(kernel, "m1") == 0;
  bool wide = strcmp(kernel, "wide") == 0, stg = strcmp(kernel, "stg") == 0;
  // the wgmma kernels: fast_gemm_wg_f32 (float32 weights) and fast_gemm_wg_fp8 (FP8),
  // bf16 x with xexact, one group, K a multiple of 64
  // (wgf32p3w: fast_gemm_wg_f32p with a ring of three x buffers, two warpgroups a block)
  bool wgp3w = strcmp(kernel, "wgf32p3w") == 0;
  bool wgp = wgp3w || strcmp(kernel, "wgf32p") == 0, wgf = wgp || strcmp(kernel, "wgf32") == 0, wg8n = strcmp(kernel, "wgfp8n") == 0,
       wg8a2 = strcmp(kernel, "wgfp8a2") == 0, wg8a = strcmp(kernel, "wgfp8a") == 0, wg8p = strcmp(kernel, "wgfp8p") == 0,
       wg8 = wg8n || wg8a || wg8a2 || wg8p || strcmp(kernel, "wgfp8") == 0,
       wgbw4 = strcmp(kernel, "wgbf16w4") == 0, wgbwp = strcmp(kernel, "wgbf16wp") == 0,
       wgbw = wgbw4 || wgbwp || strcmp(kernel, "wgbf16w") == 0, wgk = wgf || wg8 || wgbw;
  // fast_gemm_wg_bf16: bf16 weights, x in two halves (or bf16 with xexact), one group, K
  // a multiple of 64
  bool wgb16a = strcmp(kernel, "wgbf16a") == 0, wgb16 = wgb16a || strcmp(kernel, "wgbf16") == 0, wgb8a = strcmp(kernel, "wgfp8ra") == 0,
       wgb8 = wgb8a || strcmp(kernel, "wgfp8r") == 0, wgb = wgb16 || wgb8;
  blk = blk || stg;
  if (wgb && ((wgb16 && fmt != 1) || (wgb8 && fmt != 2 && fmt != 3 && fmt != 5) || G != 1 || K % 64 != 0)) {
    fprintf(stderr, "kernel %s: bf16 (wgbf16) or FP8 (wgfp8r) weights, one group, K a multiple of 64\n", argv[1]);
    return 2;
  }
  if ((!blk && !m1 && !wide && !wgk && !wgb && strcmp(kernel, "m4") != 0) || (wide && (!xexact || fmt == 0)) || (stg && fmt != 0) ||
      (wgk && (!xexact || (G != 1 && (!wgbw || (N / G) % 64 != 0)) || K % 64 != 0 || (wgf && fmt != 0) || (wg8 && fmt != 2 && fmt != 3 && fmt != 5) || (wgbw && fmt != 1)))) {
    fprintf(stderr, "kernel %s (wide: bf16 x with xexact, weights not float32; stg: float32 weights; wgf32, wgfp8, wgbf16w: bf16 x with xexact, K a multiple of 64, one group (wgbf16w: or groups of a multiple of 64 weight rows), float32, FP8 or bf16 weights)\n", argv[1]);
    return 2;
  }
  // the weight, random values in its format
  Weight w = {nullptr, nullptr, fmt, K};
  i64 sc = 0;
  switch (fmt) {
    case 0: {
      float* p = (float*)zalloc(4 * N * K);
      for (i64 i = 0; i < N * K; i++) p[i] = unif(-1, 1);
      w.p = p;
      break;
    }
    case 1: {
      unsigned short* p = (unsigned short*)zalloc(2 * N * K);
      for (i64 i = 0; i < N * K; i++) p[i] = (unsigned short)(bits_f32(q_bf16(unif(-1, 1))) >> 16);
      w.p = p;
      break;
    }
    case 2: case 3: case 5: {
      unsigned char* p = (unsigned char*)zalloc(N * K);
      for (i64 i = 0; i < N * K; i++) {
        unsigned char c = (unsigned char)rnd();
        p[i] = (c & 0x7f) == 0x7f ? c ^ 1 : c;  // no NaN codes
      }
      w.p = p;
      sc = fmt == 2 ? (N + 31) / 32 * ((K + 31) / 32) : fmt == 3 ? N * ((K + 31) / 32) : (N + 127) / 128 * ((K + 127) / 128);
      break;
    }
    case 4: {
      unsigned char* p = (unsigned char*)zalloc(N * K / 2);
      for (i64 i = 0; i < N * K / 2; i++) p[i] = (unsigned char)rnd();
      w.p = p;
      sc = N * ((K + 31) / 32);
      break;
    }
    default:
      fprintf(stderr, "format %d\n", fmt);
      return 2;
  }
  if (sc) {
    unsigned char* s = (unsigned char*)zalloc(sc);
    for (i64 i = 0; i < sc; i++) s[i] = (unsigned char)(120 + rnd() % 14);
    w.s = s;
  }
  // x's M·G rows and their bf16 halves (fast_split's), zero past K
  i64 Kp = (K + 63) / 64 * 64, P = Kp / 2, R = M * G;
  u32* xh = (u32*)zalloc(4 * 2 * R * P);
  u32* xl = xh + R * P;
  for (i64 r = 0; r < R; r++)
    for (i64 k = 0; k < Kp; k += 2) {
      float v0 = k < K ? unif(-2, 2) : 0.0f, v1 = k + 1 < K ? unif(-2, 2) : 0.0f;
      if (xbf) v0 = q_bf16(v0), v1 = q_bf16(v1);
      u32 h = fast_rn(v0, v1);
      xh[r * P + k / 2] = h;
      xl[r * P + k / 2] = fast_rn(v0 - fast_lo(h), v1 - fast_hi(h));
    }
  // fast_gemm_wg_fp8r reads x's pairs in wgr_pos's order (fast_split_wg's)
  if (wgb8) {
    u32* t = (u32*)zalloc(4 * 2 * R * P);
    for (i64 r = 0; r < 2 * R; r++)
      for (i64 q = 0; q < P; q++) t[r * P + wgr_pos(q)] = xh[r * P + q];
    xh = t, xl = t + R * P;
  }
    // outputs start as a NaN no kernel writes
  float* y = (float*)zalloc(4 * M * N);
  float* part = (float*)zalloc(4 * S * M * N);
  for (i64 i = 0; i < M * N; i++) y[i] = f32_bits(0x7fc0dead);
  for (i64 i = 0; i < S * M * N; i++) part[i] = f32_bits(0x7fc0dead);
  i64 rows = wide || wgk ? FAST_WIDE_ROWS : wgb ? WGB_MROWS : blk ? FAST_BLK_ROWS : m1 ? 8 : 32, mtiles = (M + rows - 1) / rows;
  FastGemmArgs a = {xh, xl, w, y, S > 1 ? part : nullptr, M, N, K, Kp, S, ks, mtiles, N, obf, G, 1, xexact ? 1 : 0};
  long long items = wgb ? (N + WG_BN - 1) / WG_BN * S * mtiles * 128
                    : wgp3w || wg8a2 ? (N + 127) / 128 * S * mtiles * 256
                    : wg8p || wgbwp ? (N + 127) / 128 * S * mtiles * 384
                    : wg8n ? (N + 63) / 64 * S * ((M + 63) / 64) * 128
                  : wgk ? (N + 63) / 64 * S * mtiles * 128
                    : wide ? (N + FAST_WIDE_N - 1) / FAST_WIDE_N * S * mtiles * 128
                    : blk ? (N + FAST_BLK_N - 1) / FAST_BLK_N * S * mtiles * 128
                          : (N + 15) / 16 * S * mtiles * 32;
  bool f32 = fmt == 0;
#ifdef DI_LANES
  lanes::launch(wgb8a ? fast_gemm_wg_fp8ra
                : wgb8 ? fast_gemm_wg_fp8r
                : wgb16a ? fast_gemm_wg_bf16a
                : wgb ? fast_gemm_wg_bf16
                : wgp3w ? fast_gemm_wg_f32p3w
                : wgp ? fast_gemm_wg_f32p
                : wgf ? fast_gemm_wg_f32
                : wgbw4 ? fast_gemm_wg_bf16w4
                : wgbwp ? fast_gemm_wg_bf16wp
                : wgbw ? fast_gemm_wg_bf16w
                : wg8n ? fast_gemm_wg_fp8n
                : wg8a2 ? fast_gemm_wg_fp8a2
                : wg8p ? fast_gemm_wg_fp8p
                : wg8a ? fast_gemm_wg_fp8a
                : wg8 ? fast_gemm_wg_fp8
                : wide ? fast_gemm_wide
                : stg  ? fast_gemm_stage_f32
                : blk  ? (f32 ? fast_gemm_blk_f32 : fast_gemm_blk)
                : m1 ? (f32 ? fast_gemm_m1_f32 : m1o ? fast_gemm_m1_fp8_only : m1p ? fast_gemm_m1_fp8 : fast_gemm_m1)
                     : (f32 ? fast_gemm_m4_f32 : fast_gemm_m4),
                a, items, wg8p || wgbwp ? 384 : wgp3w || wg8a2 ? 256 : 128);
#else
  (wgb8a ? emu_fast_gemm_wg_fp8ra
   : wgb8 ? emu_fast_gemm_wg_fp8r
   : wgb16a ? emu_fast_gemm_wg_bf16a
   : wgb ? emu_fast_gemm_wg_bf16
   : wgp3w ? emu_fast_gemm_wg_f32p3w
   : wgp ? emu_fast_gemm_wg_f32p
   : wgf ? emu_fast_gemm_wg_f32
   : wgbw4 ? emu_fast_gemm_wg_bf16w4
   : wgbwp ? emu_fast_gemm_wg_bf16wp
   : wgbw ? emu_fast_gemm_wg_bf16w
   : wg8n ? emu_fast_gemm_wg_fp8n
   : wg8a2 ? emu_fast_gemm_wg_fp8a2
   : wg8p ? emu_fast_gemm_wg_fp8p
   : wg8a ? emu_fast_gemm_wg_fp8a
   : wg8 ? emu_fast_gemm_wg_fp8
   : wide ? emu_fast_gemm_wide
   : stg  ? emu_fast_gemm_stage_f32
   : blk  ? (f32 ? emu_fast_gemm_blk_f32 : emu_fast_gemm_blk)
   : m1 ? (f32 ? emu_fast_gemm_m1_f32 : m1o ? emu_fast_gemm_m1_fp8_only : m1p ? emu_fast_gemm_m1_fp8 : emu_fast_gemm_m1)
        : (f32 ? emu_fast_gemm_m4_f32 : emu_fast_gemm_m4))(&a, items);
#endif
  FILE* f = fopen(argv[11], "wb");
  if (!f || fwrite(y, 4, M * N, f) != (size_t)(M * N) || (S > 1 && fwrite(part, 4, S * M * N, f) != (size_t)(S * M * N)) ||
      fclose(f) != 0) {
    fprintf(stderr, "cannot write %s\n", argv[11]);
    return 1;
  }
  return 0;
}
