package placement

// EPLB is DeepSeek's Expert Parallelism Load Balancer (deepseek-ai/EPLB, eplb.py,
// rebalance_experts), reimplemented to give the same answer bit for bit.
//
// The reference is three greedy steps, each over float32 tensors:
//
//  1. balanced_packing of the G group loads onto the N nodes, G/N groups per node;
//  2. replicate_experts inside each node: R/N slots for its E/N experts, each redundant
//     slot going to the expert with the largest load per replica;
//  3. balanced_packing of each node's R/N replicas (load = expert load / its count) onto
//     the node's P/N GPUs, R/P per GPU.
//
// With Groups%Nodes != 0 it runs the same steps with one group and one node (the global
// policy). Reproducing it exactly means reproducing its arithmetic and its tie-breaking:
//
//   - Loads are float32 (weight.float()), and so are the quotients load/count and the
//     running pack sums, which Go computes in float32 too. Group sums are accumulated in
//     float64 and rounded once; PyTorch's cascade summation agrees with that whenever
//     the loads are integer token counts below 2^24, and is within an ulp otherwise.
//   - torch.max(dim).indices returns the first index of the maximum (the CPU kernel
//     replaces the running maximum only on a strictly greater value).
//   - balanced_packing visits items in sort(descending=True) order, an unstable sort:
//     PyTorch's CPU kernel hands it to libstdc++'s std::sort, whose order of equal
//     loads torchSortDesc reproduces step by step (stdsort.go). It matters more than it
//     seems: all replicas of an expert tie, so it decides log2phy's rank order, and
//     equal loads of different experts (zeros, small counts) decide phy2log. Up to 16
//     items it happens to be index order; beyond, it is not.
//   - Python's min(..., key=pack_weights) returns the first lightest non-full pack.
//   - log2phy lists an expert's slots by replica rank: the original slot is rank 0 and
//     redundant slots follow in the order replicate_experts created them.
//
// Checked against eplb.py itself: the README example (testdata/eplb_readme_vector.json)
// and 400 random tie-heavy problems run under PyTorch (testdata/eplb_torch_oracle.json.gz,
// made by testdata/eplb_oracle.py) agree exactly on phy2log, logcnt and log2phy.
func EPLB(loads Loads, p Problem) (*Placement, error) {
	if err := check(loads, p); err != nil {
		return nil, err
	}
	q := p.effective()
	experts := loads.Experts()
	pl := newPlacement(len(loads))
	w32 := make([]float32, experts)
	for l, row := range loads {
		for e, v := range row {
			w32[e] = float32(v)
		}
		phy2log, rank := eplbLayer(w32, q)
		pl.setLayer(l, phy2log, rank, experts)
	}
	return pl, nil
}

// eplbLayer is rebalance_experts_hierarchical for one layer. It returns the slot →
// logical expert map and each slot's replica rank (EPLB's phyrank).
func eplbLayer(w []float32, q Problem) (phy2log, rank []int) {
	experts := len(w)
	groupSize := experts / q.Groups
	groupsPerNode := q.Groups / q.Nodes
	slotsPerGPU := q.Replicas / q.GPUs
	nodeExperts := experts / q.Nodes
	nodeSlots := q.Replicas / q.Nodes
	nodeGPUs := q.GPUs / q.Nodes

	// Step 1: pack groups onto nodes. A node's experts are renumbered ("mlog", EPLB's
	// middle-logical ids) so that node n owns mlog ids [n*E/N, (n+1)*E/N), in the
	// order of the groups' ranks in their pack.
	groupLoad := make([]float32, q.Groups)
	for g := range groupLoad {
		s := 0.0
		for _, v := range w[g*groupSize : (g+1)*groupSize] {
			s += float64(v)
		}
		groupLoad[g] = float32(s)
	}
	groupPack, groupRank := balancedPacking(groupLoad, q.Nodes)
	mlog2log := make([]int, experts)
	for g := range q.Groups {
		base := (groupPack[g]*groupsPerNode + groupRank[g]) * groupSize
		for j := range groupSize {
			mlog2log[base+j] = g*groupSize + j
		}
	}

	// Steps 2 and 3, node by node.
	phy2log = make([]int, q.Replicas)
	rank = make([]int, q.Replicas)
	nodeLoad := make([]float32, nodeExperts)
	replicaLoad := make([]float32, nodeSlots)
	for n := range q.Nodes {
		for k := range nodeLoad {
			nodeLoad[k] = w[mlog2log[n*nodeExperts+k]]
		}
		phy2mlog, phyRank, cnt := replicateExperts(nodeLoad, nodeSlots)
		for i, m := range phy2mlog {
			replicaLoad[i] = nodeLoad[m] / float32(cnt[m])
		}
		pack, packRank := balancedPacking(replicaLoad, nodeGPUs)
		for i, m := range phy2mlog {
			slot := n*nodeSlots + pack[i]*slotsPerGPU + packRank[i]
			phy2log[slot] = mlog2log[n*nodeExperts+m]
			rank[slot] = phyRank[i]
		}
	}
	return phy2log, rank
}

// balancedPacking is EPLB's balanced_packing for one row: items, heaviest first, each go
// to the lightest pack that still has room; every pack takes len(w)/packs items. It
// returns each item's pack and its rank (arrival order) inside the pack.
func balancedPacking(w []float32, packs int) (pack, rankInPack []int) {
	n := len(w)
	per := n / packs
	pack = make([]int, n)
	rankInPack = make([]int, n)
	if per == 1 {
		// EPLB's shortcut: item i is pack i, without sorting.
		for i := range pack {
			pack[i] = i
		}
		return pack, rankInPack
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	torchSortDesc(order, w) // sort(-1, descending=True).indices, ties as PyTorch leaves them
	packLoad := make([]float32, packs)
	items := make([]int, packs)
	for _, i := range order {
		best := -1
		for p := range packs {
			if items[p] < per && (best < 0 || packLoad[p] < packLoad[best]) {
				best = p
			}
		}
		pack[i] = best
		rankInPack[i] = items[best]
		packLoad[best] += w[i]
		items[best]++
	}
	return pack, rankInPack
}

// replicateExperts is EPLB's replicate_experts for one row: the first len(w) slots hold
// each expert once, and each further slot goes to the expert with the largest load per
// replica, first index on ties. Greedy water-filling like this minimises the largest
// per-replica load. It returns slot → expert, each slot's replica rank, and the counts.
func replicateExperts(w []float32, slots int) (phy2log, rank, cnt []int) {
	n := len(w)
	phy2log = make([]int, slots)
	rank = make([]int, slots)
	cnt = make([]int, n)
	perReplica := make([]float32, n)
	for e := range n {
		phy2log[e] = e
		cnt[e] = 1
		perReplica[e] = w[e]
	}
	for i := n; i < slots; i++ {
		best := 0
		for e := 1; e < n; e++ {
			// Strictly greater keeps the first maximum, as torch.max does. NaN cannot
			// occur: loads are validated finite, and Inf/count stays Inf.
			if perReplica[e] > perReplica[best] {
				best = e
			}
		}
		phy2log[i] = best
		rank[i] = cnt[best]
		cnt[best]++
		perReplica[best] = w[best] / float32(cnt[best])
	}
	return phy2log, rank, cnt
}
