// fp4_fibers.h: what the device branch of the kernel sources needs to run on the host
// besides lanes/lanes.h's stand-ins for NVRTC's types,
// for TestFP4DeviceCodeOnHostFibers (fp4_fibers_test.go), built with DI_LANES (the
// sources then call the lanes_ functions below instead of their inline PTX): a launch
// block's threads (128, or up to FIBERS_MAX with fibers_launch_n) as fibers that take turns on one host thread, __syncthreads and the
// warp's collectives (__any_sync, the mma) as barriers between them, and cp.async as
// copies that clobber their destination when issued and land only when a wait_group
// requires them.
#include <vector>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <cmath>
#include <ucontext.h>
#include <setjmp.h>
static long g_errors;
// (the CUDA types and qualifiers: lanes/lanes.h, which comes first)
inline int min(int a, int b) { return a < b ? a : b; }
inline int atomicAdd(int* p, int v) { int o = *p; *p += v; return o; }
inline unsigned atomicAdd(unsigned* p, unsigned v) { unsigned o = *p; *p += v; return o; }
inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) { unsigned long long o = *p; *p += v; return o; }
inline unsigned atomicOr(unsigned* p, unsigned v) { unsigned o = *p; *p |= v; return o; }
inline int __popc(unsigned v) { return __builtin_popcount(v); }
inline int __ffs(int v) { return __builtin_ffs(v); }
// (the bf16 wgmma forms are lanes_test.go's harness's to play; these harnesses play the
// e4m3 one, lanes_wg_mma_e4m3, below)
void lanes_wg_mma(float*, const unsigned*, unsigned long long, unsigned long long) { abort(); }
void lanes_wg_mma_n64(float*, unsigned long long, unsigned long long) { abort(); }
void lanes_nbar(int, int, bool) { abort(); }  // (named barriers: the lanes harness plays them)

