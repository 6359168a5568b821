package cpu

import "testing"

// The row orders measured for m = 37: rows 0-9 A, 10-14 B, 15-18 C, 19-28 A, 29-32 B,
// 33-36 C (see chunkOrder).
func TestChunkOrderRows(t *testing.T) {
	want := "AAAAAAAAAABBBBBCCCCAAAAAAAAAABBBBCCCC"
	for r := 0; r < 37; r++ {
		o := chunkOrder(37, r)
		got := map[[4]int]byte{{0, 1, 2, 3}: 'A', {0, 2, 1, 3}: 'B', {0, 3, 1, 2}: 'C'}[o]
		if got != want[r] {
			t.Fatalf("row %d: %c, want %c", r, got, want[r])
		}
	}
	want100 := "AAAAAAAAAAAAABBBBBBCCCCCCAAAAAAAAAAAAABBBBBBCCCCCCAAAAAAAAAAAAABBBBBBCCCCCCAAAAAAAAAAAAABBBBBBCCCCCC"
	for r := 0; r < 100; r++ {
		o := chunkOrder(100, r)
		got := map[[4]int]byte{{0, 1, 2, 3}: 'A', {0, 2, 1, 3}: 'B', {0, 3, 1, 2}: 'C'}[o]
		if got != want100[r] {
			t.Fatalf("m=100 row %d: %c, want %c", r, got, want100[r])
		}
	}
}
