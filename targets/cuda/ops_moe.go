package cuda

import "os"

// Binders of moe.cu's kernels: the router, the routed experts and the single-rank
// collectives.

func init() {
	registerError(200, "moe_route: tid2eid names an expert outside the layer")
	registerError(201, "moe_route: a token id is outside tid2eid")
	registerError(202, "moe_experts: the router chose an expert outside the layer")
	register("moe_route", bindMoERoute)
	register("moe_experts", bindMoEExperts)
	register("moe_dispatch", bindSingleRank)
	register("moe_combine", bindSingleRank)
	register("cp_gather", bindSingleRank)
}

// bindMoERoute: the gate logits one (token, expert) a work item, then the scoring and
// top-k one token a work item (cpu: newMoERoute, route41 with numerics v41).
func bindMoERoute(b *Bind) error {
	E, D := Dim(b.Args[1], 0), Dim(b.Args[1], 1)
	k := b.Int("topk")
	if k <= 0 || k > E {
		return b.Errorf("topk %d out of range for %d experts", k, E)
	}
	mode, scoring := b.Str("mode"), b.Str("scoring")
	hash := mode == "hash"
	if !hash && mode != "topk" {
		return b.Errorf("unknown mode %q", mode)
	}
	sc := map[string]int64{"sqrtsoftplus": 0, "sigmoid": 1, "softmax": 2}
	scoreKind, ok := sc[scoring]
	if !ok {
		return b.Errorf("unknown scoring %q", scoring)
	}
	norm := int64(0)
	if b.Bool("norm") {
		norm = 1
	}
	scale := b.Float("scale")
	hasBias := int64(0)
	if !hash && len(b.Args) == 3 {
		hasBias = 1
	}
	scratch := b.Scratch((2*E+k)*8, 0)
	if isV41(b) {
		if hash || scoring != "sqrtsoftplus" {
			return b.Errorf("V4.1 numerics route top-k by sqrtsoftplus, not %s/%s", mode, scoring)
		}
		keep := b.Int("keep")
		part := -1
		if b.Fast() {
			part = b.Scratch(E*16*4, 0)
		}
		// with EnvRouteFold=1 the fast mode's route folds each token's logits from their
		// lanes itself (moe.cu moe_route_v41); by default moe_fast_gate41_sum's launch
		// does (run 31 on the H200: the fold made the route 0.05 → 0.30 ms a step at batch
		// 1 and 0.25 → 1.36 at 256, for 0.04-0.25 ms of sum launches); steps of long
		// sequences have no lanes
		foldOK := part >= 0 && os.Getenv(EnvRouteFold) == "1"
		routeFolds := func(s *Step) bool { return foldOK && !longRows(s) }
		fill := func(s *Step, a *ArgBuf) int64 {
			T := s.Arg(0).Rows()
			a.P(s.Arg(0).Ptr)
			a.W(s.Arg(1))
			if hasBias == 1 {
				a.W(s.Arg(2))
			} else {
				a.W(Operand{})
			}
			a.I(hasBias)
			a.P(s.Result(0).Ptr)
			a.P(s.Result(1).Ptr)
			a.I(T)
			a.I(E)
			a.I(D)
			a.I(k)
			a.I(norm)
			a.F(scale)
			a.P(s.Seqs)
			a.I(s.NSeq)
			a.I(keep)
			a.P(s.Scratch(scratch))
			if part >= 0 {
				a.P(s.Scratch(part))
			} else {
				a.P(0)
			}
			a.I(b2i(routeFolds(s)))
			return T
		}
		// the gate logits, one (token, expert) a work item (the fast mode: a (token,
		// expert, lane) of MKL's order, then folded: the same values); then the top-k
		// per token
		if part >= 0 {
			// a work item per (moeGateTokens tokens, expert, lane); steps of long sequences
			// (MKL's sequential order: one lane of 16 would work) a (token, expert) each
			// steps of up to gateRowsMax tokens, one a sequence, stage each (token,
			// expert)'s rows in a launch block instead (moe_fast_gate41_rows: the same
			// values)
			stageOK := os.Getenv(EnvGemvRows) != "0"
			staged := func(s *Step) bool { return stageOK && s.T <= gateRowsMax && s.T == max(s.NSeq, 1) }
			// decode steps (one row a sequence) run tiles of tokens × experts instead
			// (EnvGemvTiles=0 keeps the rows and lanes): moe_fast_gate41_tile1 up to
			// gateTile1Max tokens, moe_fast_gate41_tile past them (the same values;
			// faster on the H200 since run 15); so do steps whose every row is summed as
			// in a one-row step (Step.RowsAlone: speculation's verify groups), which ran
			// the lanes until after run 30 (3.4 ms of a 30 ms verify step at 64 requests
			// in run 29d, where the decode step's tiles took 0.25)
			tiles := gemvTilesOn()
			tiled := func(s *Step) bool { return tiles && s.RowsAlone }
			b.Launch("moe_fast_gate41_tile1", func(s *Step, a *ArgBuf) int64 {
				if longRows(s) || !tiled(s) || s.T > gateTile1Max {
					return 0
				}
				return fill(s, a) * ceilDiv(E, gateTile1Experts) * launchBlock
			})
			b.Launch(routerTileName(), func(s *Step, a *ArgBuf) int64 {
				if longRows(s) || !tiled(s) || s.T <= gateTile1Max {
					return 0
				}
				return ceilDiv(fill(s, a), gateTileTokens) * ceilDiv(E, gateTileExperts) * launchBlock
			})
			b.Launch("moe_fast_gate41_rows", func(s *Step, a *ArgBuf) int64 {
				if longRows(s) || !staged(s) || tiled(s) {
					return 0
				}
				return fill(s, a) * E * rowSpread
			})
			b.Launch("moe_fast_gate41_part", func(s *Step, a *ArgBuf) int64 {
				if longRows(s) || staged(s) || tiled(s) {
					return 0
				}
				return (fill(s, a) + moeGateTokens - 1) / moeGateTokens * E * 16
			})
			b.Launch("moe_fast_gate41_sum", func(s *Step, a *ArgBuf) int64 {
				if longRows(s) || routeFolds(s) {
					return 0
				}
				return fill(s, a) * E
			})
		}
		// the fast mode's steps of long sequences run tiles of tokens × experts
		// (moe_fast_gate41_seq: MKL's sequential chains with fma_fast) unless EnvSeqTiles
		// is 0, which keeps moe_gate_v41 (the exact kernel) for them
		seqTiles := part >= 0 && seqTilesOn()
		if seqTiles {
			b.Launch("moe_fast_gate41_seq", func(s *Step, a *ArgBuf) int64 {
				if !longRows(s) {
					return 0
				}
				return ceilDiv(fill(s, a), seqGateTokens) * ceilDiv(E, seqGateExperts) * launchBlock
			})
		} else {
			b.Launch("moe_gate_v41", func(s *Step, a *ArgBuf) int64 {
				if part >= 0 && !longRows(s) {
					return 0
				}
				return fill(s, a) * E
			})
		}
		b.Launch("moe_route_v41", func(s *Step, a *ArgBuf) int64 { return fill(s, a) * rowSpread })
		uniformRoute(b, E, D, k)
		return nil
	}
	var V int64
	if hash {
		V = Dim(b.Args[3], 0)
	}
	fill := func(s *Step, a *ArgBuf) int64 {
		T := s.Arg(0).Rows()
		a.P(s.Arg(0).Ptr)
		a.W(s.Arg(1))
		if hasBias == 1 {
			a.W(s.Arg(2))
		} else {
			a.W(Operand{})
		}
		a.I(hasBias)
		if hash {
			a.P(s.Arg(2).Ptr)
			a.P(s.Arg(3).Ptr)
		} else {
			a.P(0)
			a.P(0)
		}
		a.P(s.Result(0).Ptr)
		a.P(s.Result(1).Ptr)
		a.I(T)
		a.I(E)
		a.I(D)
		a.I(k)
		a.I(V)
		h := int64(0)
		if hash {
			h = 1
		}
		a.I(h)
		a.I(norm)
		a.I(scoreKind)
		a.F(scale)
		a.P(s.Scratch(scratch))
		a.P(s.Err)
		return T
	}
	if b.Fast() && !hash {
		// the gate logits as float64 parts summed in order (moe.cu's MOE_GP parts)
		part := b.Scratch(E*moeGateParts*8, 0)
		gate := func(s *Step, a *ArgBuf) int64 {
			T := s.Arg(0).Rows()
			a.P(s.Arg(0).Ptr)
			a.W(s.Arg(1))
			a.P(s.Scratch(scratch))
			a.P(s.Scratch(part))
			a.I(T)
			a.I(E)
			a.I(D)
			a.I(k)
			return T * E
		}
		tiles := partTilesOn()
		b.Launch("moe_fast_gate_part", func(s *Step, a *ArgBuf) int64 {
			if tiles && s.Arg(0).Rows() >= gateTileRows {
				return 0
			}
			return gate(s, a) * moeGateParts
		})
		b.Launch("moe_fast_gate_tile", func(s *Step, a *ArgBuf) int64 {
			if !tiles || s.Arg(0).Rows() < gateTileRows {
				return 0
			}
			T := gate(s, a) / E
			return (T + 3) / 4 * ((E + 3) / 4) * moeGateParts
		})
		b.Launch("moe_fast_gate_sum", gate)
	} else {
		b.Launch("moe_gate_v4", func(s *Step, a *ArgBuf) int64 { return fill(s, a) * E })
	}
	// the elementwise scorings a (token, expert) a work item; the rest a token a launch block
	b.Launch("moe_score_v4", func(s *Step, a *ArgBuf) int64 {
		if scoreKind == 2 {
			return 0
		}
		return fill(s, a) * E
	})
	b.Launch("moe_route_v4", func(s *Step, a *ArgBuf) int64 { return fill(s, a) * rowSpread })
	if !hash {
		uniformRoute(b, E, D, k)
	}
	return nil
}

