package cpu

import (
	"math"
	"slices"
)

// torchTopK returns the indices torch.topk(vals, k, largest=True) keeps on the CPU, in
// the order it leaves them. Which of several equal values it keeps is not specified by
// torch, but it is deterministic: ATen's topk_impl_loop fills (value, index) pairs and
// runs libstdc++'s std::partial_sort when k·64 ≤ n, else std::nth_element, comparing
// values only (NaN first). The V4.1 indexer's scores are bf16, so ties at the top-k
// boundary are common (all-zero ReLU scores especially), and the reference's choice
// among them decides which compressed entries a query attends to. This reproduces
// libstdc++'s introselect and heap select step for step.
func torchTopK(vals []float32, k int) []int {
	n := len(vals)
	if k > n {
		k = n
	}
	q := make([]topkElem, n)
	for i, v := range vals {
		q[i] = topkElem{v, i}
	}
	if k == 0 {
		return nil
	}
	if k*64 <= n {
		heapSelect(q, k)
		sortHeap(q[:k])
	} else {
		introselect(q, 0, k-1, n, 2*floorLog2(n))
	}
	out := make([]int, k)
	for i := range out {
		out[i] = q[i].i
	}
	return out
}

type topkElem struct {
	v float32
	i int
}

// before is the comparator: a sorts before b (a is "larger"), NaN first.
func before(a, b topkElem) bool {
	an, bn := math.IsNaN(float64(a.v)), math.IsNaN(float64(b.v))
	return (an && !bn) || a.v > b.v
}

func floorLog2(n int) int {
	l := 0
	for n > 1 {
		n >>= 1
		l++
	}
	return l
}

// introselect is std::__introselect over q[first:last] with nth = q[nth].
func introselect(q []topkElem, first, nth, last, depth int) {
	for last-first > 3 {
		if depth == 0 {
			heapSelect(q[first:last], nth+1-first)
			q[first], q[nth] = q[nth], q[first]
			return
		}
		depth--
		cut := partitionPivot(q, first, last)
		if cut <= nth {
			first = cut
		} else {
			last = cut
		}
	}
	insertionSort(q[first:last])
}

func partitionPivot(q []topkElem, first, last int) int {
	mid := first + (last-first)/2
	moveMedianToFirst(q, first, first+1, mid, last-1)
	return unguardedPartition(q, first+1, last, first)
}

func moveMedianToFirst(q []topkElem, result, a, b, c int) {
	switch {
	case before(q[a], q[b]):
		switch {
		case before(q[b], q[c]):
			q[result], q[b] = q[b], q[result]
		case before(q[a], q[c]):
			q[result], q[c] = q[c], q[result]
		default:
			q[result], q[a] = q[a], q[result]
		}
	case before(q[a], q[c]):
		q[result], q[a] = q[a], q[result]
	case before(q[b], q[c]):
		q[result], q[c] = q[c], q[result]
	default:
		q[result], q[b] = q[b], q[result]
	}
}

func unguardedPartition(q []topkElem, first, last, pivot int) int {
	for {
		for before(q[first], q[pivot]) {
			first++
		}
		last--
		for before(q[pivot], q[last]) {
			last--
		}
		if first >= last {
			return first
		}
		q[first], q[last] = q[last], q[first]
		first++
	}
}

func insertionSort(q []topkElem) {
	if len(q) == 0 {
		return
	}
	for i := 1; i < len(q); i++ {
		if before(q[i], q[0]) {
			v := q[i]
			copy(q[1:i+1], q[0:i])
			q[0] = v
			continue
		}
		v := q[i]
		j := i
		for before(v, q[j-1]) {
			q[j] = q[j-1]
			j--
		}
		q[j] = v
	}
}

// heapSelect is std::__heap_select(first, first+mid, last): a heap of the first mid
// elements, then each later element that sorts before the heap's top replaces it.
func heapSelect(q []topkElem, mid int) {
	makeHeap(q[:mid])
	for i := mid; i < len(q); i++ {
		if before(q[i], q[0]) {
			v := q[i]
			q[i] = q[0]
			adjustHeap(q[:mid], 0, mid, v)
		}
	}
}

func makeHeap(q []topkElem) {
	n := len(q)
	if n < 2 {
		return
	}
	for parent := (n - 2) / 2; ; parent-- {
		adjustHeap(q, parent, n, q[parent])
		if parent == 0 {
			return
		}
	}
}

func adjustHeap(q []topkElem, hole, n int, v topkElem) {
	top := hole
	child := hole
	for child < (n-1)/2 {
		child = 2 * (child + 1)
		if before(q[child], q[child-1]) {
			child--
		}
		q[hole] = q[child]
		hole = child
	}
	if n&1 == 0 && child == (n-2)/2 {
		child = 2 * (child + 1)
		q[hole] = q[child-1]
		hole = child - 1
	}
	parent := (hole - 1) / 2
	for hole > top && before(q[parent], v) {
		q[hole] = q[parent]
		hole = parent
		parent = (hole - 1) / 2
	}
	q[hole] = v
}

func sortHeap(q []topkElem) {
	for n := len(q); n > 1; n-- {
		v := q[n-1]
		q[n-1] = q[0]
		adjustHeap(q[:n-1], 0, n-1, v)
	}
}

// TorchTopK is torchTopK for the other targets' tests, which check their own selection
// against this one.
func TorchTopK(vals []float32, k int) []int { return torchTopK(vals, k) }

// LowTieTopK exports lowTieTopK for the device targets' tests.
func LowTieTopK(vals []float32, k int) []int { return lowTieTopK(vals, k) }

// orderKey maps a value to a key whose unsigned order is torch.topk's (the larger value
// first): every NaN highest and one key, +0 and -0 one key (the cuda target's
// csa_order_key).
func orderKey(v float32) uint32 {
	if v != v {
		return math.MaxUint32
	}
	u := math.Float32bits(v)
	if u&0x7fffffff == 0 {
		u = 0
	}
	if u&0x80000000 != 0 {
		return ^u
	}
	return u | 0x80000000
}

// lowTieTopK returns, in position order, the positions of the k largest values with the
// lower position first among the k-th largest value's equals: the indexer's selection
// under targets.EnvIndexTies=low, the set torch.topk keeps on a CUDA device.
func lowTieTopK(vals []float32, k int) []int {
	k = min(k, len(vals))
	if k <= 0 {
		return nil
	}
	keys := make([]uint32, len(vals))
	for i, v := range vals {
		keys[i] = orderKey(v)
	}
	sorted := slices.Clone(keys)
	slices.Sort(sorted)
	cut := sorted[len(sorted)-k] // the k-th largest key
	above := len(sorted) - k
	for above < len(sorted) && sorted[above] == cut {
		above++
	}
	take := k - (len(sorted) - above) // the cut's equals to keep
	out := make([]int, 0, k)
	for i, x := range keys {
		if x > cut || x == cut && take > 0 {
			if x == cut {
				take--
			}
			out = append(out, i)
		}
	}
	return out
}
