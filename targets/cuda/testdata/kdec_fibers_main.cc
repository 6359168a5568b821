// kdec_fibers_main.cc: TestKeyWideningIntegerPath's cases (follows fp4_fibers.h, the
// headers and csa41.cu): csa_kdec_halves, whose FP8 and FP4 pieces of a scale byte in
// csa_kdec_fast's range take the integer widening, against csa_kdec_halves_any (the
// float widening, the product and the bf16 roundings) for every code of both formats
// and every scale byte: the hi halves, the lo halves and the returned lo bits, bit for
// bit, and the count of pieces the integer path took (it must take some).
// Both with the scale's index by division and by a shift, and csa_attn_kdec's per-key
// form (csa_kdec_key_hi) against it for every code and scale byte.
// Then csa_attn_kdec's device branch (a warp a (row, key)) on host fibers against a
// serial widening of every key by csa_kdec_halves: every hi and lo half, klo and rlo,
// bit for bit, on FP8 keys (groups of 32 and of 12) and FP4 keys (scale bytes in and out of csa_kdec_fast's range, FP8
// NaN codes), FP4 keys with E4M3 scales (NaN scales among them), float32 keys, empty slots, FP4 groups not a multiple of 4, rows past
// their keys and in no view; dims of 512 (four pieces a lane), 640 (a second round of
// pieces), 72 and 70 (fewer than a warp's 128 values, not a multiple of 4).
#include <random>
#include <vector>

static long kdec_fmt(long fmt) {
  const long dim = 256, g = 32, nsc = dim / g;
  const long code_bytes = fmt == 1 ? dim : dim / 2;
  std::vector<unsigned char> row(code_bytes + nsc);
  // every code: FP8's 256 in order, FP4's 16 sixteen times (the two nibbles of a byte
  // unlike, so that a swapped nibble shows)
  for (long i = 0; i < code_bytes; i++) row[i] = fmt == 1 ? (unsigned char)i : (unsigned char)((i & 15) | ((i * 7 + 3) & 15) << 4);
  long bad = 0, fast = 0;
  for (int sc = 0; sc < 256; sc++) {
    for (long j = 0; j < nsc; j++) row[code_bytes + j] = (unsigned char)sc;
    csa_Key k = {row.data(), fmt, g};
    for (long d0 = 0; d0 < dim; d0 += 4) {
      for (int lo = 0; lo < 2; lo++) {
        unsigned short a[4] = {1, 1, 1, 1}, b[4] = {2, 2, 2, 2};
        unsigned short c[4] = {3, 3, 3, 3};
        const u32 ra = csa_kdec_halves(k, dim, d0, a, false, lo != 0);
        const u32 rb = csa_kdec_halves_any(k, dim, d0, b, false, lo != 0);
        const u32 rc = csa_kdec_halves(k, dim, d0, c, false, lo != 0, 5);  // (the scale's index by a shift: g = 32)
        const bool differ = ra != rb || a[0] != b[0] || a[1] != b[1] || a[2] != b[2] || a[3] != b[3] || rc != ra || c[0] != a[0] ||
                            c[1] != a[1] || c[2] != a[2] || c[3] != a[3];
        if (differ && bad < 5)
          printf("fmt %ld scale %d values %ld..: %04x %04x %04x %04x (%x) against %04x %04x %04x %04x (%x), %s halves\n", fmt, sc, d0, a[0], a[1],
                 a[2], a[3], ra, b[0], b[1], b[2], b[3], rb, lo ? "lo" : "hi");
        bad += differ;
      }
      fast += fmt == 3 ? (sc & 0x7f) != 0x7f : csa_kdec_fast(fmt, (u32)sc);
    }
    // csa_attn_kdec's per-key form (csa_kdec_key_hi, every lane's pieces): the hi halves
    // and the lo bits of csa_kdec_halves, piece by piece
    std::vector<unsigned short> want(dim), got(dim, 0x5a5a);
    u32 wany[32] = {0};
    for (long d0 = 0; d0 < dim; d0 += 4) wany[(d0 / 4) % 32] |= csa_kdec_halves(k, dim, d0, want.data() + d0, false, false);
    for (int lane = 0; lane < 32; lane++) {
      const u32 any = fmt == 3   ? csa_kdec_key_hi<3>(k, (u32)dim, 4 * lane, got.data(), false, 5)
                      : fmt == 2 ? csa_kdec_key_hi<2>(k, (u32)dim, 4 * lane, got.data(), false, 5)
                                 : csa_kdec_key_hi<1>(k, (u32)dim, 4 * lane, got.data(), false, 5);
      if (any != wany[lane]) {
        if (bad < 5) printf("fmt %ld scale %d lane %d: per-key lo bits %x, want %x\n", fmt, sc, lane, any, wany[lane]);
        bad++;
      }
    }
    for (long d = 0; d < dim; d++)
      if (got[d] != want[d]) {
        if (bad < 5) printf("fmt %ld scale %d value %ld: per-key hi half %04x, want %04x\n", fmt, sc, d, got[d], want[d]);
        bad++;
      }
  }
  printf("key widening, format %ld: %ld pieces of every code and scale byte, %ld by the integer path, %ld differ\n", fmt, 256 * dim / 4, fast, bad);
  return bad || (fmt != 3 && fast == 0);
}