// EnvRoute set to uniform is targets.Options.UniformRoute (divm bench --route uniform):
// the expert ids of every top-k router (not the hash layers', already spread by token)
// replaced with k distinct experts a token drawn uniformly (bench.cu
// moe_route_uniform), for benchmarks of full-width steps on random weights, whose
// routers send rows that share a context to a few experts where a trained router
// spreads them. The values are then no longer the model's: a benchmark setting, never
// for serving or checks; the runtime's description says it is on. Read when a plan is
// opened.
const EnvRoute = "DEEPINFER_CUDA_ROUTE"

// uniformRoute adds moe_route_uniform after a top-k router's launches when the runtime
// routes uniformly.
func uniformRoute(b *Bind, E, D, k int64) {
	if b.rt == nil || !b.rt.uniformRoute {
		return
	}
	b.Launch("moe_route_uniform", func(s *Step, a *ArgBuf) int64 {
		T := s.Arg(0).Rows()
		a.P(s.Arg(0).Ptr)
		a.I(D)
		a.P(s.Result(1).Ptr)
		a.I(T)
		a.I(k)
		a.I(E)
		return T
	})
}

// longRows reports a step of more than mklSplitRows rows a sequence on average: MKL's
// order for a product of such a sequence is one sequential chain a value (numerics.h
// mkl_order), so the fast mode's lane kernels would keep one lane of 16 busy; such steps
// (prefill) run the exact kernels, a value a work item (the same values). Run 11c on the
// H200: V4.1's router lanes took 1,796 ms and the mHC mix lanes 828 ms of an 8,192-token
// prefill.
func longRows(s *Step) bool { return s.T > mklSplitRows*max(s.NSeq, 1) }

