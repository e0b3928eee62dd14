#!/usr/bin/env python3
"""PyTorch reference for Kiln's training loop: the same work in Python, for speed comparisons.

Why it exists
-------------
Kiln trains in C++ on LibTorch. To say whether that is faster than "just using PyTorch", we need
a Python program that does exactly the same work as `build/kiln run EXPERIMENT.toml`: the same
GPT-2 model (plugins/gpt/model_gpt.cpp), attention as scaled_dot_product_attention (causal), the
same data windows (core/data/token_loader.cpp), the same step (core/train/trainer.cpp: gradient
accumulation with loss / accum, clipping as clip_grad_norm_, AdamW with decay on 2-D+ parameters
only, cosine lr set every step) and the same threads and seed (core/train/assemble.cpp). Only the
language around the LibTorch kernels differs, so the step times can be compared. It runs on the
PyTorch that Kiln is built on: the PyTorch 2.15 wheel in .venv/ (tools/setup.sh), whose libtorch
build/kiln links.

Even the initialisation matches: modules are built and parameters initialised in the same order
as the C++ model, so both programs draw the same numbers from the same seeded CPU generator.

`--compile` wraps the model in torch.compile (Inductor; on the CPU its C++ backend, which needs
a C++ compiler such as g++; the compilation falls in the first, untimed steps), the reference
Kiln has to beat on speed; `--set optimizer.fused=true` uses PyTorch's fused AdamW, as kiln's option of that name.

It supports what the comparison needs: model "gpt", optimizer "adamw", schedule "cosine",
precision "fp32", "bf16" (autocast over forward and loss, as plugins/precision_bf16.cpp) or
"tf32" (CUDA), parallel "single", data "shards" in llm.c's format, on the CPU or one CUDA device
(run.device as kiln: "auto" takes CUDA when there is one). Anything else is refused with a
message rather than silently run differently.

How to run it
-------------
Use .venv/'s Python explicitly (the system's python3 has no torch):

    .venv/bin/python tools/bench/pytorch_reference.py experiments/kjv_char.toml --steps 35 --warmup 5

and compare with

    build/kiln run experiments/kjv_char.toml --set train.steps=30 --set eval.every=0 \
        --set checkpoint.every=0 --name NAME

or `build/kiln bench experiments/kjv_char.toml --steps 30 --warmup 5` (the same 30 timed steps).

`--steps N` is the same as `--set train.steps=N` (the cosine schedule then ends at step N, as in
kiln); `--warmup W` leaves the first W steps out of the mean step time (allocator and thread-pool
warm-up). `--set section.key=value` overrides a key of the file as kiln's --set does; the value
is read as TOML, or as a bare string when it is not a TOML value.

Each step prints a line like kiln's; the last line is
    pytorch: mean step ms X, tokens/s Y over N timed steps (after W warm-up)
"""

import argparse
import contextlib
import glob
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

try:
    import tomllib  # Python >= 3.11

    def parse_toml(text):
        return tomllib.loads(text)

    TomlError = tomllib.TOMLDecodeError
except ImportError:  # Debian's python3-toml on older Pythons
    import toml

    def parse_toml(text):
        return toml.loads(text)

    TomlError = toml.TomlDecodeError


# --------------------------------------------------------------------------------------------
# Configuration: the experiment file, kiln's defaults for the keys used here, --set overrides.
# --------------------------------------------------------------------------------------------

# Defaults as declared in core/config/schema.cpp and the plugins' registrations.
DEFAULTS = {
    "run": {"seed": 1337, "threads": 0, "device": "auto"},
    "model": {"type": "gpt", "n_layer": 12, "n_head": 12, "n_embd": 768, "block_size": 1024,
              "vocab_size": 50257, "vocab_multiple": 1, "dropout": 0.0, "bias": True,
              "init_from": ""},
    "data": {"type": "shards", "train": "", "format": "auto"},
    "train": {"steps": 1000, "micro_batch": 8, "seq_len": 256, "batch_tokens": 0,
              "grad_clip": 1.0},
    "optimizer": {"type": "adamw", "lr": 6e-4, "beta1": 0.9, "beta2": 0.95, "eps": 1e-8,
                  "weight_decay": 0.1, "fused": False},
    "schedule": {"type": "cosine", "warmup": 0, "min_lr_ratio": 0.1},
    "precision": {"type": "fp32"},
    "parallel": {"type": "single"},
}

