#!/usr/bin/env python3
"""The peer: HF transformers' DeepSeek-V4 decoder at full width on the same GPU.

Builds DeepseekV4ForCausalLM from the tiny-v4-dev fixture's config with V4-Flash's
widths (hidden 4096, 64 heads x 512, 256 experts top-6, index top-512, window 128),
one CSA and one HCA layer, random bf16 weights, eager attention; prefills CONTEXT tokens
for each batch size, then times decode steps (one token per sequence, with the cache)
with CUDA events: warm-up 2, then STEPS steps; prints the median per batch size (a batch
size that runs out of GPU memory is reported as such and the next one is timed).

--compile runs the decode steps through torch.compile (default mode) with their shapes
marked dynamic; the prefill runs eager (one compile, of the decode step, not two). A decode
step's cache is one longer than the last step's and the compressors' buffers cycle in
length, and with static shapes every step recompiled until dynamo's recompile limit and
then ran eager (run 45a: the limit reached on `buffer_kv['compressor']`'s length); the
limit is raised too. Warm-up 6 steps instead of 2, each warm-up step's time printed (the
compiles among them), the prefill's and warm-up's wall time printed; a compile that fails
is reported with its error and the batch sizes after it are not tried (the issue asks for
torch.compile "if it runs"). The process ends with os._exit after its summary (45a's
compiled run did not exit within its limit after printing it). Run 46b (an H100, decode
only, dynamic, grouped_mm): every one of the six warm-up steps compiled again (38-56 s
each, 277 s with the prefill), so no step reached a compiled steady state within 400 s;
TORCH_LOGS=recompiles is set for --compile so the next run's log says why. Read from
transformers' source: the DeepSeek-V4 cache layers keep Python integers that change as
decoding goes on (the window's cumulative_length, the compressors' entry_count), the
HCA compressor's buffer is one longer every step, and the compressors branch on those
lengths, so a whole-model compile has no steady state to reach.

--compile regional compiles instead, once the first batch's prefill is done, each module
that never sees the cache: every layer's two hyper-connections (attn_hc, ffn_hc, whose
Sinkhorn loops are most of eager's small launches), its MoE block (mlp: router, experts,
shared expert), its two norms, and the model's hc_head, final norm and lm_head; the
model's, layers' and attention's forward (the cache, the masks, the compressors) run
eager. Prefills run with the compiler's stance at force_eager, so only decode shapes are
compiled. --compile alone (or --compile model) compiles the whole decode step as before.

--experts NAME sets transformers' experts backend (set_experts_implementation: eager,
grouped_mm, batched_mm); without it the model keeps transformers' default. The backend in
use is printed either way. transformers' docs name grouped_mm the one that compiles
without graph breaks (eager's loop over the experts hit is data-dependent).

Usage:
  python3 scripts/peer-transformers.py [--batch 1,64,256] [--context 512] [--steps 5] [--compile [model|regional]] [--experts grouped_mm]
"""
import argparse, json, os, statistics, sys, time

if "--compile" in sys.argv:
    # each recompilation's reason (run 46b: with dynamic shapes, decode only and the
    # grouped_mm experts, every warm-up step still compiled for 38-56 s)
    os.environ.setdefault("TORCH_LOGS", "recompiles")
import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM

ap = argparse.ArgumentParser()
ap.add_argument("--batch", default="1,64,256")
ap.add_argument("--context", type=int, default=512)
ap.add_argument("--steps", type=int, default=5)
ap.add_argument("--compile", nargs="?", const="model", default="", choices=["model", "regional"])
ap.add_argument("--experts", default="")
ap.add_argument("--fixture", default=os.path.join(os.path.dirname(__file__), "..", "testdata", "tiny-v4-dev", "config.json"))
args = ap.parse_args()

raw = json.load(open(args.fixture))
raw.update(
    hidden_size=4096, num_attention_heads=64, head_dim=512, q_lora_rank=1024, o_lora_rank=1024, o_groups=8,
    n_routed_experts=256, num_experts_per_tok=6, moe_intermediate_size=2048, index_n_heads=64,
    index_head_dim=128, index_topk=512, sliding_window=128, qk_rope_head_dim=64, vocab_size=129280,
    num_hidden_layers=2, layer_types=["compressed_sparse_attention", "heavily_compressed_attention"],
    mlp_layer_types=["moe", "moe"], compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 128},
    max_position_embeddings=65536, dtype="bfloat16",
)
for part in raw.get("rope_parameters", {}).values():
    part["partial_rotary_factor"] = 64 / 512
raw.pop("architectures", None)
mt = raw.pop("model_type")
cfg = AutoConfig.for_model(mt, **raw)
cfg._attn_implementation = "eager"
torch.manual_seed(0)
t0 = time.time()
with torch.device("cuda"):
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
model.eval()
experts = "transformers' default"
if args.experts:
    try:
        model.set_experts_implementation(args.experts)
    except Exception as e:  # (a transformers without the interface, or a backend it refuses)
        print(f"experts backend {args.experts} not set ({type(e).__name__}: {str(e).strip()[:200]}); "
              f"the model keeps its own", flush=True)