static long kdec_launch(long dim, unsigned seed) {
  std::mt19937 rng(seed);
  const long R = 5, L = 9;
  const long long rlen[R] = {L, -1, 0, 4, 7};
  std::vector<std::vector<unsigned char>> rows;  // the keys' bytes (kept alive)
  std::vector<csa_Key> kref(R * L);
  long kinds[6] = {0, 0, 0, 0, 0, 0};
  for (long t = 0; t < R; t++)
    for (long j = 0; j < (rlen[t] > 0 ? rlen[t] : 0); j++) {
      const long kind = (t * L + j + (long)seed) % 6;  // (every kind in every case)
      kinds[kind]++;
      csa_Key k = {nullptr, 1, 32};
      if (kind == 0 || kind == 1 || kind == 4 || kind == 5) {  // FP8 (0), FP4 (1), FP4 in groups of 2 (4), FP4 with E4M3 scales (5)
        // (FP8 keys of odd j in groups of 12: a multiple of 4 that is not a power of two,
        // whose scale index the device branch finds by division, the others by a shift)
        const long fmt = kind == 0 ? 1 : kind == 5 ? 3 : 2, g = kind == 4 ? 2 : kind == 5 ? 16 : kind == 0 && (j & 1) ? 12 : 32, ng = (dim + g - 1) / g;
        const long cb = fmt == 1 ? dim : (dim + 1) / 2;
        std::vector<unsigned char> row(cb + ng);
        for (long i = 0; i < cb; i++) {
          unsigned char c = (unsigned char)rng();
          if (fmt == 1 && (c & 0x7f) == 0x7f && rng() % 4 != 0) c = 0;  // (a NaN code now and then)
          row[i] = c;
        }
        for (long i = 0; i < ng; i++) {
          const unsigned r = rng() % 16;  // mostly in csa_kdec_fast's range, now and then at its ends
          row[cb + i] = (unsigned char)(r == 0 ? rng() % 12 : r == 1 ? 244 + rng() % 12 : 110 + rng() % 30);
          if (fmt == 3) row[cb + i] = (unsigned char)(r == 0 ? 0x7f : rng());  // any E4M3 scale, NaN now and then
        }
        rows.push_back(row);
        k = {rows.back().data(), fmt, g};
      } else if (kind == 2) {  // float32 values (lo halves)
        std::vector<unsigned char> row(4 * dim);
        for (long d = 0; d < dim; d++) {
          float v = (float)((int)(rng() % 20001) - 10000) / 777.0f;
          if (rng() % 2) v = q_bf16(v);  // some bf16 values (no lo half)
          memcpy(&row[4 * d], &v, 4);
        }
        rows.push_back(row);
        k = {rows.back().data(), 0, 1};
      }  // kind 3: an empty slot
      kref[t * L + j] = k;
    }
  long bad = 0;
  std::vector<unsigned short> want(2 * R * L * dim + 8, 0xA5A5);
  std::vector<unsigned char> wklo(R * L, 0xEE);
  std::vector<unsigned> wrlo(R, 0);
  for (long t = 0; t < R; t++)
    for (long j = 0; j < (rlen[t] > 0 ? rlen[t] : 0); j++) {
      const long tj = t * L + j;
      u32 any = 0;
      for (long d0 = 0; d0 < dim; d0 += 4) any |= csa_kdec_halves(kref[tj], dim, d0, want.data() + tj * dim + d0, false, false);
      if (any)
        for (long d0 = 0; d0 < dim; d0 += 4) csa_kdec_halves(kref[tj], dim, d0, want.data() + R * L * dim + tj * dim + d0, false, true);
      wklo[tj] = any != 0;
      if (any) wrlo[t] = 1;
    }
  {
    const int tc = 1;  // (the tensor-core layouts)
    // (the halves' buffer at 16 bytes, as the binder's scratch: the 8-byte stores)
    std::vector<unsigned long long> buf((2 * R * L * dim + 8) / 4 + 2);
    unsigned short* kh = (unsigned short*)buf.data();
    for (long i = 0; i < 2 * R * L * dim + 8; i++) kh[i] = 0xA5A5;
    std::vector<unsigned char> klo(R * L, 0xEE);
    std::vector<unsigned> rlo(R, 0);
    std::vector<long long> len(rlen, rlen + R);
    csa_AttnArgs a{};
    a.rows = R, a.heads = 1, a.dim = dim, a.lmax = L, a.nblk = 1, a.kf = (float*)kh, a.rlen = len.data();
    a.kref = kref.data(), a.rlo = rlo.data(), a.tc = tc, a.klo = klo.data();
    const long before = g_errors;
    fibers_launch(csa_attn_kdec, a, (R * L * 32 + 127) / 128);
    long diff = g_errors - before;
    for (long i = 0; i < 2 * R * L * dim; i++) {
      if (kh[i] != want[i] && diff < 5)
        printf("dim %ld (tc %d): %s half of row %ld key %ld value %ld: %04x, want %04x\n", dim, tc, i < R * L * dim ? "hi" : "lo",
               i % (R * L * dim) / dim / L, i % (R * L * dim) / dim % L, i % dim, kh[i], want[i]);
      diff += kh[i] != want[i];
    }
    for (long i = 0; i < R * L; i++) diff += klo[i] != wklo[i];
    for (long t = 0; t < R; t++) diff += (rlo[t] != 0) != (wrlo[t] != 0);
    printf("key widening launch, dim %ld (tc %d): %ld keys (FP8 %ld, FP4 %ld, FP4 in pairs %ld, FP4 of E4M3 scales %ld, float32 %ld, empty %ld), %ld differ\n", dim, tc,
           kinds[0] + kinds[1] + kinds[2] + kinds[3] + kinds[4] + kinds[5], kinds[0], kinds[1], kinds[4], kinds[5], kinds[2], kinds[3], diff);
    bad += diff;
  }
  long lo = 0;
  for (long t = 0; t < R; t++) lo += wrlo[t] != 0;
  if (lo == 0 || kinds[0] == 0 || kinds[1] == 0) {
    printf("dim %ld: the keys lack a kind (rows with lo halves %ld, FP8 %ld, FP4 %ld)\n", dim, lo, kinds[0], kinds[1]);
    bad++;
  }
  return bad;
}

int main() {
  long bad = kdec_fmt(1) + kdec_fmt(2) + kdec_fmt(3);
  for (long dim : {512L, 640L, 72L, 70L}) bad += kdec_launch(dim, (unsigned)(dim * 31 + 7));
  printf(bad ? "FAIL\n" : "PASS\n");
  return bad ? 1 : 0;
}