# What this reference implements; anything else would not be the same work as kiln's.
SUPPORTED = {
    "model.type": ["gpt"],
    "optimizer.type": ["adamw"],
    "schedule.type": ["cosine"],
    "precision.type": ["fp32", "bf16", "tf32"],
    "parallel.type": ["single"],
    "data.type": ["shards"],
    "data.format": ["auto", "llmc"],
    "run.device": ["auto", "cpu", "cuda"],
    "model.init_from": [""],
}


def fail(message):
    print(f"pytorch_reference: error: {message}", file=sys.stderr)
    sys.exit(2)


def apply_override(root, assignment):
    """--set section.key=value, as kiln: the value is TOML, or the bare text when not TOML."""
    path, eq, text = assignment.partition("=")
    parts = path.split(".")
    if not eq or len(parts) != 2 or not all(parts):
        fail(f"--set {assignment}: expected section.key=value, e.g. --set optimizer.lr=3e-3")
    try:
        value = parse_toml("v = " + text)["v"]
    except TomlError:
        value = text
    section = root.setdefault(parts[0], {})
    if not isinstance(section, dict):
        fail(f"--set {assignment}: '{parts[0]}' is not a section")
    section[parts[1]] = value


def load_config(path, overrides):
    try:
        with open(path, "r", encoding="utf-8") as f:
            root = parse_toml(f.read())
    except OSError as e:
        fail(f"cannot read {path}: {e}")
    except TomlError as e:
        fail(f"{path}: {e}")
    for assignment in overrides:
        apply_override(root, assignment)
    config = {}
    for name, defaults in DEFAULTS.items():
        section = dict(defaults)
        section.update(root.get(name, {}))
        config[name] = section
    for key, allowed in SUPPORTED.items():
        section, name = key.split(".")
        if config[section][name] not in allowed:
            fail(f"{key} = {config[section][name]!r} is not supported by this reference "
                 f"(only {allowed})")
    return config


# --------------------------------------------------------------------------------------------
# Data: llm.c shards, memory-mapped, read in sequential windows (core/data/token_loader.cpp).
# --------------------------------------------------------------------------------------------

SHARD_MAGIC = 20240520
SHARD_TOKEN_TYPES = {1: "<u2", 2: "<u4"}  # version -> token type (2: vocabularies beyond 65,536)
SHARD_HEADER_INTS = 256


def open_shard(path):
    """The tokens of an llm.c shard: 256 int32 header (magic, version, count), then uint16
    (version 1) or uint32 (version 2) tokens."""
    header = np.fromfile(path, dtype="<i4", count=SHARD_HEADER_INTS)
    if (len(header) != SHARD_HEADER_INTS or header[0] != SHARD_MAGIC
            or int(header[1]) not in SHARD_TOKEN_TYPES):
        fail(f"'{path}' is not an llm.c token shard (magic {SHARD_MAGIC}, version 1 or 2)")
    token_type = SHARD_TOKEN_TYPES[int(header[1])]
    count = int(header[2])
    expected = SHARD_HEADER_INTS * 4 + np.dtype(token_type).itemsize * count
    if os.path.getsize(path) != expected:
        fail(f"'{path}' holds {os.path.getsize(path)} bytes, its header says {expected}")
    return np.memmap(path, dtype=token_type, mode="r", offset=SHARD_HEADER_INTS * 4,
                     shape=(count,))


