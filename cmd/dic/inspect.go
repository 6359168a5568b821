package main

import (
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"

	"deepinfer/ir"
	"deepinfer/kvlayout"
	"deepinfer/plan"
)

func inspectCmd(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	weights := fs.Bool("weights", false, "list every weight of the manifest")
	program := fs.String("program", "", "print the kernel calls of one phase (prefill or decode)")
	heatmap := fs.String("heatmap", "", "draw the expert map of each role into this .png or .svg file")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError{Err: fmt.Errorf("inspect takes one plan file")}
	}
	p, err := plan.ReadFile(pos[0])
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%s: plan format v%d, %s for target %s, compiled by %s\n", pos[0], plan.Version, p.ModelType, p.Target, p.Compiler)
	fmt.Fprintf(w, "config sha256 %s\n", p.ConfigHash)
	writeModel(w, p)
	writeV41(w, p)
	writeWeights(w, p, *weights)
	writeKV(w, p)
	writeDeployment(w, p)
	for i := range p.Programs {
		writeProgram(w, &p.Programs[i], *program == p.Programs[i].Phase)
	}
	if *program != "" && p.Program(*program) == nil {
		return fmt.Errorf("plan has no %q program", *program)
	}
	if *heatmap != "" {
		files, err := writeHeatmaps(*heatmap, p)
		if err != nil {
			return err
		}
		for _, f := range files {
			fmt.Fprintf(w, "expert map: %s\n", f)
		}
	}
	return nil
}

// shortNames abbreviates the config's layer type names for the layer line.
var shortNames = map[string]string{
	"sliding_attention":            "sliding",
	"compressed_sparse_attention":  "CSA",
	"heavily_compressed_attention": "HCA",
	"hash_moe":                     "hash",
}

func short(s string) string {
	if v, ok := shortNames[s]; ok {
		return v
	}
	return s
}

func writeModel(w io.Writer, p *plan.Plan) {
	m := p.Model
	attn := map[string]int{}
	mlp := map[string]int{}
	var attnOrder, mlpOrder []string
	for _, l := range m.Layers {
		if attn[l.Attn] == 0 {
			attnOrder = append(attnOrder, l.Attn)
		}
		attn[l.Attn]++
		if mlp[l.MLP] == 0 {
			mlpOrder = append(mlpOrder, l.MLP)
		}
		mlp[l.MLP]++
	}
	rank := map[string]int{"sliding_attention": -3, "compressed_sparse_attention": -2, "heavily_compressed_attention": -1}
	sort.SliceStable(attnOrder, func(i, j int) bool { return rank[attnOrder[i]] < rank[attnOrder[j]] })
	var parts []string
	for _, k := range attnOrder {
		parts = append(parts, fmt.Sprintf("%d %s", attn[k], short(k)))
	}
	var mparts []string
	for _, k := range mlpOrder {
		name := "top-k MoE"
		if k == "hash_moe" {
			name = "hash-routed MoE"
		} else if k != "moe" {
			name = k
		}
		mparts = append(mparts, fmt.Sprintf("%d %s layers", mlp[k], name))
	}
	mtp := "not lowered"
	if m.DSpark != nil {
		mtp = "the DSpark drafter"
	}
	fmt.Fprintf(w, "model: vocab %d, hidden %d, %d layers (%s), %s, %d MTP layers (%s)\n",
		m.Vocab, m.Hidden, len(m.Layers), strings.Join(parts, ", "), strings.Join(mparts, ", "), m.MTPLayers, mtp)
	var sb strings.Builder
	for i, l := range m.Layers {
		if i > 0 {
			sb.WriteString(" ")
		}
		s := short(l.Attn)
		if l.Ratio > 0 {
			s += fmt.Sprintf("/%d", l.Ratio)
		}
		if l.MLP != "moe" {
			s += "+" + short(l.MLP)
		}
		sb.WriteString(s)
	}
	fmt.Fprintf(w, "layers: %s\n", sb.String())
}

