"""A LoRA run's exports, opened by transformers, as a user opens them next.

Run in the sid chroot (tools/interop.sh) against files the host's kiln wrote:
    lora_check.py BASE_DIR ADAPTER_DIR MERGED_DIR DATA_DIR LOGITS MICRO_BATCH SEQ_LEN

BASE_DIR is the Hugging Face folder the run started from (model.init_from), ADAPTER_DIR what
`kiln export` wrote for the run (PEFT's adapter folder), MERGED_DIR what `kiln export --merge`
wrote, LOGITS the logits `kiln eval --logits` computed with the adapted model on the validation
shard's first window. PEFT itself is not packaged in Debian; this applies the adapter as PEFT's
LoraModel does, written from PEFT's documented format and its tuners/lora/layer.py:
  - adapter_config.json holds LoraConfig's fields (peft_type LORA, task_type CAUSAL_LM, r,
    lora_alpha, target_modules, fan_in_fan_out, use_rslora, bias "none");
  - every tensor is named base_model.model.<module>.lora_A.weight / .lora_B.weight, <module> a
    module of the base model that target_modules names (equal, or ending in "." + a target),
    every such linear module has both, A is [r, in] and B [out, r];
  - the base's weights plus scaling * B @ A (scaling = lora_alpha / r, or / sqrt(r) with
    use_rslora; transposed for fan_in_fan_out, GPT-2's Conv1D) give logits equal to Kiln's
    adapted model's within 1e-5;
  - the merged folder loads with no missing, unexpected or mismatched key, and its logits equal
    Kiln's within 1e-5.
Prints one line per check; exits 1 at the first that fails.
"""
import glob
import json
import math
import os
import sys

import numpy as np
import safetensors.torch
import torch
from transformers import AutoModelForCausalLM
from transformers.pytorch_utils import Conv1D

base_dir, adapter_dir, merged_dir, data_dir, logits_file = sys.argv[1:6]
micro_batch, seq_len = int(sys.argv[6]), int(sys.argv[7])


def fail(why):
    print(f"FAIL: {why}")
    sys.exit(1)


def load(path):
    model, info = AutoModelForCausalLM.from_pretrained(path, output_loading_info=True,
                                                       dtype=torch.float32)
    for kind in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs"):
        if info.get(kind):
            fail(f"from_pretrained({path}) reports {kind}: {info[kind]}")
    return model.eval()


shards = sorted(glob.glob(os.path.join(data_dir, "val_*.bin")))
tokens = np.concatenate([np.fromfile(f, dtype=np.uint16, offset=1024) for f in shards])
window = torch.from_numpy(tokens[:micro_batch * seq_len].astype(np.int64)).view(micro_batch,
                                                                                seq_len)
kiln_logits = torch.from_numpy(np.load(logits_file))


def compare(model, what):
    with torch.no_grad():
        logits = model(window).logits
    if logits.shape != kiln_logits.shape:
        fail(f"{what}: logits {tuple(logits.shape)}, kiln's {tuple(kiln_logits.shape)}")
    worst = (logits - kiln_logits).abs().max().item()
    if worst > 1e-5:
        fail(f"{what}: logits differ from kiln's adapted model's by up to {worst:.3g}")
    print(f"ok: {what}: logits of the first window {tuple(logits.shape)} within {worst:.2g}")


config = json.load(open(os.path.join(adapter_dir, "adapter_config.json")))
for key, kind in (("peft_type", str), ("task_type", str), ("r", int), ("lora_alpha", (int, float)),
                  ("target_modules", list), ("fan_in_fan_out", bool), ("use_rslora", bool),
                  ("bias", str), ("lora_dropout", (int, float)),
                  ("base_model_name_or_path", str)):
    if not isinstance(config.get(key), kind):
        fail(f"adapter_config.json: {key} is {config.get(key)!r}")
if (config["peft_type"], config["task_type"], config["bias"]) != ("LORA", "CAUSAL_LM", "none"):
    fail(f"adapter_config.json: {config['peft_type']}, {config['task_type']}, {config['bias']}")
r = config["r"]
scaling = config["lora_alpha"] / (math.sqrt(r) if config["use_rslora"] else r)
print(f"ok: adapter_config.json: r {r}, lora_alpha {config['lora_alpha']}, targets "
      f"{config['target_modules']}, fan_in_fan_out {config['fan_in_fan_out']}")

base = load(base_dir)
with torch.no_grad():
    moved = (base(window).logits - kiln_logits).abs().max().item()
if moved < 1e-3:
    fail(f"the base alone gives kiln's adapted logits within {moved:.3g}: the adapter changed "
         f"nothing, so nothing below would be checked")
print(f"ok: the adapter moves the base's logits by up to {moved:.3g}")
weights = safetensors.torch.load_file(os.path.join(adapter_dir, "adapter_model.safetensors"))
targets = config["target_modules"]
named = dict(base.named_modules())
expected = {name for name, m in named.items()
            if isinstance(m, (torch.nn.Linear, Conv1D)) and name != "lm_head" and
            any(name == t or name.endswith("." + t) for t in targets)}
found = set()
prefix = "base_model.model."
for key in weights:
    if not key.startswith(prefix) or not key.endswith((".lora_A.weight", ".lora_B.weight")):
        fail(f"adapter_model.safetensors: {key} is not a PEFT LoRA tensor name")
    found.add(key[len(prefix):-len(".lora_A.weight")])
if found != expected:
    fail(f"adapted modules {sorted(found)}, target_modules names {sorted(expected)}")
with torch.no_grad():
    for name in sorted(found):
        module = named[name]
        a, b = weights[f"{prefix}{name}.lora_A.weight"], weights[f"{prefix}{name}.lora_B.weight"]
        update = scaling * (b @ a)  # [out, in]
        if config["fan_in_fan_out"]:
            update = update.T  # Conv1D stores [in, out]
        if a.shape[0] != r or b.shape[1] != r or update.shape != module.weight.shape:
            fail(f"{name}: A {tuple(a.shape)}, B {tuple(b.shape)}, weight "
                 f"{tuple(module.weight.shape)}")
        module.weight += update
print(f"ok: {len(found)} modules adapted, each named as PEFT names them")
compare(base, "the base with PEFT's update applied here")
compare(load(merged_dir), "kiln export --merge")
