// lanes.h: what NVRTC provides to the device branch, for harness.cc's host build of it
// with DI_LANES (lanes_test.go): a launch block's threads are coroutines, so shared
// memory is a function's static array (the blocks run one after another), and the
// warps' collective operations are the harness's.
#include <ucontext.h>
#include <setjmp.h>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>
#define __device__
#define __global__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(t, b)
struct dim3_ { unsigned x, y, z; };
static dim3_ blockIdx, threadIdx, gridDim, blockDim;
struct alignas(16) uint4 { unsigned x, y, z, w; };
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(8) float2 { float x, y; };
struct alignas(16) double2 { double x, y; };
#define __align__(n) __attribute__((aligned(n)))
inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return uint4{a, b, c, d}; }
inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
inline double __longlong_as_double(long long u) { double f; memcpy(&f, &u, 8); return f; }
inline long long __double_as_longlong(double f) { long long u; memcpy(&u, &f, 8); return u; }
void __syncthreads();
// named barriers: bar.sync (wait) and bar.arrive with an id and a thread count
void lanes_nbar(int id, int n, bool wait);
void lanes_mma(float* c, unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1);
void lanes_mma_e4m3(float* d, unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1);
void lanes_check_align(const void* p, int size);
void lanes_cp16(void* dst, const void* src, bool in);
void lanes_ldsm4t(unsigned* r, const unsigned* p);
void lanes_cp_commit();
void lanes_cp_wait(int n);
// bulk copies on mbarriers (numerics.h fast_bulk and fast_bar_*; fp4_fibers.h plays them)
void lanes_bar_init(unsigned long long* bar, int n);
void lanes_bar_arrive_tx(unsigned long long* bar, unsigned bytes);
void lanes_bulk(void* dst, const void* src, unsigned bytes, unsigned long long* bar);
void lanes_bar_wait(unsigned long long* bar, unsigned parity);
// the warpgroup's tensor-core operations (wgmma): shared addresses for descriptors, and
// fence, the product (a: the A fragments in registers, or null with da its descriptor),
// commit and wait as collective operations of the launch block's 128 threads
unsigned lanes_smem_addr(const void* p);
void lanes_wg_fence();
void lanes_wg_mma(float* d, const unsigned* a, unsigned long long da, unsigned long long db);
// (m64n64k16, both operands in shared memory: 32 accumulators a thread)
void lanes_wg_mma_n64(float* d, unsigned long long da, unsigned long long db);
void lanes_wg_commit();
void lanes_wg_wait(int n);
// (m64n8k32 e4m3, A from registers, from zero: fp4_fibers.h plays it)
void lanes_wg_mma_e4m3(float* d, const unsigned* a, unsigned long long db);

// LanesSmem: the harnesses' shared addresses for wgmma descriptors: each shared array
// named by one gets a 64 KB window (from its 1,024-byte-aligned start) of the 18-bit
// address space; at is the host address of byte b of row r of the K-major tile a
// descriptor names (rows of 128 bytes, groups of 8 rows SBO apart, the 128-byte swizzle:
// address bits 4-6 xor bits 7-9), null (why says why) where it names none.
struct LanesSmem {
  std::vector<uintptr_t> wins;
  const char* why = nullptr;
  unsigned addr(const void* p) {
    uintptr_t h = (uintptr_t)p;
    for (size_t i = 0; i < wins.size(); i++)
      if (h >= wins[i] && h < wins[i] + 65536) return (unsigned)(i * 65536 + (h - wins[i]));
    if (wins.size() == 4) {
      fprintf(stderr, "more than four shared arrays named by descriptors\n");
      exit(3);
    }
    wins.push_back(h & ~(uintptr_t)1023);
    return addr(p);
  }
  const unsigned char* at(unsigned long long desc, int r, unsigned b) {
    if ((desc >> 62) != 1) return why = "only the 128-byte swizzle is played", nullptr;
    unsigned start = (unsigned)(desc & 0x3fff) << 4, sbo = (unsigned)((desc >> 32) & 0x3fff) << 4;
    unsigned a = start + (unsigned)(r >> 3) * sbo + (unsigned)(r & 7) * 128 + b;
    a ^= ((a >> 7) & 7) << 4;
    if ((a >> 16) >= wins.size()) return why = "an address in no shared array", nullptr;
    return (const unsigned char*)(wins[a >> 16] + (a & 0xffff));
  }
};
static LanesSmem lanes_smem;