if hasattr(model, "get_experts_implementation"):
    experts = str(model.get_experts_implementation())
params = sum(p.numel() for p in model.parameters())
mode = {"": "eager", "model": "torch.compile", "regional": "torch.compile of the modules without the cache"}[args.compile]
print(f"transformers {transformers.__version__}, torch {torch.__version__}, {torch.cuda.get_device_name()}: "
      f"{cfg.num_hidden_layers} layers, {params/1e9:.2f} B parameters (bf16), built in {time.time()-t0:.1f} s, {mode}, "
      f"experts backend {experts}", flush=True)
run = model
warm = 2
if args.compile:
    for knob in ("recompile_limit", "cache_size_limit"):
        if hasattr(torch._dynamo.config, knob):
            setattr(torch._dynamo.config, knob, 64)
    if args.compile == "model":
        run = torch.compile(model, dynamic=True)
    warm = 6


def regions(m):
    """The modules that never see the cache or a per-step Python integer (--compile
    regional), by their attribute paths from the model's root."""
    out = []
    for i, layer in enumerate(m.model.layers):
        for name in ("attn_hc", "ffn_hc", "mlp", "input_layernorm", "post_attention_layernorm"):
            if hasattr(layer, name):
                out.append((f"model.layers[{i}].{name}", getattr(layer, name)))
    for name in ("hc_head", "norm"):
        if hasattr(m.model, name):
            out.append((f"model.{name}", getattr(m.model, name)))
    out.append(("lm_head", m.lm_head))
    return out


compiled = False


def prefill(ids):
    # (the compiled regions run eager here: decode shapes are the ones compiled)
    if args.compile == "regional" and hasattr(torch.compiler, "set_stance"):
        with torch.compiler.set_stance("force_eager"):
            return model(input_ids=ids, use_cache=True)
    return model(input_ids=ids, use_cache=True)

rows = []
for B in [int(b) for b in args.batch.split(",")]:
    cache = out = ids = None
    oom = False
    failed = None
    try:
        with torch.no_grad():
            ids = torch.randint(3, cfg.vocab_size, (B, args.context), device="cuda")
            tw = time.time()
            out = prefill(ids)  # (eager: the compile is the decode step's)
            if args.compile == "regional" and not compiled:
                names = [n for n, mod in regions(model)]
                for n, mod in regions(model):
                    mod.compile(dynamic=True)
                compiled = True
                print(f"compiled regions ({len(names)}): {', '.join(names)}", flush=True)
            cache = out.past_key_values
            nxt = out.logits[:, -1:].argmax(-1)
            times = []
            wt = []
            for i in range(warm + args.steps):
                if i == warm and args.compile:
                    print(f"batch {B}: prefill and {warm} warm-up steps (compiling) took {time.time()-tw:.1f} s; "
                          f"the warm-up steps {', '.join(f'{t:.2f}' for t in wt)} ms", flush=True)
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                out = run(input_ids=nxt, past_key_values=cache, use_cache=True)
                e1.record()
                torch.cuda.synchronize()
                cache = out.past_key_values
                nxt = out.logits[:, -1:].argmax(-1)
                (times if i >= warm else wt).append(e0.elapsed_time(e1))
    except torch.OutOfMemoryError:
        # (eager attention's scores of a batch-256 prefill need more than an 80 GB card)
        oom = True
    except Exception as e:  # a compile that does not run: reported, not timed
        if not args.compile:
            raise
        failed = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"[:400]
    if failed:
        cache = out = ids = None
        torch.cuda.empty_cache()
        print(f"batch {B}, context {args.context}: torch.compile failed, not timed ({failed})", flush=True)
        rows.append((B, None, "compile failed"))
        break  # (the next batch sizes would fail the same way, after as long a compile)
    if oom:  # (outside the handler: its traceback no longer holds the step's tensors)
        cache = out = ids = None
        torch.cuda.empty_cache()
        free, total = torch.cuda.mem_get_info()
        print(f"batch {B}, context {args.context}: out of GPU memory, not timed ({free/2**30:.1f} of "
              f"{total/2**30:.1f} GiB free after it)", flush=True)
        rows.append((B, None, "out of memory"))
        continue
    med = statistics.median(times)
    rows.append((B, med, times))
    print(f"batch {B}, context {args.context}: median decode step {med:.2f} ms over {len(times)} steps ({', '.join(f'{t:.2f}' for t in times)})", flush=True)
    del cache, out
    torch.cuda.empty_cache()
print(f"peer summary ({mode}, experts {experts}, ms per decode step): " + ", ".join(f"batch {b}: " + (f"{m:.2f}" if m is not None else t) for b, m, t in rows), flush=True)
if args.compile:
    sys.stdout.flush()
    os._exit(0)  # (not the interpreter's shutdown, which waited on the compiler's workers)
