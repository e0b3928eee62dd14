#!/usr/bin/env python3
"""PEFT + transformers training the adapter Kiln trains, for tools/bench/lora.sh.

Why it exists
-------------
To say whether Kiln's LoRA is faster than "just using PEFT", the same fine-tune has to run in
PEFT: the same base (a Hugging Face folder `kiln export` wrote), the same adapter (rank, alpha,
targets, dropout, and the same initial A and B: this script writes them, and Kiln starts from
them through adapter.init_from), the same data windows (token shards read as
core/data/token_loader.cpp reads them: tools/bench/pytorch_reference.py's TokenLoader), the same
step (core/train/trainer.cpp: loss / accum per micro-step, clip_grad_norm_, AdamW with decay on
2-D+ parameters only, the cosine lr set before every step: pytorch_reference.py's) and the same
threads and seed. It reads every setting from the resolved config `kiln config EXP --set ...`
prints, so both sides read one file.

How to run it (tools/bench/lora.sh does), with .venv/'s Python (tools/setup.sh --tests):

    build/kiln config EXP --set ... >resolved.toml
    .venv/bin/python tools/bench/lora_peft.py init resolved.toml ADAPTER_DIR
    build/kiln run EXP --set ... --set adapter.init_from=ADAPTER_DIR     # Kiln's side
    .venv/bin/python tools/bench/lora_peft.py train resolved.toml ADAPTER_DIR --warmup 3

`init`: the base from model.init_from with transformers, PEFT's LoraConfig(r = adapter.rank,
lora_alpha = adapter.alpha, target_modules = adapter.targets, lora_dropout = adapter.dropout,
use_rslora = adapter.rslora) and PEFT's own initialisation (A Kaiming-uniform, B zero) after
torch.manual_seed(run.seed), saved with save_pretrained to ADAPTER_DIR.

`train`: that adapter (PeftModel.from_pretrained, trainable) trained train.steps steps. Each step
prints "step N | loss L | lr R | norm G | T ms"; the last line is
    peft: mean step ms X, tokens/s Y over N timed steps (after W warm-up)
with the first W steps (allocator and thread-pool warm-up) left out of the mean.
"""

import argparse
import os
import sys
import time
import warnings

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_reference import Cosine, TokenLoader, clip_gradients, fail, make_adamw  # noqa: E402

try:
    import tomllib
except ImportError:  # Python < 3.11
    import tomli as tomllib


def read_config(path):
    with open(path, "rb") as f:
        config = tomllib.load(f)
    wanted = {"data.type": ["shards"], "optimizer.type": ["adamw"], "schedule.type": ["cosine"],
              "precision.type": ["fp32"], "parallel.type": ["single"], "adapter.type": ["lora"],
              "adapter.base_dtype": ["fp32"], "schedule.total_steps": [0]}
    for key, allowed in wanted.items():
        section, name = key.split(".")
        if config[section][name] not in allowed:
            fail(f"{key} = {config[section][name]!r}: this script does only {allowed}")
    return config


def lora_config(adapter):
    from peft import LoraConfig

    targets = adapter["targets"]
    if targets != "all-linear":
        targets = [t.strip() for t in targets.split(",")]
    return LoraConfig(r=int(adapter["rank"]), lora_alpha=float(adapter["alpha"]),
                      target_modules=targets, lora_dropout=float(adapter["dropout"]),
                      use_rslora=bool(adapter["rslora"]), bias="none",
                      init_lora_weights=True if adapter["init"] == "kaiming" else "gaussian")


def load_base(config):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(config["model"]["init_from"],
                                                dtype=torch.float32)


def main():
    parser = argparse.ArgumentParser(description="PEFT's side of tools/bench/lora.sh")
    parser.add_argument("what", choices=["init", "train"])
    parser.add_argument("config", help="`kiln config EXP --set ...`'s output")
    parser.add_argument("adapter", help="the adapter folder: written by init, read by train")
    parser.add_argument("--warmup", type=int, default=3,
                        help="first steps left out of the mean step time (default 3)")
    args = parser.parse_args()
    warnings.filterwarnings("ignore", category=FutureWarning)  # transformers' deprecation notes
    config = read_config(args.config)
    run, train, model_section = config["run"], config["train"], config["model"]
    threads = run["threads"] if run["threads"] > 0 else (os.cpu_count() or 1)
    torch.set_num_threads(threads)
    torch.manual_seed(run["seed"])

    if args.what == "init":
        from peft import get_peft_model

        model = get_peft_model(load_base(config), lora_config(config["adapter"]))
        model.save_pretrained(args.adapter)
        trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
        print(f"peft: adapter of {trainable} parameters written to {args.adapter}")
        return

    from peft import PeftModel

    model = PeftModel.from_pretrained(load_base(config), args.adapter, is_trainable=True)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    steps, micro_batch, seq_len = train["steps"], train["micro_batch"], train["seq_len"]
    accum = max(1, train["batch_tokens"] // (micro_batch * seq_len))
    batch_tokens = accum * micro_batch * seq_len
    vocab = int(model_section["vocab_size"])
    optimizer = make_adamw(config["optimizer"], params)
    base_lr = float(config["optimizer"]["lr"])
    sched = config["schedule"]
    schedule = Cosine(base_lr, base_lr * float(sched["min_lr_ratio"]), sched["warmup"], steps)
    data = TokenLoader(config["data"]["train"], micro_batch, seq_len, vocab)
    import peft
    import transformers

    print(f"peft {peft.__version__}, transformers {transformers.__version__}, torch "
          f"{torch.__version__} | {sum(p.numel() for p in params)} trainable parameters | "
          f"{torch.get_num_threads()} threads | {batch_tokens} tokens a step | {steps} steps, "
          f"the first {args.warmup} untimed")
    timed = []
    for step in range(1, steps + 1):
        start = time.perf_counter()
        lr = schedule.lr(step - 1)
        for group in optimizer.param_groups:
            group["lr"] = lr
        optimizer.zero_grad(set_to_none=True)
        loss_sum = torch.zeros(())
        for _ in range(accum):
            inputs, targets = data.next()
            logits = model(input_ids=inputs, use_cache=False).logits
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1))[:, :vocab].float(),
                                   targets.reshape(-1)) / float(accum)
            loss_sum += loss.detach()
            loss.backward()
        norm = clip_gradients(params, float(train["grad_clip"]))
        optimizer.step()
        loss_value, norm_value = torch.stack([loss_sum, norm.to(loss_sum.dtype)]).double().tolist()
        ms = (time.perf_counter() - start) * 1000.0
        if step > args.warmup:
            timed.append(ms)
        print(f"step {step} | loss {loss_value:.6f} | lr {lr:.6e} | norm {norm_value:.6f} | "
              f"{ms:.1f} ms", flush=True)
    mean_ms = sum(timed) / len(timed)
    print(f"peft: mean step ms {mean_ms:.1f}, tokens/s {batch_tokens / (mean_ms / 1000.0):.0f} "
          f"over {len(timed)} timed steps (after {args.warmup} warm-up)")


if __name__ == "__main__":
    main()