class TokenLoader:
    """Windows of micro_batch x seq_len + 1 tokens, one after the other, shard after shard.

    Single rank: the stride between windows is the window itself. A shard is left when the
    next window (plus the one target token past it) would not fit, as in kiln.
    """

    def __init__(self, pattern, micro_batch, seq_len, vocab_limit):
        files = sorted(glob.glob(pattern))
        if not files:
            fail(f"data.train = '{pattern}' matches no file")
        self.rows, self.cols = micro_batch, seq_len
        self.window = micro_batch * seq_len
        self.stride = self.window
        self.shards = [open_shard(f) for f in files]
        for f, s in zip(files, self.shards):
            if len(s) < self.stride + 1:
                fail(f"'{f}' holds {len(s)} tokens, fewer than one window needs")
            top = int(s.max())  # once per shard, as kiln's vocabulary check
            if top >= vocab_limit:
                fail(f"'{f}' holds token id {top}, the model's vocabulary has {vocab_limit}")
        self.files = files
        self.shard = 0
        self.offset = 0

    def next(self):
        tokens = self.shards[self.shard]
        buf = torch.from_numpy(tokens[self.offset:self.offset + self.window + 1].astype(np.int64))
        inputs = buf[:-1].view(self.rows, self.cols)
        targets = buf[1:].view(self.rows, self.cols)
        self.offset += self.stride
        if self.offset + self.stride + 1 > len(tokens):
            self.offset = 0
            self.shard = (self.shard + 1) % len(self.shards)
        return inputs, targets


# --------------------------------------------------------------------------------------------
# Model: GPT-2 as plugins/gpt/model_gpt.cpp, with the same module and parameter names and order.
# --------------------------------------------------------------------------------------------

class LayerNorm(nn.Module):
    """LayerNorm with an optional bias (eps 1e-5), as the C++ model's own LayerNorm."""

    def __init__(self, dim, bias):
        super().__init__()
        self.dim = dim
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim)) if bias else None

    def forward(self, x):
        return F.layer_norm(x, (self.dim,), self.weight, self.bias, 1e-5)


class Embedding(nn.Module):
    def __init__(self, o):
        super().__init__()
        self.wte = nn.Embedding(o["padded_vocab"], o["n_embd"])
        self.wpe = nn.Embedding(o["block_size"], o["n_embd"])
        self.drop = nn.Dropout(o["dropout"])

    def forward(self, tokens):
        positions = torch.arange(tokens.size(1), dtype=tokens.dtype, device=tokens.device)
        return self.drop(self.wte(tokens) + self.wpe(positions))


def causal_attention(q, k, v, dropout, training):
    """core/layers/fused_attention.cpp causal_self_attention: scaled_dot_product_attention, causal."""
    p = dropout if training else 0.0
    return F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)


class Block(nn.Module):
    def __init__(self, o):
        super().__init__()
        c, bias = o["n_embd"], o["bias"]
        self.n_head = o["n_head"]
        self.dropout = o["dropout"]
        # Built in the C++ constructor's order, so the default inits draw the same numbers.
        self.ln_1 = LayerNorm(c, bias)
        self.c_attn = nn.Linear(c, 3 * c, bias=bias)
        self.attn_proj = nn.Linear(c, c, bias=bias)
        self.ln_2 = LayerNorm(c, bias)
        self.c_fc = nn.Linear(c, 4 * c, bias=bias)
        self.mlp_proj = nn.Linear(4 * c, c, bias=bias)
        self.resid_drop = nn.Dropout(o["dropout"])

    def attention(self, x):
        b, t, c = x.shape

        def heads(m):  # [b, heads, t, head_dim]
            return m.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)

        q, k, v = self.c_attn(x).split(c, 2)
        y = causal_attention(heads(q), heads(k), heads(v), self.dropout, self.training)
        return self.attn_proj(y.transpose(1, 2).contiguous().view(b, t, c))

    def forward(self, x):
        h = x + self.resid_drop(self.attention(self.ln_1(x)))
        return h + self.resid_drop(self.mlp_proj(F.gelu(self.c_fc(self.ln_2(h)),
                                                        approximate="tanh")))