// seqGateTokens and seqGateExperts are the tile of moe.cu's moe_fast_gate41_seq
// (MOE_SEQ: SeqTile<32, 64>): a launch block a tile.
const seqGateTokens, seqGateExperts = 32, 64

// mklSplitRows is the most rows MKL's split orders take (numerics.h mkl_order). A
// variable so that a test can choose either kernel.
var mklSplitRows int64 = 128

// gateRowsMax is the most tokens a step may have for V4.1's fast router to stage its
// rows (moe_fast_gate41_rows, a launch block a token and expert); larger steps run the
// lanes (moe_fast_gate41_part, 4 tokens a work item). Run 12 on the H200 measured the
// four layers' router 0.52 → 0.48 ms at batch 1 and 1.01 → 13.2 ms at 64 staged.
const gateRowsMax = 1

// gateTileTokens and gateTileExperts are the tile of moe.cu's moe_fast_gate41_tile
// (GemvTile<1, 8, 4, 4>), gateTile1Experts moe_fast_gate41_tile1's (1 token × 8
// experts, GemvTile<1, 8, 1, 1, 32>): a launch block a tile. Decode steps of up to
// gateTile1Max tokens run the latter.
const (
	gateTileTokens, gateTileExperts = 4, 32
	gateTile1Experts, gateTile1Max  = 8, 3
)

