package compiler

import (
	"deepinfer/kvlayout"
	"deepinfer/plan"
)

// modelV41 is the plan's model section for deepseek_v41: the backbone layers with their
// CED/CSA2 roles, then the DSpark stages; the drafter; the vision tower's shapes.
func modelV41(c *ModelConfig) ([]plan.Layer, *plan.DSpark, *plan.Vision) {
	v := c.V41
	var out []plan.Layer
	for i, l := range v.Layers {
		pl := plan.Layer{Attn: "window", Ratio: l.Ratio, MLP: "moe", Role: l.Role(i), KVSource: l.KVSource,
			IndexSource: l.IndexSource, Engram: l.Engram >= 0, DSparkTarget: l.DSparkTarget}
		if l.Ratio > 0 {
			pl.Attn = "csa2"
		}
		switch {
		case l.CandidateSource:
			pl.Candidate = "source"
		case l.UsesCandidates:
			pl.Candidate = "restricted"
		}
		out = append(out, pl)
	}
	for range v.StageRatios {
		out = append(out, plan.Layer{Attn: "window", MLP: "moe", Role: RoleDSpark, KVSource: -1, IndexSource: -1})
	}
	var ds *plan.DSpark
	if c.NumMTP > 0 && v.DSparkBlock > 0 {
		ds = &plan.DSpark{Block: v.DSparkBlock, Noise: v.DSparkNoise, Stages: c.NumMTP, MarkovRank: v.DSparkMarkovRank,
			Targets: append([]int(nil), v.DSparkTargets...)}
	}
	var vis *plan.Vision
	if x := v.Vision; x != nil {
		vis = &plan.Vision{Layers: x.Layers, Hidden: x.Hidden, Heads: x.Heads, Intermediate: x.Intermediate,
			PatchSize: x.PatchSize, MaxImageTokens: x.MaxImageTokens}
	}
	return out, ds, vis
}

// Storage of V4.1's decode state (MODEL.md §2, "KV per token"): window rows as MXFP8,
// compressed entries FP4 with an E4M3 scale per 16 values, index keys FP4 with a UE8M0
// scale per 32.
const (
	ringFormatV41  = "mxfp8"
	entryFormatV41 = "fp4_e4m3"
	entryGroupV41  = 16
	keyFormatV41   = "fp4_ue8m0"
	keyGroupV41    = 32
)

// kvLayoutV41 is the per-sequence state of a deepseek_v41 model: a window ring in every
// layer (a whole window in the DSpark stages, which write the current position before
// attending), a compressed cache and its index keys in each KV source only, and the
// Engram n-gram history.
func kvLayoutV41(c *ModelConfig) kvlayout.Layout {
	v := c.V41
	var l kvlayout.Layout
	for i, ly := range v.Layers {
		ll := kvlayout.LayerLayout{Window: c.SlidingWindow, Dim: c.HeadDim, RingFmt: ringFormatV41}
		if ly.OwnsKV(i) {
			ll.Caches = append(ll.Caches, kvlayout.CacheLayout{Kind: kvlayout.CacheKV, Ratio: ly.Ratio, Dim: c.HeadDim,
				Fmt: entryFormatV41, Group: entryGroupV41})
			if ly.Indexer(i) {
				ll.Caches = append(ll.Caches, kvlayout.CacheLayout{Kind: kvlayout.CacheIndexKeys, Ratio: ly.Ratio,
					Dim: c.IndexHeadDim, Fmt: keyFormatV41, Group: keyGroupV41})
			}
		}
		l.Layers = append(l.Layers, ll)
	}
	for range v.StageRatios {
		l.Layers = append(l.Layers, kvlayout.LayerLayout{Window: c.SlidingWindow, Dim: c.HeadDim, RingCap: c.SlidingWindow,
			RingFmt: ringFormatV41})
	}
	if v.Engram != nil {
		l.EngramContext = v.Engram.MaxNgram - 1
	}
	return l
}