// the block's 128 threads are fibers run on one host thread; a fiber runs until it waits
// at a barrier or returns, and the scheduler then resumes the lowest (or, in every other
// block, the highest) numbered fiber that can go on, so that one warp runs as far ahead
// of the others as the barriers allow. A fiber starts on its own stack by setcontext and
// is switched by _setjmp/_longjmp after that (swapcontext saves and restores the signal
// mask, a system call, at every switch); the scheduler rescans from the first fiber only
// when a barrier has opened since its last pick (before that, no fiber ahead of the last
// one picked can have become runnable), so a block of n fibers costs O(n) a barrier, not
// O(n²)
struct Bar;
#define FIBERS_MAX 1024
static ucontext_t g_sched, g_fib[FIBERS_MAX];
static jmp_buf g_sched_jb, g_fib_jb[FIBERS_MAX];
static bool g_started[FIBERS_MAX];
static long g_opened;  // barrier generations completed (the scheduler's rescan signal)
static int g_cur;
static Bar* g_wait_bar[FIBERS_MAX];  // the barrier a fiber waits at (null: runnable)
static long g_wait_gen[FIBERS_MAX];
inline void fiber_yield() {
  if (!_setjmp(g_fib_jb[g_cur])) _longjmp(g_sched_jb, 1);
}
// a barrier of n fibers; every arrival of a generation must come from the same call
// site (a thread that skips a __syncthreads others reach is an error, or a deadlock)
struct Bar {
  int n, count = 0;
  long gen = 0;
  void* site = nullptr;
  explicit Bar(int n) : n(n) {}
  void arrive_and_wait(void* at) {
    if (count == 0) site = at;
    else if (site != at) { fprintf(stderr, "threads wait at different barriers\n"); g_errors++; }
    if (++count == n) { count = 0, gen++, g_opened++; return; }
    g_wait_bar[g_cur] = this, g_wait_gen[g_cur] = gen;
    fiber_yield();
  }
};
inline bool fiber_runnable(int tid) { return !g_wait_bar[tid] || *(volatile long*)&g_wait_bar[tid]->gen != g_wait_gen[tid]; }
static Bar* g_block_bar;
struct WarpX {
  Bar* bar;
  int flag[32];
  unsigned a[32][4], b[32][2];
  long long word[32];
  const void* row[32];
};
static WarpX g_warp[FIBERS_MAX / 32];
__attribute__((noinline)) void __syncthreads() { g_block_bar->arrive_and_wait(__builtin_return_address(0)); }
inline unsigned __ballot_sync(unsigned m, int p) {
  if (m != 0xffffffffu) abort();
  int tid = threadIdx.x, w = tid >> 5, l = tid & 31;
  WarpX& x = g_warp[w];
  x.flag[l] = p != 0;
  x.bar->arrive_and_wait((void*)5);
  unsigned r = 0;
  for (int i = 0; i < 32; i++) r |= (unsigned)x.flag[i] << i;
  x.bar->arrive_and_wait((void*)6);
  return r;
}
inline int __any_sync(unsigned m, int p) { return __ballot_sync(m, p) != 0; }
// warp_exchange: every lane offers v; lane l gets lane src(l)'s (its own where src is
// out of the warp); site tells this collective's barriers from the others'
// A half warp's mask (width 16: mhc.cu's 16-lane groups) is played as the whole warp:
// both halves must reach the same call (a half with nothing to do would wait forever,
// which the scheduler reports), each reading within its own half.
template <class T> T warp_exchange(unsigned m, T v, int src, int width, long site) {
  static_assert(sizeof(T) <= 8, "a value of up to 8 bytes");
  int tid = threadIdx.x, w = tid >> 5, l = tid & 31;
  if (width == 16 && m == (0xffffu << (l & 16)) && src >= 0) src = (l & 16) + (src & 15);
  else if (m != 0xffffffffu || width != 32) abort();
  WarpX& x = g_warp[w];
  memcpy(&x.word[l], &v, sizeof(T));
  x.bar->arrive_and_wait((void*)site);
  T r = v;
  if (src >= 0 && src < 32) memcpy(&r, &x.word[src], sizeof(T));
  x.bar->arrive_and_wait((void*)(site + 1));
  return r;
}
// __shfl_up_sync: lane l gets lane l - d's v (its own below d)
template <class T> T __shfl_up_sync(unsigned m, T v, unsigned d, int width = 32) {
  int l = threadIdx.x & 31;
  return warp_exchange(m, v, l >= (int)d ? l - (int)d : -1, width, 7);
}
// __shfl_sync: lane l gets lane src's v
template <class T> T __shfl_sync(unsigned m, T v, int src, int width = 32) { return warp_exchange(m, v, src & 31, width, 9); }
// __shfl_down_sync: lane l gets lane l + d's v (its own past the warp)
template <class T> T __shfl_down_sync(unsigned m, T v, unsigned d, int width = 32) {
  int l = threadIdx.x & 31;
  return warp_exchange(m, v, l + (int)d < 32 ? l + (int)d : -1, width, 13);
}
// __shfl_xor_sync: lane l gets lane l ^ x's v
template <class T> T __shfl_xor_sync(unsigned m, T v, int x, int width = 32) { return warp_exchange(m, v, (threadIdx.x & 31) ^ x, width, 15); }
inline void __syncwarp() { g_warp[threadIdx.x >> 5].bar->arrive_and_wait((void*)11); }
// (a half warp's mask as warp_exchange plays it: the whole warp)
inline void __syncwarp(unsigned m) {
  if (m != 0xffffffffu && m != (0xffffu << (threadIdx.x & 16))) abort();
  __syncwarp();
}
// lanes_ldsm4t: ldmatrix .x4 .trans (tensorcore_attn.cu's ctf_ldsm4t): lanes 8m..8m+7
// give the 16-byte rows of matrix m; lane (g, t) gets column g of rows 2t, 2t + 1
void lanes_ldsm4t(unsigned* r, const unsigned* p) {
  int tid = threadIdx.x, w = tid >> 5, l = tid & 31, g = l >> 2, t = l & 3;
  WarpX& x = g_warp[w];
  if ((uintptr_t)p % 16) { fprintf(stderr, "misaligned ldmatrix row %p\n", (const void*)p); g_errors++; }
  x.row[l] = p;
  x.bar->arrive_and_wait((void*)17);
  for (int m = 0; m < 4; m++) {
    const unsigned short* r0 = (const unsigned short*)x.row[8 * m + 2 * t];
    const unsigned short* r1 = (const unsigned short*)x.row[8 * m + 2 * t + 1];
    r[m] = r0[g] | (unsigned)r1[g] << 16;
  }
  x.bar->arrive_and_wait((void*)18);
}
static float bf_lo(unsigned p) { return __uint_as_float(p << 16); }
static float bf_hi(unsigned p) { return __uint_as_float(p & 0xffff0000u); }
// g_mma_trunc set: lanes_mma sums as a tensor core that aligns and truncates might — c
// and the 16 products each cut toward zero to 24 bits below the largest one's leading bit,
// summed exactly, the sum cut toward zero to a float (within 17·2^-23 of the terms'
// largest magnitude; exact where every term is a multiple of 2^-23 of that); for a kernel
// that must not depend on the tensor cores' summation (csa_index_score_tc).
static int g_mma_trunc;
static float mma_trunc_sum(const double* t, int n) {
  int emax = -100000;
  for (int i = 0; i < n; i++)
    if (t[i] != 0) emax = std::max(emax, std::ilogb(t[i]));
  if (emax == -100000) return (float)(t[0] + t[1]);  // (zeros: their sum's sign)
  double s = 0;
  for (int i = 0; i < n; i++) s += std::trunc(std::ldexp(t[i], 23 - emax));
  const double x = std::ldexp(s, emax - 23);
  float f = (float)x;
  if (std::fabs((double)f) > std::fabs(x)) f = std::nextafter(f, 0.0f);
  return f;
}
// lanes_mma: mma.sync m16n8k16 bf16 (fragments as the PTX ISA lays them out), each
// output's 16 products summed in the emulated device's order (fp4_tiles), then added to c
void lanes_mma(float* c, unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1) {
  int tid = threadIdx.x, w = tid >> 5, l = tid & 31, g = l >> 2, t = l & 3;
  WarpX& x = g_warp[w];
  x.a[l][0] = a0, x.a[l][1] = a1, x.a[l][2] = a2, x.a[l][3] = a3, x.b[l][0] = b0, x.b[l][1] = b1;
  x.bar->arrive_and_wait((void*)3);
  auto A = [&](int r, int k) {  // row r (0..15), k (0..15)
    int lane = (r & 7) * 4 + ((k & 7) >> 1);
    int reg = (r >= 8 ? 1 : 0) + (k >= 8 ? 2 : 0);
    unsigned v = x.a[lane][reg];
    return (k & 1) ? bf_hi(v) : bf_lo(v);
  };
  auto B = [&](int k, int n) {
    int lane = n * 4 + ((k & 7) >> 1);
    unsigned v = x.b[lane][k >= 8 ? 1 : 0];
    return (k & 1) ? bf_hi(v) : bf_lo(v);
  };
  float d[4];
  for (int e = 0; e < 4; e++) {
    int r = g + (e >= 2 ? 8 : 0), n = 2 * t + (e & 1);
    if (g_mma_trunc) {
      double terms[17] = {(double)c[e]};
      for (int k = 0; k < 16; k++) terms[k + 1] = (double)A(r, k) * (double)B(k, n);
      d[e] = mma_trunc_sum(terms, 17);
      continue;
    }
    float s = 0;
    // lane tt's pairs, its first register's before its second's
    for (int tt = 0; tt < 4; tt++)
      for (int v = 0; v < 2; v++)
        for (int h = 0; h < 2; h++) {
          int k = 2 * tt + 8 * v + h;
          s += A(r, k) * B(k, n);
        }
    d[e] = c[e] + s;
  }
  x.bar->arrive_and_wait((void*)4);
  for (int e = 0; e < 4; e++) c[e] = d[e];
}