class Head(nn.Module):
    """Final LayerNorm and the tied output projection (the token embedding's weight, which is
    registered under the embedding only)."""

    def __init__(self, o):
        super().__init__()
        self.ln_f = LayerNorm(o["n_embd"], o["bias"])

    def forward(self, x, wte_weight):
        return F.linear(self.ln_f(x), wte_weight)


class Gpt(nn.Module):
    def __init__(self, o):
        super().__init__()
        self.o = o
        self.embedding = Embedding(o)
        self.h = nn.ModuleList([Block(o) for _ in range(o["n_layer"])])
        self.head = Head(o)
        self.initialise()

    def initialise(self):
        """GPT-2's: N(0, 0.02), residual projections N(0, 0.02 / sqrt(2 n_layer)), zero biases,
        LayerNorms left at ones and zeros. Same parameter order as the C++ model."""
        residual_std = 0.02 / math.sqrt(2.0 * self.o["n_layer"])
        with torch.no_grad():
            for name, p in self.named_parameters():
                if "ln_" in name:
                    continue
                if p.dim() == 1:
                    p.zero_()
                else:
                    residual = "attn_proj.weight" in name or "mlp_proj.weight" in name
                    p.normal_(0.0, residual_std if residual else 0.02)

    def forward(self, tokens):
        x = self.embedding(tokens)
        for block in self.h:
            x = block(x)
        return self.head(x, self.embedding.wte.weight)


def model_options(m):
    if m["n_embd"] % m["n_head"] != 0:
        fail(f"model.n_embd = {m['n_embd']} is not divisible by model.n_head = {m['n_head']}")
    multiple = m["vocab_multiple"]
    return {
        "n_layer": m["n_layer"], "n_head": m["n_head"], "n_embd": m["n_embd"],
        "block_size": m["block_size"], "vocab_size": m["vocab_size"],
        "padded_vocab": (m["vocab_size"] + multiple - 1) // multiple * multiple,
        "dropout": float(m["dropout"]), "bias": bool(m["bias"]),
    }


# --------------------------------------------------------------------------------------------
# Schedule and optimizer (plugins/schedule_cosine.cpp, plugins/optimizer_adamw.cpp).
# --------------------------------------------------------------------------------------------

class Cosine:
    """Linear warmup to max_lr, half a cosine down to min_lr at the last step, then min_lr."""

    def __init__(self, max_lr, min_lr, warmup, decay_end):
        self.max_lr, self.min_lr, self.warmup, self.decay_end = max_lr, min_lr, warmup, decay_end

    def lr(self, step):  # 0-based index of the update (kiln's db step is step + 1)
        if step < self.warmup:
            return self.max_lr * (step + 1) / self.warmup
        if step > self.decay_end:
            return self.min_lr
        progress = (step - self.warmup) / (self.decay_end - self.warmup)
        coeff = 0.5 * (1.0 + math.cos(math.pi * progress))  # 1 -> 0
        return self.min_lr + coeff * (self.max_lr - self.min_lr)


def make_adamw(o, params):
    """Decay on parameters of 2+ dimensions only: two groups, as kiln's adamw plugin. Unfused,
    PyTorch's AdamW on the CPU runs its per-parameter loop (foreach=False), as LibTorch's AdamW."""
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    groups = []
    if decay:
        groups.append({"params": decay, "weight_decay": float(o["weight_decay"])})
    if no_decay:
        groups.append({"params": no_decay, "weight_decay": 0.0})
    fused = {"fused": True} if o["fused"] else {}
    return torch.optim.AdamW(groups, lr=float(o["lr"]), betas=(float(o["beta1"]),
                             float(o["beta2"])), eps=float(o["eps"]), weight_decay=0.0, **fused)


