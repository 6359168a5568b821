// prelude.h: what every kernel source in this directory may use. The same sources
// compile with NVRTC for the device and with a host C++ compiler (-DDI_EMULATE) for
// the emulated device the tests run on a machine without a GPU.
//
// Conventions (docs/cuda.md):
//   - a kernel takes one argument, a struct of 8-byte fields (pointers, long long,
//     double) that the Go binder fills in the same order;
//   - its body is, by default, a grid-stride loop over independent work items:
//         for (long long i = GIDX; i < n; i += GSTRIDE) { ... }
//     no shared memory, no barriers, no atomics, so that one host thread running the
//     loop from 0 to n computes exactly what the device computes; a kernel that uses a
//     warp per item (shuffles) or a launch block per tile (shared memory, barriers)
//     gives the emulated device (DI_EMULATE) its own loop computing the same values
//     (docs/cuda.md, "Kernel conventions");
//   - floating point as the cpu target computes it: the sources compile without
//     contraction (--fmad=false, -ffp-contract=off), so a*b+c rounds twice, as Go does.
#ifdef DI_EMULATE
#include <cmath>
#include <cstring>
#include <cstdint>
#define DEV static inline
#define KERNEL(name, Args)                                                   \
  static void name##_body(const Args a, long long GIDX, long long GSTRIDE);  \
  extern "C" void emu_##name(const void* p, long long threads) {            \
    (void)threads;                                                           \
    name##_body(*(const Args*)p, 0, 1);                                      \
  }                                                                          \
  static void name##_body(const Args a, long long GIDX, long long GSTRIDE)
// KERNEL_SKIP: a kernel another part of a split unit defines (source.go's parts): its
// body kept as a template never instantiated, so this program neither defines the
// kernel nor instantiates what the body calls
#define KERNEL_SKIP(name, Args) template <int DI_SKIP_> static void di_skip_##name(const Args a, long long GIDX, long long GSTRIDE)
typedef unsigned int u32;
typedef unsigned long long u64;
typedef long long i64;
DEV float f32_bits(u32 u) { float f; memcpy(&f, &u, 4); return f; }
DEV u32 bits_f32(float f) { u32 u; memcpy(&u, &f, 4); return u; }
DEV double f64_bits(u64 u) { double f; memcpy(&f, &u, 8); return f; }
DEV u64 bits_f64(double f) { u64 u; memcpy(&u, &f, 8); return u; }
// the device's 16-byte vector types (aligned loads of four values)
struct alignas(16) uint4 { u32 x, y, z, w; };
struct alignas(16) float4 { float x, y, z, w; };
#else
#define DEV static __device__ __forceinline__
// KERNEL_BOUNDS: the launch bounds of the kernels that follow (a file that needs them
// redefines it before its kernels and back to empty after); empty by default.
#define KERNEL_BOUNDS
// (No griddepcontrol instructions here: programmatic dependent launches, every kernel
// starting with griddepcontrol.wait / launch_dependents and launched by cuLaunchKernelEx,
// were measured three times — runs 22, 29 and 46 — and lost each time, 1-3% at batch 64
// and 256, and the instructions slowed the elementwise kernels even with the launch
// attribute off: docs/perf/README.md "Run 22: programmatic dependent launches".)
#define KERNEL(name, Args)                                                    \
  static __device__ void name##_body(const Args& a, long long GIDX, long long GSTRIDE); \
  extern "C" __global__ void KERNEL_BOUNDS name(const Args a) {               \
    name##_body(a, (long long)blockIdx.x * blockDim.x + threadIdx.x,          \
                (long long)gridDim.x * blockDim.x);                           \
  }                                                                           \
  static __device__ void name##_body(const Args& a, long long GIDX, long long GSTRIDE)
#define KERNEL_SKIP(name, Args) \
  template <int DI_SKIP_> static __device__ void di_skip_##name(const Args& a, long long GIDX, long long GSTRIDE)
typedef unsigned int u32;
typedef unsigned long long u64;
typedef long long i64;
DEV float f32_bits(u32 u) { return __uint_as_float(u); }
DEV u32 bits_f32(float f) { return __float_as_uint(f); }
DEV double f64_bits(u64 u) { return __longlong_as_double((long long)u); }
DEV u64 bits_f64(double f) { return (u64)__double_as_longlong(f); }
#endif