// lanes_check_align: a plain load's alignment (the device faults on a misaligned one)
void lanes_check_align(const void* p, int size) {
  if ((uintptr_t)p % size) { fprintf(stderr, "misaligned %d-byte load at %p\n", size, p); g_errors++; }
}
// lanes_mma_e4m3: mma.sync m16n8k32 e4m3 with float32 output from zero (fragments as the
// PTX ISA lays out 8-bit operands: a0 row g, k 4t..4t+3, a1 row g + 8, a2 and a3 the same
// at k + 16; b0 column g, k 4t..4t+3, b1 at k + 16), each output's 32 products summed
// exactly and rounded once (the emulated device's definition, fp4_e4_ref); the bytes
// decoded here, not by the sources' e4m3_f32
static double e4m3_host(unsigned c) {
  const unsigned s = (c >> 7) & 1, e = (c >> 3) & 15, m = c & 7;
  if (e == 15 && m == 7) return NAN;
  const double v = e ? std::ldexp(1.0 + m / 8.0, (int)e - 7) : std::ldexp((double)m, -9);
  return s ? -v : v;
}
void lanes_mma_e4m3(float* d, unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1) {
  int tid = threadIdx.x, w = tid >> 5, l = tid & 31, g = l >> 2, t = l & 3;
  WarpX& x = g_warp[w];
  x.a[l][0] = a0, x.a[l][1] = a1, x.a[l][2] = a2, x.a[l][3] = a3, x.b[l][0] = b0, x.b[l][1] = b1;
  x.bar->arrive_and_wait((void*)21);
  auto A = [&](int r, int k) {  // row r (0..15), k (0..31)
    const unsigned v = x.a[(r & 7) * 4 + ((k & 15) >> 2)][(r >= 8 ? 1 : 0) + (k >= 16 ? 2 : 0)];
    return e4m3_host((v >> (8 * (k & 3))) & 0xff);
  };
  auto B = [&](int k, int n) {
    const unsigned v = x.b[n * 4 + ((k & 15) >> 2)][k >= 16 ? 1 : 0];
    return e4m3_host((v >> (8 * (k & 3))) & 0xff);
  };
  float o[4];
  for (int e = 0; e < 4; e++) {
    const int r = g + (e >= 2 ? 8 : 0), n = 2 * t + (e & 1);
    double s = 0;
    for (int k = 0; k < 32; k++) s += A(r, k) * B(k, n);
    o[e] = (float)s;
  }
  x.bar->arrive_and_wait((void*)22);
  for (int e = 0; e < 4; e++) d[e] = o[e];
}