func writeWeights(w io.Writer, p *plan.Plan, list bool) {
	var bytes int64
	for i := range p.Weights {
		bytes += p.Weights[i].Elems() * int64(p.Weights[i].DType.Size())
	}
	src := "checkpoint (divm run --model DIR)"
	if p.Source.Kind == plan.SourceSeeded {
		src = fmt.Sprintf("generated from seed %d", p.Source.Seed)
	}
	fmt.Fprintf(w, "weights: %d tensors, %s at runtime dtype, %s\n", len(p.Weights), humanBytes(bytes), src)
	if list {
		for i := range p.Weights {
			wt := &p.Weights[i]
			fmt.Fprintf(w, "  @%-5d %-4s %-16v %s\n", i, wt.DType, wt.Shape, wt.Name)
		}
	}
}

func writeKV(w io.Writer, p *plan.Plan) {
	type key struct {
		cache int
		c     kvlayout.CacheLayout
	}
	counts := map[key]int{}
	var order []key
	for _, l := range p.KV.Layers {
		for j, c := range l.Caches {
			k := key{j, c}
			if counts[k] == 0 {
				order = append(order, k)
			}
			counts[k]++
		}
	}
	var sb strings.Builder
	for _, k := range order {
		kind := "attention"
		if k.cache == 1 {
			kind = "indexer"
		}
		fmt.Fprintf(&sb, "; %d× %s cache 1/%d × %d", counts[k], kind, k.c.Ratio, k.c.Dim)
		if k.c.Overlap {
			sb.WriteString(" overlapping")
		}
	}
	l0 := p.KV.Layers[0]
	fmt.Fprintf(w, "kv per sequence: window ring %d×%d in each of %d layers%s\n", l0.Window-1, l0.Dim, len(p.KV.Layers), sb.String())
}

func writeProgram(w io.Writer, pr *plan.Program, full bool) {
	counts := map[string]int{}
	for _, in := range pr.Instrs {
		counts[in.Kernel]++
	}
	names := make([]string, 0, len(counts))
	for k := range counts {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool {
		if counts[names[i]] != counts[names[j]] {
			return counts[names[i]] > counts[names[j]]
		}
		return names[i] < names[j]
	})
	var perT, perR, perK, fixed int64
	for _, s := range pr.Slots {
		c, sym, _ := s.Elems()
		c *= int64(s.DType.Size())
		switch sym {
		case ir.SymTokens:
			perT += c
		case ir.SymRows:
			perR += c
		case ir.SymKept:
			perK += c
		default:
			fixed += c
		}
	}
	kept := ""
	if perK > 0 {
		kept = fmt.Sprintf(" + %s per row kept by SWA replay", humanBytes(perK))
	}
	fmt.Fprintf(w, "phase %s: %d kernel calls, %d arena slots (%s per token + %s per logit row%s + %s)\n",
		pr.Phase, len(pr.Instrs), len(pr.Slots), humanBytes(perT), humanBytes(perR), kept, humanBytes(fixed))
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s×%d", n, counts[n])
	}
	fmt.Fprintf(w, "  kernels: %s\n", strings.Join(parts, ", "))
	if !full {
		return
	}
	for i, s := range pr.Slots {
		fmt.Fprintf(w, "  slot %d <%s>\n", i, s)
	}
	ref := func(o plan.Operand) string {
		switch o.Kind {
		case plan.OpWeight:
			return fmt.Sprintf("@%d", o.Index)
		case plan.OpParam:
			return pr.Params[o.Index].Name
		case plan.OpSlot:
			return fmt.Sprintf("s%d", o.Index)
		}
		return "-"
	}
	for i, in := range pr.Instrs {
		var res, args []string
		for _, o := range in.Results {
			res = append(res, ref(o))
		}
		for _, o := range in.Args {
			args = append(args, ref(o))
		}
		if len(args) > 12 {
			args = append(args[:12], fmt.Sprintf("…(%d more)", len(args)-12))
		}
		fmt.Fprintf(w, "  %4d %s = %s %s\n", i, strings.Join(res, " "), in.Kernel, strings.Join(args, " "))
	}
}