# --------------------------------------------------------------------------------------------
# The step (core/train/trainer.cpp Trainer::train_step).
# --------------------------------------------------------------------------------------------

def loss_of(model, vocab, inputs, targets, autocast):
    """Forward and loss, under autocast for bf16 (core/train/trainer.cpp forward_loss)."""
    with autocast():
        logits = model(inputs)
        if logits.size(-1) != vocab:
            logits = logits.narrow(-1, 0, vocab)  # padded vocabulary
        return F.cross_entropy(logits.reshape(-1, vocab).float(), targets.reshape(-1))


def pick_device(wanted):
    """core/train/assemble.cpp pick_device: "auto" is CUDA when this PyTorch sees a device."""
    have_cuda = torch.cuda.is_available()
    if wanted == "cuda" and not have_cuda:
        fail('run.device = "cuda" but this PyTorch sees no CUDA device: use "cpu" or "auto"')
    return torch.device("cuda" if wanted == "cuda" or (wanted == "auto" and have_cuda) else "cpu")


def precision_context(kind, device):
    """The precision plugins: bf16 autocasts forward and loss; tf32 lets CUDA matmuls and
    convolutions use TF32 (plugins/precision_tf32.cpp); fp32 changes nothing."""
    if kind == "tf32":
        if device.type != "cuda":
            fail('precision tf32 is a CUDA tensor-core mode: use precision.type = "fp32" on the CPU')
        torch.set_float32_matmul_precision("high")
        torch.backends.cudnn.allow_tf32 = True
    if kind == "bf16":
        return lambda: torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext


def clip_gradients(params, max_norm):
    """The global L2 norm before clipping; scales the gradients as clip_grad_norm_ when
    max_norm > 0 (kiln computes the norm even when it does not clip)."""
    if max_norm > 0:
        return torch.nn.utils.clip_grad_norm_(params, max_norm)
    norms = [p.grad.detach().norm(2) for p in params if p.grad is not None]
    return torch.stack(norms).norm(2) if norms else torch.zeros(())