// EnvRouteFold set to 1 folds V4.1's fast router logits from their lanes in
// moe_route_v41 instead of in a launch of their own (moe_fast_gate41_sum, the default
// since run 31 measured the fold slower at every batch size; the same values; read when
// a program is bound).
const EnvRouteFold = "DEEPINFER_CUDA_ROUTE_FOLD"

// moeGateTokens is moe.cu's MOE_GT: the tokens one moe_fast_gate41_part work item serves.
const moeGateTokens = 4

// moeChunk is moe.cu's MOE_CH: the slots one moe_count or moe_group work item scans.
const moeChunk = 256

// moePlanSlots and moePlanE are moe.cu's MOE_PLAN_SLOTS and MOE_PLAN_E: the most slots
// and experts moe_plan's shared memory holds.
const (
	moePlanSlots = 4096
	moePlanE     = 512
)

// EnvMoEPlan set to 0 keeps the experts' counts, positions, lists and active experts
// as four launches (moe_count, moe_count_sum, moe_group, fast_moe_active) where
// moe_plan would compute them in one (the same values; read when a program is bound).
const EnvMoEPlan = "DEEPINFER_CUDA_MOE_PLAN"

// moeGateParts is moe.cu's MOE_GP: the fast mode's parts of a gate logit.
const moeGateParts = 32