// UNROLL_BY(n): unroll the next loop n times on the device (more loads in flight for a
// chain that waits on memory); nothing on the emulated device. The values are the same.
#ifdef DI_EMULATE
#define UNROLL_BY(n)
#else
#define DI_PRAGMA(x) _Pragma(#x)
#define UNROLL_BY(n) DI_PRAGMA(unroll n)
#endif

// DYN_SHARED(name): the launch's dynamic shared memory (the bytes the binder gives the
// launch, Bind.LaunchShared) as a 16-byte aligned byte array. The host harnesses of the
// device branch (DI_LANES: a block's threads take turns on one host thread) give it a
// static array of the most a block may take on sm_90 (227 KB).
#if defined(DI_LANES)
#define DYN_SHARED(name) static unsigned char name[232448] __attribute__((aligned(16)))
#elif !defined(DI_EMULATE)
#define DYN_SHARED(name) extern __shared__ __align__(16) unsigned char name[]
#endif

// ROW_SPREAD: a kernel whose work is one serial pass per row (a selection, say) may give
// each row the first of ROW_SPREAD work items, one launch block (runtime.go rowSpread),
// so that rows run on different multiprocessors, each with its own L1 cache.
#define ROW_SPREAD 128

#define F32_INF f32_bits(0x7f800000u)
#define F64_INF f64_bits(0x7ff0000000000000ull)

DEV float fmax32(float a, float b) { return a > b ? a : b; }
DEV float fmin32(float a, float b) { return a < b ? a : b; }
DEV double fmax64(double a, double b) { return a > b ? a : b; }
DEV i64 imin(i64 a, i64 b) { return a < b ? a : b; }
DEV i64 imax(i64 a, i64 b) { return a > b ? a : b; }
// qdiv, qmod: i / n and i % n for 0 ≤ i and 0 < n, in 32-bit arithmetic where both fit
// (a work item's index decoded: a 64-bit division is a long call on the device; the
// same quotient and remainder either way)
DEV i64 qdiv(i64 i, i64 n) { return (((u64)i | (u64)n) >> 32) != 0 ? i / n : (i64)((u32)i / (u32)n); }
DEV i64 qmod(i64 i, i64 n) { return (((u64)i | (u64)n) >> 32) != 0 ? i % n : (i64)((u32)i % (u32)n); }
DEV bool isnan32(float x) { return x != x; }

// Weight storage formats (targets.Weight): bf16 bytes, FP8 e4m3 codes with UE8M0
// scales per 32×32 block (fp8_b32) or per 32 values of a row (fp8_g32), FP4 e2m1 codes
// (two a byte, the even element in the low nibble) with UE8M0 scales per 32 of a row.
DEV float bf16_f32(unsigned short h) { return f32_bits(((u32)h) << 16); }
DEV float ue8m0_f32(unsigned char e) {
  if (e == 0xff) return f32_bits(0x7fc00000u);
  if (e == 0) return f32_bits(0x00400000u);  // 2^-127
  return f32_bits(((u32)e) << 23);
}
DEV float e4m3_f32(unsigned char c) {
  u32 s = (c >> 7) & 1, e = (c >> 3) & 15, m = c & 7;
  float v;
  if (e == 15 && m == 7) return f32_bits(0x7fc00000u);
  if (e == 0) v = (float)m * f32_bits(0x3b000000u);  // m · 2^-9
  else v = f32_bits(((e + 120) << 23) | (m << 20));
  return s ? -v : v;
}
DEV float e2m1_f32(unsigned char c) {
  // 0, 0.5, 1, 1.5, 2, 3, 4, 6: exponent field e = (c >> 1) & 3, mantissa bit m = c & 1;
  // computed, not looked up (a table indexed at run time lives in local memory)
  u32 e = (c >> 1) & 3, m = c & 1;
  u32 bits = e ? ((e + 126) << 23) | (m << 22) : (m ? 0x3f000000u : 0u);
  float v = f32_bits(bits);
  return (c & 8) ? -v : v;
}

// Weight is one weight operand as the binder passes it: its codes (or float32 values)
// and, for the block formats, its scales. fmt: 0 f32, 1 bf16, 2 fp8_b32, 3 fp8_g32,
// 4 fp4_g32, 5 fp8_b128 (FP8 e4m3 codes, a UE8M0 scale per 128×128 block).
struct Weight {
  const void* p;
  const unsigned char* s;
  i64 fmt;
  i64 cols;  // row length (values)
};

