package passes

import (
	"fmt"
	"strings"

	"deepinfer/deploy"
	"deepinfer/ir"
	"deepinfer/placement"
	"deepinfer/plan"
)

// placeSeed makes synthetic loads, and so plans, deterministic.
const placeSeed = 20261130

// placeExperts decides, for every role with expert parallelism, which logical expert
// each physical slot of each MoE layer holds (placement.Place with the spec's policy:
// DeepSeek's eplb, or ours), from the spec's expert loads — a file of per-layer token
// counts, a synthetic distribution, or uniform. Slot s of a layer lives on rank
// s / (replicas / ep). Without experts.groups in the spec placement is global (V4 routes
// without expert groups); with it, hierarchical when the groups split over the nodes.
func placeExperts(m *ir.Module, cfg *Config) (bool, error) {
	if cfg.Spec == nil {
		return false, nil
	}
	changed := false
	for _, f := range m.Funcs {
		role := cfg.Spec.Role(f.Name)
		if role == nil || role.EP <= 1 {
			continue
		}
		var layers []int
		experts := 0
		for _, in := range f.Body {
			if in.Op != "moe_experts" {
				continue
			}
			e, _ := in.Attrs.Int("experts")
			if experts != 0 && int(e) != experts {
				return false, fmt.Errorf("MoE layers have %d and %d experts; placement needs one count", experts, e)
			}
			experts = int(e)
			layers = append(layers, max(plan.LayerOf(in.Args[3].Name), 0))
		}
		if len(layers) == 0 {
			continue
		}
		loads, err := expertLoads(cfg.Spec, experts, len(layers))
		if err != nil {
			return false, err
		}
		prob := problem(cfg.Spec, role, experts)
		pl, err := placement.Place(cfg.Spec.Experts.Policy, loads, prob)
		if err != nil {
			return false, fmt.Errorf("role %s: %w", f.Name, err)
		}
		for i, l := range layers {
			v := make([]int64, len(pl.Phy2Log[i]))
			for j, e := range pl.Phy2Log[i] {
				v[j] = int64(e)
			}
			m.Attrs[placeKey(f.Name, l)] = v
		}
		m.Attrs["place."+f.Name+".balancedness_ppm"] = int64(placement.Balancedness(loads, pl, prob)*1e6 + 0.5)
		changed = true
	}
	return changed, nil
}

func problem(s *deploy.Spec, role *deploy.Role, experts int) placement.Problem {
	per := s.Topology.DevicesPerNode
	nodes := 1
	if role.EP > per && role.EP%per == 0 {
		nodes = role.EP / per
	}
	// DeepSeek-V4 and V4.1 route without expert groups (no n_group in their configs),
	// so the default is one group: the global policy. A spec sets groups for
	// hierarchical placement.
	groups := s.Experts.Groups
	if groups == 0 {
		groups = 1
	}
	return placement.Problem{Replicas: PaddedReplicas(experts, s.Experts.NumRedundant, role.EP), Groups: groups, Nodes: nodes, GPUs: role.EP}
}

func expertLoads(s *deploy.Spec, experts, layers int) (placement.Loads, error) {
	if s.Experts.Loads != "" {
		loads, _, err := placement.ReadFile(s.Experts.Loads)
		if err != nil {
			return nil, err
		}
		if loads.Layers() != layers || loads.Experts() != experts {
			return nil, fmt.Errorf("%s: loads are %d layers × %d experts; the model has %d MoE layers × %d experts",
				s.Experts.Loads, loads.Layers(), loads.Experts(), layers, experts)
		}
		return loads, nil
	}
	syn := "uniform"
	if s.Experts.Synthetic != "" {
		syn = s.Experts.Synthetic
	}
	kind, param, _ := strings.Cut(syn, ":")
	spec := fmt.Sprintf("uniform:%d:%d", experts, layers)
	if kind == "zipf" {
		spec = fmt.Sprintf("zipf:%s:%d:%d", param, experts, layers)
	}
	g, err := placement.ParseSynthetic(spec)
	if err != nil {
		return nil, err
	}
	return g.Generate(placeSeed), nil
}