// The warpgroup's wgmma m64n8k32 e4m3 with A from registers (tensorcore_fp4.cu's
// fp4_wg_e4, a block of 128 threads being one warpgroup): a thread records its A
// fragments (copied: the device reads them from registers, which the asm keeps) and the
// B descriptor when it issues, and its four outputs read NaN until a wait completes the
// product (a read before the wait shows); a commit closes its group; a wait first lets
// every thread of the block issue what it waits for (a block barrier), then each thread
// plays its completed products: its rows g and g + 8 of warp w (16w + g, + 8) from its
// quad's fragments (the 8-bit layout: a0 row g, k 4t..4t+3; a1 row g + 8; a2, a3 the
// same at k + 16), columns 2t and 2t + 1 of B read through the descriptor when the wait
// plays it (a stage overwritten before the wait shows), each output's 32 products summed
// exactly and rounded once (fp4_e4_ref's definition). B: K-major rows of 128 bytes, eight
// rows a 1,024-byte group, the 128-byte swizzle (lanes.h's lanes_smem).
unsigned lanes_smem_addr(const void* p) { return lanes_smem.addr(p); }  // (lanes.h)
struct WgE4 { unsigned a[4]; unsigned long long desc; float* d; };
static std::vector<WgE4> g_wg_open[FIBERS_MAX];
static std::vector<std::vector<WgE4>> g_wg_groups[FIBERS_MAX];
void lanes_wg_fence() {}
void lanes_wg_mma_e4m3(float* d, const unsigned* a, unsigned long long desc) {
  WgE4 r;
  memcpy(r.a, a, sizeof r.a);
  r.desc = desc, r.d = d;
  for (int e = 0; e < 4; e++) d[e] = NAN;
  g_wg_open[threadIdx.x].push_back(r);
}
void lanes_wg_commit() {
  const int tid = threadIdx.x;
  g_wg_groups[tid].push_back(g_wg_open[tid]);
  g_wg_open[tid].clear();
}
static unsigned wg_e4_byte(unsigned long long desc, int r, int k) {
  const unsigned char* q = lanes_smem.at(desc, r, (unsigned)k);
  if (!q) { fprintf(stderr, "descriptor %llx: %s\n", desc, lanes_smem.why); g_errors++; return 0; }
  return *q;
}
void lanes_wg_wait(int n) {
  const int tid = threadIdx.x, l = tid & 31, g = l >> 2, t = l & 3, q0 = tid & ~3;
  if (blockDim.x != 128) { fprintf(stderr, "wgmma in a block of %u threads\n", blockDim.x); g_errors++; }
  g_block_bar->arrive_and_wait((void*)31);  // every thread has issued and committed what this waits for
  const int done = (int)g_wg_groups[tid].size() - n;
  for (int gi = 0; gi < done; gi++) {
    for (size_t i = 0; i < g_wg_groups[tid][gi].size(); i++) {
      const WgE4& m = g_wg_groups[tid][gi][i];
      for (int u = 0; u < 4; u++) {
        const auto& o = g_wg_groups[q0 + u];
        if ((int)o.size() <= gi || o[gi].size() != g_wg_groups[tid][gi].size() || o[gi][i].desc != m.desc) {
          fprintf(stderr, "a quad's threads issued different wgmma\n"); g_errors++; return;
        }
      }
      auto A = [&](int row8, int k) {  // row g (row8 0) or g + 8 (1), k 0..31
        const unsigned v = g_wg_groups[q0 + ((k & 15) >> 2)][gi][i].a[row8 + (k >= 16 ? 2 : 0)];
        return e4m3_host((v >> (8 * (k & 3))) & 0xff);
      };
      for (int e = 0; e < 4; e++) {
        const int c = 2 * t + (e & 1);
        double s = 0;
        for (int k = 0; k < 32; k++) s += A(e >= 2, k) * e4m3_host(wg_e4_byte(m.desc, c, k));
        m.d[e] = (float)s;
      }
    }
  }
  g_block_bar->arrive_and_wait((void*)32);  // every thread has read its quad's fragments
  if (done > 0) g_wg_groups[tid].erase(g_wg_groups[tid].begin(), g_wg_groups[tid].begin() + done);
}

