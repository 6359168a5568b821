package deploy

import "fmt"

// Check applies the cross-field rules the schema cannot express.
func (s *Spec) Check() *Error {
	t := &s.Topology
	if t.ScaleUpDomain == 0 {
		t.ScaleUpDomain = t.DevicesPerNode
	}
	used, cpuRanks := 0, 0
	for _, r := range s.roleList() {
		role, ptr := r.role, "/roles/"+r.name
		if role.CP == 0 {
			role.CP = 1
		}
		if role.TP == 0 {
			role.TP = 1
		}
		if role.TP > 1 {
			return &Error{Pointer: ptr + "/tp", Msg: fmt.Sprintf("tp %d is not supported: DeepSeek-V4 attention is a single shared K=V head, so it is split by data (dp) and context (cp) parallelism, and the MoE by expert parallelism (ep)", role.TP)}
		}
		n := role.Devices()
		if role.EP > n || n%role.EP != 0 {
			return &Error{Pointer: ptr + "/ep", Msg: fmt.Sprintf("%d does not divide the role's %d devices (dp %d × cp %d × tp %d)", role.EP, n, role.DP, role.CP, role.TP)}
		}
		if role.MaxNumBatchedTokens < role.MaxNumSeqs && r.name == "decode" {
			return &Error{Pointer: ptr + "/max_num_batched_tokens", Msg: fmt.Sprintf("%d is less than max_num_seqs (%d): a decode step carries at least one token per running sequence", role.MaxNumBatchedTokens, role.MaxNumSeqs)}
		}
		if s.Target == "cpu" && n > 1 {
			// in-process ranks: ep = dp, shared by both roles
			switch {
			case role.CP > 1:
				return &Error{Pointer: ptr + "/cp", Msg: fmt.Sprintf("the cpu target does not execute context parallelism (cp %d)", role.CP)}
			case role.EP != role.DP:
				return &Error{Pointer: ptr + "/ep", Msg: fmt.Sprintf("the cpu target runs ep = dp ranks in one process; this role has dp %d, ep %d", role.DP, role.EP)}
			case cpuRanks != 0 && cpuRanks != n:
				return &Error{Pointer: ptr, Msg: fmt.Sprintf("the cpu target runs both roles on the same in-process ranks; the roles ask for %d and %d", cpuRanks, n)}
			case n > t.Devices():
				return &Error{Pointer: ptr, Msg: fmt.Sprintf("%d ranks, the topology has %d devices", n, t.Devices())}
			}
			cpuRanks = n
		}
		used += n
	}
	// Roles are disaggregated (their own devices) except on the cpu target, where one
	// process serves both.
	if s.Target != "cpu" && used > t.Devices() {
		return &Error{Pointer: "/roles", Msg: fmt.Sprintf("the roles need %d devices, the topology has %d (%d nodes × %d)", used, t.Devices(), t.Nodes, t.DevicesPerNode)}
	}
	if s.Speculative.Method == "none" && s.Speculative.NumSpeculativeTokens > 0 {
		return &Error{Pointer: "/speculative/method", Msg: fmt.Sprintf("num_speculative_tokens is %d but method is none", s.Speculative.NumSpeculativeTokens)}
	}
	if s.Speculative.Method != "none" && s.Speculative.NumSpeculativeTokens == 0 {
		s.Speculative.NumSpeculativeTokens = 5 // DEEPINFER_USE_NEXTN_DECODE's default
	}
	if s.Experts.Loads != "" && s.Experts.Synthetic != "" {
		return &Error{Pointer: "/experts/synthetic", Msg: "give loads or synthetic, not both"}
	}
	return nil
}

type namedRole struct {
	name string
	role *Role
}

func (s *Spec) roleList() []namedRole {
	var out []namedRole
	if s.Roles.Prefill != nil {
		out = append(out, namedRole{"prefill", s.Roles.Prefill})
	}
	if s.Roles.Decode != nil {
		out = append(out, namedRole{"decode", s.Roles.Decode})
	}
	return out
}

// RoleNames lists the roles present, prefill first.
func (s *Spec) RoleNames() []string {
	var out []string
	for _, r := range s.roleList() {
		out = append(out, r.name)
	}
	return out
}

// Role returns a role by name, or nil.
func (s *Spec) Role(name string) *Role {
	for _, r := range s.roleList() {
		if r.name == name {
			return r.role
		}
	}
	return nil
}
