// Package placement decides where the experts of a mixture-of-experts model live under
// expert parallelism (EP): how many physical replicas each logical expert gets and which
// GPU slot holds each replica, fed by per-layer expert-load statistics.
//
// # The problem
//
// A layer has E logical experts with loads w_e (tokens routed to e over some window).
// There are R physical slots (Problem.Replicas), spread over P GPUs (Problem.GPUs) with
// exactly S = R/P slots each, and the GPUs sit in Problem.Nodes nodes. A placement gives
// every slot one logical expert (Phy2Log); every expert needs at least one slot. Slot r
// lives on GPU r/S, and, in the hierarchical case, GPU g on node g/(P/Nodes). When an expert has c replicas, its
// tokens split evenly, so each replica carries w_e/c and a GPU's load is the sum over its
// slots. A layer runs as fast as its most loaded GPU, so the figure of merit is the
// balancedness mean(GPU load)/max(GPU load), averaged over layers (1 is perfect).
//
// # Policies
//
// "eplb" is DeepSeek's Expert Parallelism Load Balancer (github.com/deepseek-ai/EPLB,
// eplb.py, rebalance_experts), reimplemented so that it gives the same bits. When
// Groups is divisible by Nodes it runs the hierarchical policy of the DeepSeek-V3
// report (§3.4, redundant experts under group-limited routing): pack the expert groups
// onto nodes, replicate the hottest experts inside each node, then pack the node's
// replicas onto its GPUs; otherwise the same steps with one group and one node (the
// global policy), which is why a problem whose groups do not divide over its nodes is
// valid whatever its GPU and expert counts (Problem.Validate asks what eplb.py asserts,
// no more). Exactness takes the reference's float32 arithmetic, torch.max's
// first-index ties, and the tie order of PyTorch's unstable CPU sort, which is
// libstdc++'s std::sort and is emulated step by step (stdsort.go). The README example
// and 800 random tie-heavy problems run through eplb.py under PyTorch (400 of them
// global-policy problems with GPUs that do not split over the nodes or experts that do
// not split into the groups) are reproduced exactly (phy2log, logcnt and log2phy).
//
// "default" is ours. It keeps every constraint eplb keeps, so it is a drop-in
// replacement with the same network locality: in the hierarchical case all the experts
// of a group, and all their replicas, stay inside one node, and each node has the same
// number of slots as in eplb. Within those constraints it minimises the most loaded GPU
// instead of following eplb's one-pass greedy (default.go): several replica-count
// vectors (water-filling, and counts capped near the target load, which water-filling
// misses on skewed loads), LPT packing with exactly S slots per GPU, then a local search
// of swaps and replica re-assignments around the most loaded GPU. A layer where eplb's
// answer is still better gets eplb's answer, improved, so no layer is ever worse.
//
// "default-global" is the same search without the node constraint (one node, one
// group). It balances best but gives up group-limited routing's locality; it is there
// for decode-style deployments, where eplb itself would use its global policy, and to
// show what the constraint costs: on skewed loads most of the imbalance eplb leaves in
// the hierarchical case is between nodes, which no placement inside them can fix.
//
// Everything is deterministic: the same loads and problem give the same placement.
package placement