// cp.async: a copy's destination is clobbered when it is issued and written when a
// wait_group allows (as late as possible), so reading too early or reusing a stage
// too soon changes the values
struct Copy { void* dst; const void* src; int size, n; };
struct CpState { std::vector<Copy> open; std::vector<std::vector<Copy>> groups; };
static CpState g_cps[FIBERS_MAX];
#define g_cp g_cps[threadIdx.x]
static std::vector<std::pair<const char*, const char*>> g_valid;  // readable global ranges
static void cp_check(const void* src, int n, int size, uintptr_t dst) {
  if ((uintptr_t)src % size || dst % size) { fprintf(stderr, "misaligned cp.async %p -> %lx (%d)\n", src, (unsigned long)dst, size); g_errors++; }
  if (n == 0) return;
  const char* s = (const char*)src;
  for (auto& r : g_valid) if (s >= r.first && s + size <= r.second) return;
  fprintf(stderr, "cp.async reads outside the buffers: %p\n", src); g_errors++;
}
inline void harness_cp(void* dst, const void* src, int size, bool in) {
  cp_check(src, in ? size : 0, size, (uintptr_t)dst);
  memset(dst, 0xA5, size);
  g_cp.open.push_back(Copy{dst, src, size, in ? size : 0});
}
void lanes_cp16(void* dst, const void* src, bool in) { harness_cp(dst, src, 16, in); }
void lanes_cp4(void* dst, const void* src, bool in) { harness_cp(dst, src, 4, in); }
void lanes_cp_commit() { g_cp.groups.push_back(g_cp.open); g_cp.open.clear(); }
void lanes_cp_wait(int N) {
  while ((int)g_cp.groups.size() > N) {
    for (auto& c : g_cp.groups.front()) {
      memset(c.dst, 0, c.size);
      memcpy(c.dst, c.src, c.n);
    }
    g_cp.groups.erase(g_cp.groups.begin());
  }
}