// bindMoEExperts: the experts' weight table, per-expert row counts, (V4.1: the MXFP8
// activations,) the hidden rows of every (token, slot), (V4.1: their MXFP8 values,)
// then one work item per output summing the token's experts (cpu: newMoEExpertsAny).
func bindMoEExperts(b *Bind) error {
	E := b.Int("experts")
	if E <= 0 || int64(len(b.Args)) != 3+3*E {
		return b.Errorf("want x, weights, ids and 3×%d expert weights, have %d operands", E, len(b.Args))
	}
	D := Dim(b.Args[0], 1)
	I := Dim(b.Args[3], 0)
	k := Dim(b.Args[1], 1)
	if D <= 0 || I <= 0 || k <= 0 || Dim(b.Args[3], 1) != D {
		return b.Errorf("x %s and w1 %s", b.Args[0], b.Args[3])
	}
	v41 := int64(0)
	if isV41(b) {
		v41 = 1
		if k > 64 {
			return b.Errorf("%d experts a token (at most 64)", k)
		}
	}
	limit := b.Float("limit")
	const block = 32                  // the V4.1 reference's MXFP8 activation block
	tab := b.WeightTable(3, int(3*E)) // w1 of every expert, then w2, then w3
	counts := b.Scratch(0, E*8)
	// each (chunk of moeChunk slots, expert)'s count: E values a chunk, k slots a token
	parts := b.Scratch((k*E*8+moeChunk-1)/moeChunk, E*8)
	// V4.1's fast experts quantize x and hid as they split them (fast_quant_split)
	fused := v41 == 1 && b.Fast() && xExactOn() && quantSplitOn()
	xq := -1
	if v41 == 1 && !fused {
		xq = b.Scratch(D*4, 0)
	}
	hid := b.Scratch(k*I*4, 0)
	off := b.Scratch(0, E*8)
	list := b.Scratch(k*4, 0)
	y := b.Scratch(k*D*4, 0)
	// the split path's block partials (at most splitRows tokens; exact mode)
	fast := b.Fast()
	nbD, nbI := (D+63)/64, (I+63)/64
	part1, part3 := -1, -1
	if !fast {
		part1 = b.Scratch(0, splitRows*k*max(I*nbD, D*nbI)*4)
		part3 = b.Scratch(0, splitRows*k*I*nbD*4)
	}
	split := func(s *Step) bool { return !fast && s.Arg(0).Rows() <= splitRows }
	splitArgs := func(s *Step, a *ArgBuf) {
		if v41 == 1 {
			a.P(s.Scratch(xq))
		} else {
			a.P(s.Arg(0).Ptr)
		}
		a.P(s.Scratch(hid))
		a.P(s.Arg(1).Ptr)
		a.P(s.Arg(2).Ptr)
		a.P(s.Table(tab))
		a.P(s.Scratch(part1))
		a.P(s.Scratch(part3))
		a.P(s.Scratch(hid))
		a.P(s.Scratch(y))
		a.I(s.Arg(2).Elems())
		a.I(k)
		a.I(E)
		a.I(D)
		a.I(I)
		a.F(limit)
		a.I(v41)
	}
	splitLaunch := func(kernel string, items func(slots int64) int64) {
		b.Launch(kernel, func(s *Step, a *ArgBuf) int64 {
			if !split(s) {
				return 0
			}
			splitArgs(s, a)
			return items(s.Arg(2).Elems())
		})
	}
	// the counts and lists in chunks of moeChunk slots: a (chunk, expert) a work item
	chunks := func(s *Step) int64 { return (s.Arg(2).Elems() + moeChunk - 1) / moeChunk }
	count := func(s *Step, a *ArgBuf) {
		a.P(s.Arg(2).Ptr)
		a.I(s.Arg(2).Elems())
		a.I(E)
		a.P(s.Scratch(counts))
		a.P(s.Err)
		a.P(s.Scratch(parts))
		a.P(s.Scratch(off))
	}
	// the fast experts (below); moe_plan writes their active list
	var ft *fastExperts
	// moe_plan: the counts, positions, lists (and active experts) in one launch block
	// where the step's slots and the experts fit its shared memory (moe.cu)
	planOK := E <= moePlanE && os.Getenv(EnvMoEPlan) != "0"
	plan := func(s *Step) bool { return planOK && s.Arg(2).Elems() <= moePlanSlots }
	b.Launch("moe_plan", func(s *Step, a *ArgBuf) int64 {
		if !plan(s) {
			return 0
		}
		a.P(s.Arg(2).Ptr)
		a.I(s.Arg(2).Elems())
		a.I(E)
		a.P(s.Scratch(counts))
		a.P(s.Scratch(off))
		a.P(s.Scratch(list))
		if ft != nil {
			a.P(s.Scratch(ft.act))
		} else {
			a.P(0)
		}
		a.P(s.Err)
		return rowSpread
	})
	b.Launch("moe_count", func(s *Step, a *ArgBuf) int64 {
		if plan(s) {
			return 0
		}
		count(s, a)
		return chunks(s) * E
	})
	b.Launch("moe_count_sum", func(s *Step, a *ArgBuf) int64 {
		if plan(s) {
			return 0
		}
		count(s, a)
		return 32 // one warp (moe.cu)
	})
	b.Launch("moe_group", func(s *Step, a *ArgBuf) int64 {
		if split(s) || plan(s) {
			return 0
		}
		a.P(s.Arg(2).Ptr)
		a.P(s.Scratch(counts))
		a.P(s.Scratch(off))
		a.P(s.Scratch(list))
		a.I(s.Arg(2).Elems())
		a.I(E)
		a.P(s.Scratch(parts))
		return chunks(s) * E
	})
	// mxfp8 (V4.1): the MXFP8 fake-quantization of rows of width values, src to dst
	mxfp8 := func(src func(*Step) devptr, dst int, rows func(*Step) int64, width int64) {
		if v41 == 0 || fused {
			return
		}
		b.Launch("dense_quant", func(s *Step, a *ArgBuf) int64 {
			a.P(src(s))
			a.P(s.Scratch(dst))
			a.I(rows(s))
			a.I(width)
			a.I(block)
			a.I(2)
			return rows(s) * ((width + block - 1) / block) * 32 // a warp a piece of 32 (dense41.cu)
		})
	}
	mxfp8(func(s *Step) devptr { return s.Arg(0).Ptr }, xq, func(s *Step) int64 { return s.Arg(0).Rows() }, D)
	splitLaunch("moe_hpart", func(n int64) int64 { return n * I * nbD })
	splitLaunch("moe_hsum", func(n int64) int64 { return n * I })
	if fast {
		var err error
		ft, err = newFastExperts(b, fastExpertShape{E: E, D: D, I: I, k: k, v41: v41, limit: limit},
			func(s *Step) devptr {
				if xq >= 0 {
					return s.Scratch(xq)
				}
				return s.Arg(0).Ptr
			}, tab, counts, off, list, hid, y)
		if err != nil {
			return b.Errorf("%v", err)
		}
		if fused {
			ft.quant = 2
		}
		ft.planned = plan
		ft.up()
	}
	b.Launch("moe_hidden", func(s *Step, a *ArgBuf) int64 {
		if fast || split(s) {
			return 0
		}
		if v41 == 1 {
			a.P(s.Scratch(xq))
		} else {
			a.P(s.Arg(0).Ptr)
		}
		a.P(s.Arg(1).Ptr)
		a.P(s.Table(tab))
		a.P(s.Scratch(counts))
		a.P(s.Scratch(off))
		a.P(s.Scratch(list))
		a.P(s.Scratch(hid))
		a.I(k)
		a.I(E)
		a.I(D)
		a.I(I)
		a.F(limit)
		a.I(v41)
		return E * I
	})
	mxfp8(func(s *Step) devptr { return s.Scratch(hid) }, hid, func(s *Step) int64 { return s.Arg(2).Elems() }, I)
	if fast {
		ft.down()
	}
	splitLaunch("moe_ppart", func(n int64) int64 { return n * D * nbI })
	splitLaunch("moe_psum", func(n int64) int64 { return n * D })
	b.Launch("moe_proj", func(s *Step, a *ArgBuf) int64 {
		if fast || split(s) {
			return 0
		}
		a.P(s.Scratch(hid))
		a.P(s.Table(tab))
		a.P(s.Scratch(counts))
		a.P(s.Scratch(off))
		a.P(s.Scratch(list))
		a.P(s.Scratch(y))
		a.I(E)
		a.I(D)
		a.I(I)
		return E * D
	})
	// the fast mode's experts: moe_out_parts reads the w2 tiles' slices itself
	// (fast_moe_dsum not launched) unless EnvMoEOutParts=0
	outParts := fast && os.Getenv(EnvMoEOutParts) != "0"
	if fast {
		ft.dsum = !outParts
	}
	for _, kernel := range []string{"moe_out", "moe_out_parts"} {
		b.Launch(kernel, func(s *Step, a *ArgBuf) int64 {
			if outParts != (kernel == "moe_out_parts") {
				return 0
			}
			T := s.Arg(0).Rows()
			if outParts {
				a.P(s.Scratch(ft.part))
			} else {
				a.P(s.Scratch(y))
			}
			a.P(s.Arg(1).Ptr)
			a.P(s.Arg(2).Ptr)
			a.P(s.Result(0).Ptr)
			a.I(T)
			a.I(k)
			a.I(E)
			a.I(D)
			a.I(v41)
			if outParts {
				S, _ := ft.sd(s)
				a.I(S)
				a.I(s.Arg(2).Elems())
			} else {
				a.I(1)
				a.I(0)
			}
			return T * D
		})
	}
	return nil
}

// EnvMoEOutParts set to 0 keeps the fast mode's expert output as two launches,
// fast_moe_dsum (each slot's w2·h from its slices) then moe_out, instead of
// moe_out_parts's one (the same values; read when a program is bound).
const EnvMoEOutParts = "DEEPINFER_CUDA_MOE_OUT_PARTS"

// bindSingleRank: a collective on one rank is a copy (cpu: newSingleRank).
func bindSingleRank(b *Bind) error {
	if n := b.Int("ranks"); n != 1 {
		return b.Errorf("the cuda target runs one rank; this collective spans %d", n)
	}
	b.Launch("moe_copy", func(s *Step, a *ArgBuf) int64 {
		n := s.Result(0).Elems()
		a.P(s.Arg(0).Ptr)
		a.P(s.Result(0).Ptr)
		a.I(n)
		return n
	})
	return nil
}
