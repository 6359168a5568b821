package placement

import "fmt"

// Problem is the cluster an expert placement targets. The names follow EPLB's
// rebalance_experts(weight, num_replicas, num_groups, num_nodes, num_gpus).
type Problem struct {
	// Replicas is the number of physical expert slots per layer, over all GPUs: the
	// logical experts plus the redundant ones.
	Replicas int `json:"replicas"`
	// Groups is the number of expert groups of group-limited routing (DeepSeek-V3 routes
	// each token to experts of at most a few groups). Group g is the run of experts
	// [g*E/Groups, (g+1)*E/Groups).
	Groups int `json:"groups"`
	// Nodes is the number of server nodes; GPUs inside a node talk over the faster
	// intra-node network (NVLink), which is why the hierarchical policy keeps a group's
	// experts in one node.
	Nodes int `json:"nodes"`
	// GPUs is the number of GPUs (EP ranks), spread evenly over the nodes.
	GPUs int `json:"gpus"`
}

// MaxReplicas bounds Problem.Replicas so that a mistyped flag cannot ask for an
// unbounded allocation; it is far above any EP deployment.
const MaxReplicas = 1 << 20

// Validate checks the problem against the number of logical experts per layer. It
// asks exactly what EPLB's rebalance_experts asserts, and names the field at fault in
// EPLB's flag spelling. EPLB takes its global policy whenever groups%nodes != 0 and
// then runs with one group and one node, so the group and node checks apply only to
// the hierarchical policy: 16 GPUs on 3 nodes with 8 groups is a valid problem.
func (p Problem) Validate(experts int) error {
	switch {
	case experts <= 0:
		return fmt.Errorf("placement: no experts to place")
	case p.Replicas <= 0:
		return fmt.Errorf("placement: replicas must be positive, got %d", p.Replicas)
	case p.Groups <= 0:
		return fmt.Errorf("placement: groups must be positive, got %d", p.Groups)
	case p.Nodes <= 0:
		return fmt.Errorf("placement: nodes must be positive, got %d", p.Nodes)
	case p.GPUs <= 0:
		return fmt.Errorf("placement: gpus must be positive, got %d", p.GPUs)
	case p.Replicas > MaxReplicas:
		return fmt.Errorf("placement: replicas (%d) is more than %d", p.Replicas, MaxReplicas)
	case p.Replicas%p.GPUs != 0:
		return fmt.Errorf("placement: replicas (%d) must be a multiple of gpus (%d): every GPU holds the same number of expert slots", p.Replicas, p.GPUs)
	case p.Replicas < experts:
		return fmt.Errorf("placement: replicas (%d) must be at least the number of experts (%d): every expert needs a slot", p.Replicas, experts)
	}
	if !p.Hierarchical() {
		return nil
	}
	switch {
	case p.GPUs%p.Nodes != 0:
		return fmt.Errorf("placement: gpus (%d) must be a multiple of nodes (%d): the hierarchical policy (groups %% nodes == 0) puts the same number of GPUs on every node", p.GPUs, p.Nodes)
	case experts%p.Groups != 0:
		return fmt.Errorf("placement: the number of experts (%d) must be divisible by groups (%d): the hierarchical policy packs equal-sized runs of experts", experts, p.Groups)
	}
	// The hierarchical policy also needs experts%nodes == 0 and
	// (replicas/nodes)%(gpus/nodes) == 0; both follow from the checks above.
	return nil
}

// Hierarchical reports whether eplb (and default) use the hierarchical policy: exactly
// when the groups split evenly over the nodes, as in EPLB's rebalance_experts.
func (p Problem) Hierarchical() bool { return p.Nodes > 0 && p.Groups%p.Nodes == 0 }

// SlotsPerGPU is Replicas/GPUs.
func (p Problem) SlotsPerGPU() int { return p.Replicas / p.GPUs }

// effective is the problem the algorithms actually run: the global policy is the
// hierarchical one with a single group and a single node.
func (p Problem) effective() Problem {
	if p.Hierarchical() {
		return p
	}
	return Problem{Replicas: p.Replicas, Groups: 1, Nodes: 1, GPUs: p.GPUs}
}