// Bulk copies on mbarriers (numerics.h fast_bulk, fast_bar_*): a barrier counts its
// phase's arrivals and expected bytes; a bulk copy clobbers its destination when issued
// and lands when a wait finds the phase's arrivals all in, which completes the phase (its
// copies' bytes must be the bytes expected: fewer would hang the device); a wait for a
// phase not yet complete sleeps until an arrival, so a wait with the wrong parity, or
// for copies never issued, leaves the block stuck (reported), and a read of a place
// before its wait, or a copy into a place still being read, changes the values.
struct MBar {
  Bar wake{1};  // (its generation: arrivals, for the fibers' scheduler)
  int count = 0, pending = 0;
  long phase = 0, tx = 0;
  bool init = false;
  std::vector<Copy> copies;
};
static std::vector<std::pair<const void*, MBar*>> g_mbars;
static MBar* mbar_of(const void* b) {
  for (auto& m : g_mbars) if (m.first == b) return m.second;
  return nullptr;
}
void lanes_bar_init(unsigned long long* b, int n) {
  if ((uintptr_t)b % 8) { fprintf(stderr, "misaligned mbarrier %p\n", (void*)b); g_errors++; }
  MBar* m = mbar_of(b);
  if (!m) m = new MBar, g_mbars.push_back({b, m});
  if (m->init) { fprintf(stderr, "mbarrier %p initialized twice in a block\n", (void*)b); g_errors++; }
  m->count = m->pending = n, m->phase = 0, m->tx = 0, m->init = true, m->copies.clear();
}
static MBar* mbar_live(const void* b, const char* what) {
  MBar* m = mbar_of(b);
  if (!m || !m->init) { fprintf(stderr, "%s on an mbarrier not initialized (%p)\n", what, b); g_errors++; abort(); }
  return m;
}
void lanes_bar_arrive_tx(unsigned long long* b, unsigned bytes) {
  MBar* m = mbar_live(b, "arrive");
  if (m->pending <= 0) { fprintf(stderr, "an arrival past the phase's count\n"); g_errors++; return; }
  m->tx += bytes, m->pending--;
  m->wake.gen++, g_opened++;
}
void lanes_bulk(void* dst, const void* src, unsigned bytes, unsigned long long* b) {
  MBar* m = mbar_live(b, "a bulk copy");
  if ((uintptr_t)dst % 16 || (uintptr_t)src % 16 || bytes % 16 || bytes == 0) {
    fprintf(stderr, "bulk copy %p -> %p of %u bytes: want 16-byte aligned addresses and size\n", src, dst, bytes);
    g_errors++;
  }
  const char* s = (const char*)src;
  bool ok = false;
  for (auto& r : g_valid) if (s >= r.first && s + bytes <= r.second) ok = true;
  if (!ok) { fprintf(stderr, "bulk copy reads outside the buffers: %p (%u bytes)\n", src, bytes); g_errors++; }
  memset(dst, 0xA5, bytes);
  m->copies.push_back(Copy{dst, ok ? src : nullptr, (int)bytes, ok ? (int)bytes : 0});
}
void lanes_bar_wait(unsigned long long* b, unsigned parity) {
  MBar* m = mbar_live(b, "wait");
  for (;;) {
    if (m->pending == 0) {  // the phase's arrivals are in: its copies land, it completes
      long got = 0;
      for (auto& c : m->copies) {
        memset(c.dst, 0, c.size);
        if (c.n) memcpy(c.dst, c.src, c.n);
        got += c.size;
      }
      m->copies.clear();
      if (got != m->tx) { fprintf(stderr, "an mbarrier phase expected %ld bytes, its copies bring %ld\n", m->tx, got); g_errors++; }
      m->tx = 0, m->phase++, m->pending = m->count;
    }
    if ((m->phase & 1) != (long)parity) return;
    g_wait_bar[g_cur] = &m->wake, g_wait_gen[g_cur] = m->wake.gen;
    fiber_yield();
  }
}
// mbar_exit: a block's end: no barrier with arrivals or copies outstanding; forget them
static void mbar_exit() {
  for (auto& m : g_mbars) {
    if (m.second->init && (m.second->pending != m.second->count || !m.second->copies.empty())) {
      fprintf(stderr, "a block ended with bulk copies in flight\n");
      g_errors++;
    }
    delete m.second;
  }
  g_mbars.clear();
}