// wval is value [r, c] of a weight matrix, widened to float32 exactly as the cpu target
// widens it at load (code × scale, one rounding).
DEV float wval(const Weight& w, i64 r, i64 c) {
  i64 i = r * w.cols + c;
  switch (w.fmt) {
    case 0: return ((const float*)w.p)[i];
    case 1: return bf16_f32(((const unsigned short*)w.p)[i]);
    case 2: {
      i64 sc = (w.cols + 31) / 32;
      return e4m3_f32(((const unsigned char*)w.p)[i]) * ue8m0_f32(w.s[(r / 32) * sc + c / 32]);
    }
    case 3: {
      i64 sc = (w.cols + 31) / 32;
      return e4m3_f32(((const unsigned char*)w.p)[i]) * ue8m0_f32(w.s[r * sc + c / 32]);
    }
    case 5: {
      i64 sc = (w.cols + 127) / 128;
      return e4m3_f32(((const unsigned char*)w.p)[i]) * ue8m0_f32(w.s[(r / 128) * sc + c / 128]);
    }
    default: {
      i64 sc = (w.cols + 31) / 32;
      unsigned char b = ((const unsigned char*)w.p)[i / 2];
      unsigned char code = (i & 1) ? (b >> 4) : (b & 15);
      return e2m1_f32(code) * ue8m0_f32(w.s[r * sc + c / 32]);
    }
  }
}

// SeqRec is one sequence of the step, as the runtime uploads it.
struct SeqRec {
  i64 row;    // first token row of the step
  i64 n;      // tokens this step
  i64 pos;    // position of the first
  i64 state;  // device address of the sequence's state block
  i64 flags;  // SEQ_* (cpu: Seq.Decode, RowOrders, Invariant)
};

// SeqRec flags: every row a decode row; every row summed as in a one-row step;
// batch-invariant mode (a prompt from position 0 is computed as in chunks).
#define SEQ_DECODE 1
#define SEQ_ROWS 2
#define SEQ_INVARIANT 4

// seq_find is the index of the sequence whose rows of the step hold token row t, or -1.
// The runtime lays the sequences' rows out in order from row 0, so the sequence of a
// decode step's row t is sequence t (the first look), and otherwise a binary search
// over their first rows finds the one a scan would (the last sequence starting at or
// before t; one of no rows holds none). A scan of every sequence for each work item
// took a share of a step at batch 256: V4.1's indexer and key lookup in run 17
// (csa_view_at), the mixes' split in run 35 (mhc_view).
DEV i64 seq_find(const SeqRec* seqs, i64 nseq, i64 t) {
  if (nseq <= 0) return -1;
  i64 lo = t < nseq - 1 ? t : nseq - 1;
  if (t >= seqs[lo].row && t < seqs[lo].row + seqs[lo].n) return lo;
  i64 hi = nseq - 1;
  lo = 0;
  while (lo < hi) {
    const i64 mid = (lo + hi + 1) / 2;
    if (seqs[mid].row <= t) lo = mid;
    else hi = mid - 1;
  }
  return t >= seqs[lo].row && t < seqs[lo].row + seqs[lo].n ? lo : -1;
}

// seq_view_at is the index of the sequence whose view holds row t, or -1 (cpu:
// views(s, keep)): the views are the step's rows, or with keep > 0 each sequence's
// last keep rows packed in order (a scan: the packed first rows are not in the table).
// start is the view's first row, n its rows.
DEV i64 seq_view_at(const SeqRec* seqs, i64 nseq, i64 keep, i64 t, i64* start, i64* n) {
  if (keep <= 0) {
    const i64 q = seq_find(seqs, nseq, t);
    if (q >= 0) *start = seqs[q].row, *n = seqs[q].n;
    return q;
  }
  i64 row = 0;
  for (i64 q = 0; q < nseq; q++) {
    const i64 m = seqs[q].n < keep ? seqs[q].n : keep;
    if (t >= row && t < row + m) {
      *start = row;
      *n = m;
      return q;
    }
    row += m;
  }
  return -1;
}

// seq_view is seq_view_at's view of row t as the sums see it: first is its first row, n
// its rows (t alone, one row, where the sequence's rows are each summed as in a one-row
// step); false when no view holds t.
DEV bool seq_view(const SeqRec* seqs, i64 nseq, i64 keep, i64 t, i64* first, i64* n) {
  const i64 q = seq_view_at(seqs, nseq, keep, t, first, n);
  if (q < 0) return false;
  if (seqs[q].flags & SEQ_ROWS) {  // each row as in a one-row step
    *first = t;
    *n = 1;
  }
  return true;
}
