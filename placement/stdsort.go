package placement

import "math/bits"

// torchSortDesc orders idx by w[idx] descending exactly as PyTorch's CPU
// torch.sort(descending=True) does with stable=False, which is what EPLB's
// balanced_packing calls.
//
// PyTorch's CPU sort kernel (aten/src/ATen/native/cpu/SortingKernel.cpp) runs
// std::sort over (value, index) pairs with the comparator "a > b" when not asked for a
// stable sort, and ties then come out in whatever order std::sort leaves them. That
// order matters to EPLB: all replicas of one expert carry the same load, so it decides
// which replica rank lands on which GPU (log2phy), and equal loads of different experts
// (zero-load experts, small token counts) decide phy2log. For at most 16 items
// libstdc++'s std::sort is an insertion sort and keeps ties in index order; beyond
// that it is introsort and does not. So this is a step-by-step rendering of GCC
// libstdc++'s std::sort (bits/stl_algo.h: __introsort_loop with median-of-three
// pivots, __unguarded_partition, the heap-sort fallback, __final_insertion_sort),
// which reproduces the reference bit for bit against PyTorch builds that use it: every
// release when EPLB was published, and the Linux x86 builds up to the adoption of
// x86-simd-sort for unstable sorts (2025), whose tie order differs again.
func torchSortDesc(idx []int, w []float32) {
	n := len(idx)
	if n < 2 {
		return
	}
	s := stdSorter{idx: idx, w: w}
	s.introsortLoop(0, n, 2*(bits.Len(uint(n))-1))
	s.finalInsertionSort(0, n)
}

// stdSorter sorts positions of idx; less(a, b) is the comparator std::sort receives,
// here "w[a] > w[b]" (descending; NaN cannot occur, loads are validated finite).
type stdSorter struct {
	idx []int
	w   []float32
}

const stdThreshold = 16 // libstdc++'s _S_threshold

func (s *stdSorter) less(a, b int) bool { return s.w[a] > s.w[b] } // on item ids

func (s *stdSorter) introsortLoop(first, last, depth int) {
	for last-first > stdThreshold {
		if depth == 0 {
			s.heapSort(first, last)
			return
		}
		depth--
		cut := s.partitionPivot(first, last)
		s.introsortLoop(cut, last, depth)
		last = cut
	}
}

// partitionPivot moves the median of idx[first+1], idx[mid], idx[last-1] to first and
// partitions the rest around it.
func (s *stdSorter) partitionPivot(first, last int) int {
	mid := first + (last-first)/2
	s.moveMedianToFirst(first, first+1, mid, last-1)
	return s.unguardedPartition(first+1, last, first)
}

func (s *stdSorter) moveMedianToFirst(result, a, b, c int) {
	x := s.idx
	switch {
	case s.less(x[a], x[b]):
		switch {
		case s.less(x[b], x[c]):
			x[result], x[b] = x[b], x[result]
		case s.less(x[a], x[c]):
			x[result], x[c] = x[c], x[result]
		default:
			x[result], x[a] = x[a], x[result]
		}
	case s.less(x[a], x[c]):
		x[result], x[a] = x[a], x[result]
	case s.less(x[b], x[c]):
		x[result], x[c] = x[c], x[result]
	default:
		x[result], x[b] = x[b], x[result]
	}
}

func (s *stdSorter) unguardedPartition(first, last, pivot int) int {
	x := s.idx
	for {
		for s.less(x[first], x[pivot]) {
			first++
		}
		last--
		for s.less(x[pivot], x[last]) {
			last--
		}
		if first >= last {
			return first
		}
		x[first], x[last] = x[last], x[first]
		first++
	}
}

func (s *stdSorter) finalInsertionSort(first, last int) {
	if last-first > stdThreshold {
		s.insertionSort(first, first+stdThreshold)
		for i := first + stdThreshold; i < last; i++ {
			s.unguardedLinearInsert(i)
		}
		return
	}
	s.insertionSort(first, last)
}

func (s *stdSorter) insertionSort(first, last int) {
	x := s.idx
	for i := first + 1; i < last; i++ {
		if s.less(x[i], x[first]) {
			v := x[i]
			copy(x[first+1:i+1], x[first:i])
			x[first] = v
		} else {
			s.unguardedLinearInsert(i)
		}
	}
}

func (s *stdSorter) unguardedLinearInsert(last int) {
	x := s.idx
	v := x[last]
	next := last - 1
	for s.less(v, x[next]) {
		x[last] = x[next]
		last = next
		next--
	}
	x[last] = v
}

// heapSort is std::__partial_sort(first, last, last): make_heap, then sort_heap.
func (s *stdSorter) heapSort(first, last int) {
	n := last - first
	if n >= 2 {
		for parent := (n - 2) / 2; ; parent-- {
			s.adjustHeap(first, parent, n, s.idx[first+parent])
			if parent == 0 {
				break
			}
		}
	}
	for last-first > 1 {
		last--
		v := s.idx[last]
		s.idx[last] = s.idx[first]
		s.adjustHeap(first, 0, last-first, v)
	}
}

func (s *stdSorter) adjustHeap(first, hole, n, v int) {
	x := s.idx[first:]
	top := hole
	child := hole
	for child < (n-1)/2 {
		child = 2 * (child + 1)
		if s.less(x[child], x[child-1]) {
			child--
		}
		x[hole] = x[child]
		hole = child
	}
	if n&1 == 0 && child == (n-2)/2 {
		child = 2 * (child + 1)
		x[hole] = x[child-1]
		hole = child - 1
	}
	// __push_heap
	parent := (hole - 1) / 2
	for hole > top && s.less(x[parent], v) {
		x[hole] = x[parent]
		hole = parent
		parent = (hole - 1) / 2
	}
	x[hole] = v
}
