// kdec_fibers_main.cc: TestKeyWideningIntegerPath's cases (follows fp4_fibers.h, the
// headers and csa41.cu): csa_kdec_halves, whose FP8 and FP4 pieces of a scale byte in
// csa_kdec_fast's range take the integer widening, against csa_kdec_halves_any (the
// float widening, the product and the bf16 roundings) for every code of both formats
// and every scale byte: the hi halves, the lo halves and the returned lo bits, bit for
// bit, and the count of pieces the integer path took (it must take some).
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
        const u32 ra = csa_kdec_halves(k, dim, d0, a, false, lo != 0);
        const u32 rb = csa_kdec_halves_any(k, dim, d0, b, false, lo != 0);
        const bool differ = ra != rb || a[0] != b[0] || a[1] != b[1] || a[2] != b[2] || a[3] != b[3];
        if (differ && bad < 5)
          printf("fmt %ld scale %d values %ld..: %04x %04x %04x %04x (%x) against %04x %04x %04x %04x (%x), %s halves\n", fmt, sc, d0, a[0], a[1],
                 a[2], a[3], ra, b[0], b[1], b[2], b[3], rb, lo ? "lo" : "hi");
        bad += differ;
      }
      fast += csa_kdec_fast(fmt, (u32)sc);
    }
  }
  printf("key widening, format %ld: %ld pieces of every code and scale byte, %ld by the integer path, %ld differ\n", fmt, 256 * dim / 4, fast, bad);
  return bad || fast == 0;
}

int main() {
  long bad = kdec_fmt(1) + kdec_fmt(2);
  printf(bad ? "FAIL\n" : "PASS\n");
  return bad ? 1 : 0;
}