// fibers_launch runs a kernel's blocks one after another, each block's 128 threads as
// fibers; it reports threads left waiting at a barrier and copies left in flight.
template <class Args> struct FiberLaunch {
  static void (*fn)(const Args);
  static const Args* args;
};
template <class Args> void (*FiberLaunch<Args>::fn)(const Args);
template <class Args> const Args* FiberLaunch<Args>::args;
static bool g_done[FIBERS_MAX];
static int g_ndone;
template <class Args> static void fiber_main() {
  FiberLaunch<Args>::fn(*FiberLaunch<Args>::args);
  g_done[g_cur] = true;
  g_ndone++;
  _longjmp(g_sched_jb, 1);  // (never returns: its uc_link context is not the scheduler's now)
}
static std::vector<char> g_stacks(64 << 20);  // 512 KB a fiber of 128, 64 KB of 1,024

// fibers_launch_n: blocks of nt threads (a multiple of 32, at most FIBERS_MAX)
template <class Args> static void fibers_launch_n(void (*fn)(const Args), const Args& a, long blocks, int nt) {
  if (nt % 32 || nt > FIBERS_MAX) abort();
  const size_t stack = g_stacks.size() / nt;
  gridDim.x = (unsigned)blocks, blockDim.x = (unsigned)nt;
  FiberLaunch<Args>::fn = fn, FiberLaunch<Args>::args = &a;
  for (long blk = 0; blk < blocks; blk++) {
    Bar bb(nt);
    std::vector<Bar> wb(nt / 32, Bar(32));
    g_block_bar = &bb;
    for (int w = 0; w < nt / 32; w++) g_warp[w].bar = &wb[w];
    blockIdx.x = (unsigned)blk;
    g_ndone = 0;
    for (int tid = 0; tid < nt; tid++) {
      g_done[tid] = false, g_started[tid] = false;
      g_cps[tid] = CpState{};
      getcontext(&g_fib[tid]);
      g_fib[tid].uc_stack.ss_sp = &g_stacks[tid * stack];
      g_fib[tid].uc_stack.ss_size = stack;
      g_fib[tid].uc_link = &g_sched;
      makecontext(&g_fib[tid], fiber_main<Args>, 0);
    }
    for (int tid = 0; tid < nt; tid++) g_wait_bar[tid] = nullptr;
    int from = 0;
    long opened = g_opened;
    for (;;) {
      if (g_ndone == nt) break;
      if (g_opened != opened) from = 0, opened = g_opened;
      int next = -1, at = from;
      for (int i = from; i < nt; i++) {
        int tid = blk % 2 ? nt - 1 - i : i;
        if (!g_done[tid] && fiber_runnable(tid)) {
          next = tid, at = i;
          break;
        }
      }
      if (next < 0) { fprintf(stderr, "block %ld: %d threads wait at barriers forever\n", blk, nt - g_ndone); g_errors++; return; }
      from = at;
      g_wait_bar[next] = nullptr;
      g_cur = next, threadIdx.x = (unsigned)next;
      if (!_setjmp(g_sched_jb)) {
        if (g_started[next]) _longjmp(g_fib_jb[next], 1);
        g_started[next] = true;
        setcontext(&g_fib[next]);
      }
    }
    mbar_exit();
    for (int tid = 0; tid < nt; tid++) {
      CpState& c = g_cps[tid];
      if (!c.open.empty()) { fprintf(stderr, "uncommitted copies at exit\n"); g_errors++; }
      for (auto& gr : c.groups) if (!gr.empty()) { fprintf(stderr, "copies in flight at exit\n"); g_errors++; }
    }
  }
}
template <class Args> static void fibers_launch(void (*fn)(const Args), const Args& a, long blocks) { fibers_launch_n(fn, a, blocks, 128); }
