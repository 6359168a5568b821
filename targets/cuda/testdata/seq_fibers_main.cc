// seq_fibers_main.cc: TestSeqLookupOnHost's cases (follows fp4_fibers.h and the headers):
// prelude.h's seq_find, seq_view_at and seq_view against the scan of every sequence the
// kernels ran before them (the cpu's views(s, keep): the first sequence whose view holds
// the row), for random step tables laid out as the runtime lays them (rows in order
// from 0): decode steps (every sequence one row), prefill chunks, mixed steps,
// sequences of no rows among them, the SEQ_ROWS flag, keep 0 and 1 to 5, and rows
// before, inside and past the step. Every answer (index, first row, row count, found)
// must be the scan's.
#include <random>
#include <vector>

// scan: the loop mhc_view, dense_view and dspark_push_at ran (q: the sequence, -1 none)
static i64 scan(const std::vector<SeqRec>& s, i64 keep, i64 t, i64* start, i64* n) {
  i64 row = 0;
  for (i64 q = 0; q < (i64)s.size(); q++) {
    i64 vn = s[q].n;
    if (keep > 0 && vn > keep) vn = keep;
    const i64 vr = keep > 0 ? row : s[q].row;
    if (t >= vr && t < vr + vn) {
      *start = vr, *n = vn;
      return q;
    }
    row += vn;
  }
  return -1;
}

int main() {
  std::mt19937 rng(20261205u);
  long cases = 0, bad = 0, found = 0, guessed = 0;
  for (int trial = 0; trial < 4000; trial++) {
    const int kind = trial % 4;  // 0 decode, 1 prefill chunks, 2 mixed, 3 mixed with empty sequences
    const i64 nseq = trial % 97 == 0 ? 0 : (i64)(rng() % (trial % 5 == 0 ? 300 : 20)) + 1;
    std::vector<SeqRec> s(nseq);
    i64 row = 0;
    for (auto& q : s) {
      i64 n = 1;
      if (kind == 1) n = (i64)(rng() % 40) + 1;
      if (kind >= 2) n = rng() % 3 == 0 ? (i64)(rng() % 9) + 1 : 1;
      if (kind == 3 && rng() % 4 == 0) n = 0;
      q.row = row, q.n = n, q.pos = (i64)(rng() % 5000), q.state = 0, q.flags = rng() % 2 ? SEQ_ROWS : 0;
      row += n;
    }
    const i64 T = row;
    for (i64 keep = 0; keep <= 5; keep++) {
      i64 packed = 0;
      for (auto& q : s) packed += keep > 0 && q.n > keep ? keep : q.n;
      const i64 rows = keep > 0 ? packed : T;
      for (i64 t = -2; t < rows + 3; t++) {
        cases++;
        i64 ws = -7, wn = -7, gs = -7, gn = -7;
        const i64 want = scan(s, keep, t, &ws, &wn);
        const i64 got = seq_view_at(s.data(), nseq, keep, t, &gs, &gn);
        bool ok = got == want && (want < 0 || (gs == ws && gn == wn));
        if (keep == 0) ok = ok && seq_find(s.data(), nseq, t) == want;
        // seq_view: the view as the sums see it
        i64 vf = -7, vn = -7;
        const bool v = seq_view(s.data(), nseq, keep, t, &vf, &vn);
        if (want >= 0 && (s[want].flags & SEQ_ROWS)) ws = t, wn = 1;
        ok = ok && v == (want >= 0) && (!v || (vf == ws && vn == wn));
        found += want >= 0;
        guessed += keep == 0 && want >= 0 && want == (t < nseq - 1 ? t : nseq - 1);
        if (!ok && bad++ < 10)
          printf("nseq %ld keep %ld row %ld: scan %ld (%ld, %ld), seq_view_at %ld (%ld, %ld), seq_view %d (%ld, %ld)\n",
                 (long)nseq, (long)keep, (long)t, (long)want, (long)ws, (long)wn, (long)got, (long)gs, (long)gn, (int)v,
                 (long)vf, (long)vn);
      }
    }
  }
  printf("%ld lookups (%ld rows in a view, %ld found at the first look), %ld differ from the scan, harness errors %ld\n", cases,
         found, guessed, bad, (long)g_errors);
  const bool pass = bad == 0 && g_errors == 0 && found > cases / 2 && guessed > 0 && guessed < found;
  printf(pass ? "PASS\n" : "FAIL\n");
  return pass ? 0 : 1;
}