def main():
    parser = argparse.ArgumentParser(
        description="Kiln's training loop in PyTorch, for speed comparisons with build/kiln.")
    parser.add_argument("experiment", help="experiment TOML, e.g. experiments/kjv_char.toml")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="SECTION.KEY=VALUE", help="override a key, as kiln's --set")
    parser.add_argument("--steps", type=int, help="optimizer steps (= --set train.steps=N)")
    parser.add_argument("--warmup", type=int, default=5,
                        help="first steps left out of the mean step time (default 5)")
    parser.add_argument("--compile", action="store_true",
                        help="torch.compile the model (Inductor; compiles in the first steps)")
    parser.add_argument("--profile", action="store_true",
                        help="run the timed steps under the autograd profiler and print the time "
                             "per op (the same LibTorch kernels kiln runs; docs/benchmarks.md)")
    args = parser.parse_args()
    if args.steps is not None:
        args.overrides.append(f"train.steps={args.steps}")
    config = load_config(args.experiment, args.overrides)

    run, train = config["run"], config["train"]
    steps, micro_batch, seq_len = train["steps"], train["micro_batch"], train["seq_len"]
    if steps < 1:
        fail("train.steps must be >= 1")
    if not 0 <= args.warmup < steps:
        fail(f"--warmup {args.warmup} must be at least 0 and below train.steps = {steps}")

    # core/train/assemble.cpp: threads (0 = all cores, as std::thread::hardware_concurrency), seed.
    threads = run["threads"] if run["threads"] > 0 else (os.cpu_count() or 1)
    torch.set_num_threads(threads)
    torch.manual_seed(run["seed"])

    per_micro_step = micro_batch * seq_len
    if train["batch_tokens"] == 0:
        accum = 1
    elif train["batch_tokens"] % per_micro_step != 0:
        fail(f"train.batch_tokens = {train['batch_tokens']} is not a multiple of "
             f"micro_batch x seq_len = {per_micro_step}")
    else:
        accum = train["batch_tokens"] // per_micro_step
    batch_tokens = accum * per_micro_step

    device = pick_device(run["device"])
    autocast = precision_context(config["precision"]["type"], device)
    o = model_options(config["model"])
    model = Gpt(o).to(device)
    if seq_len > o["block_size"]:
        fail(f"train.seq_len = {seq_len} is longer than model.block_size = {o['block_size']}")
    params = list(model.parameters())
    optimizer = make_adamw(config["optimizer"], params)
    if args.compile:
        model = torch.compile(model)
    sched = config["schedule"]
    if sched["warmup"] >= steps:
        fail(f"schedule.warmup = {sched['warmup']} must be smaller than train.steps = {steps}")
    base_lr = float(config["optimizer"]["lr"])
    schedule = Cosine(base_lr, base_lr * float(sched["min_lr_ratio"]), sched["warmup"], steps)
    data = TokenLoader(config["data"]["train"], micro_batch, seq_len, o["vocab_size"])

    print(f"pytorch {torch.__version__}{' (torch.compile)' if args.compile else ''} | model gpt: {sum(p.numel() for p in params) / 1e6:.2f}M "
          f"parameters, context {o['block_size']} | {device} | {torch.get_num_threads()} threads | "
          f"precision {config['precision']['type']}")
    print(f"data: {sum(len(s) for s in data.shards)} tokens in {len(data.shards)} shard(s) "
          f"matching {config['data']['train']}")
    print(f"batch: {batch_tokens} tokens per step = micro_batch {micro_batch} x seq_len "
          f"{seq_len} x {accum} micro-steps | {steps} steps, the first {args.warmup} untimed")

    model.train()
    timed_ms = []
    profiler = torch.autograd.profiler.profile() if args.profile else None
    width = len(str(steps))
    for step in range(1, steps + 1):
        if profiler is not None and step == args.warmup + 1:
            profiler.__enter__()
        start = time.perf_counter()
        lr = schedule.lr(step - 1)
        for group in optimizer.param_groups:
            group["lr"] = lr
        optimizer.zero_grad(set_to_none=True)  # as LibTorch's zero_grad: it frees the gradients

        loss_sum = torch.zeros((), device=device)
        for _ in range(accum):
            # Page-locked for a CUDA device, as kiln's batch buffers, so the copies are async.
            inputs, targets = (t.pin_memory().to(device, non_blocking=True) if device.type ==
                               "cuda" else t for t in data.next())
            # Each micro-batch's mean loss over accum: the summed gradients are one big batch's.
            loss = loss_of(model, o["vocab_size"], inputs, targets, autocast) / float(accum)
            loss_sum += loss.detach()
            loss.backward()
        norm = clip_gradients(params, float(train["grad_clip"]))
        optimizer.step()
        loss_value, norm_value = torch.stack([loss_sum, norm.to(loss_sum.dtype)]).double().tolist()
        dt_ms = (time.perf_counter() - start) * 1000.0

        if step > args.warmup:
            timed_ms.append(dt_ms)
        print(f"step {step:>{width}}/{steps} | loss {loss_value:.6f} | lr {lr:.3e} | "
              f"norm {norm_value:.4f} | {dt_ms:7.1f} ms | {batch_tokens / (dt_ms / 1000.0):8.0f} "
              f"tok/s", flush=True)

    if profiler is not None:
        profiler.__exit__(None, None, None)
        # Self time per op, per step: where the step goes once each op's children are taken out.
        print(profiler.key_averages().table(sort_by="self_cpu_time_total", row_limit=60))
    mean_ms = sum(timed_ms) / len(timed_ms)
    print(f"pytorch: mean step ms {mean_ms:.1f}, tokens/s {batch_tokens / (mean_ms / 1000.0):.0f} "
          f"over {len(timed_ms)} timed steps (after {args.warmup} warm-up)")


if __name__ == "__main__":
    main()
