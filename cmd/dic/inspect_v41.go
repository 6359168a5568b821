package main

import (
	"fmt"
	"io"
	"strings"

	"deepinfer/plan"
)

// writeV41 prints DeepSeek-V4.1's structure (MODEL.md §2): each layer's role in the
// causal encoder–decoder, the Engram and DSpark layers, the bounded-replay cut, and
// the vision tower, which is described but not served.
func writeV41(w io.Writer, p *plan.Plan) {
	m := p.Model
	hasRoles := false
	for _, l := range m.Layers {
		hasRoles = hasRoles || l.Role != ""
	}
	if !hasRoles {
		return
	}
	roleName := map[string]string{"window": "Window", "full": "Full", "reuse": "Reuse", "reindex": "Reindex", "dspark": "DSpark"}
	count := map[string][]int{}
	var engram, targets []int
	lastSource := -1
	for i, l := range m.Layers {
		count[l.Role] = append(count[l.Role], i)
		if l.Engram {
			engram = append(engram, i)
		}
		if l.DSparkTarget {
			targets = append(targets, i)
		}
		if l.Role == "full" {
			lastSource = i
		}
	}
	fmt.Fprintf(w, "V4.1 roles: Full (KV source) %s; Reuse %s; Reindex (own indexer) %s; Window %s; DSpark stages %s\n",
		spans(count["full"]), spans(count["reuse"]), spans(count["reindex"]), spans(count["window"]), spans(count["dspark"]))
	fmt.Fprintf(w, "  %-5s %-8s %-8s %-6s %-6s %-10s %s\n", "layer", "role", "attn", "kv", "index", "candidate", "features")
	for i, l := range m.Layers {
		attn := l.Attn
		if l.Ratio > 0 {
			attn = fmt.Sprintf("%s/%d", attn, l.Ratio)
		}
		var feats []string
		if l.Engram {
			feats = append(feats, "engram")
		}
		if l.DSparkTarget {
			feats = append(feats, "dspark input")
		}
		if i == lastSource {
			feats = append(feats, "last KV source")
		}
		fmt.Fprintf(w, "  %-5d %-8s %-8s %-6s %-6s %-10s %s\n", i, roleName[l.Role], attn, layerRef(l.KVSource), layerRef(l.IndexSource),
			dash(l.Candidate), strings.Join(feats, ", "))
	}
	fmt.Fprintf(w, "engram layers: %s\n", spans(engram))
	if d := m.DSpark; d != nil {
		fmt.Fprintf(w, "dspark: %d stages (layers %s), block %d, Markov rank %d, noise token %d, reads the streams entering layers %s\n",
			d.Stages, spans(count["dspark"]), d.Block, d.MarkovRank, d.Noise, spans(targets))
	}
	if lastSource >= 0 {
		keep := replayKeep(p)
		backbone := len(m.Layers) - len(count["dspark"])
		switch {
		case lastSource+1 >= backbone:
		case keep > 0:
			fmt.Fprintf(w, "swa_replay: compact, keep %d: prefill runs layers %d–%d on each sequence's last %d rows (K = Σ min(n, %d))\n",
				keep, lastSource+1, backbone-1, keep, keep)
		default:
			fmt.Fprintf(w, "swa_replay: off (compact would run layers %d–%d on each sequence's tail rows)\n", lastSource+1, backbone-1)
		}
	}
	if v := m.Vision; v != nil {
		fmt.Fprintf(w, "vision tower: %d layers, hidden %d, %d heads, MLP %d, patch %d, up to %d image tokens — shapes only: "+
			"image inputs are NOT served by DeepInfer (Go) yet, and its tensors are not in the weight manifest\n",
			v.Layers, v.Hidden, v.Heads, v.Intermediate, v.PatchSize, v.MaxImageTokens)
	}
}

// replayKeep is the keep of the prefill program's tail_rows, 0 without one.
func replayKeep(p *plan.Plan) int {
	pr := p.Program("prefill")
	if pr == nil {
		return 0
	}
	for _, in := range pr.Instrs {
		if in.Op == "tail_rows" {
			if k, ok := in.Attrs.Int("keep"); ok {
				return int(k)
			}
		}
	}
	return 0
}

func layerRef(i int) string {
	if i < 0 {
		return "-"
	}
	return fmt.Sprint(i)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// spans writes sorted layer numbers as ranges: "2, 8, 14, 20" or "21–23, 25–27".
func spans(ls []int) string {
	if len(ls) == 0 {
		return "none"
	}
	var parts []string
	for i := 0; i < len(ls); {
		j := i
		for j+1 < len(ls) && ls[j+1] == ls[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, fmt.Sprint(ls[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d–%d", ls[i], ls[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ", ")
}
