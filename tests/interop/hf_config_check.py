"""Kiln's log-likelihoods of a choice task on a model directory, against transformers' own.

Run by tools/interop.sh, in .venv/:
    hf_config_check.py MODEL_DIR DETAILS_JSONL
DETAILS_JSONL is what `kiln eval --hf MODEL_DIR --task ... --details` wrote: per item, the
context's token ids, each continuation's, and Kiln's log-likelihood of each continuation. Here
AutoModelForCausalLM.from_pretrained(MODEL_DIR), in float32, scores the same ids: the sum of the
continuation's log-softmax at each of its positions. Every one must equal Kiln's within 1e-4.
Prints one line; exits 1 at the first difference.
"""
import json
import sys

import torch
from transformers import AutoModelForCausalLM

model_dir, details = sys.argv[1:3]
model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
worst, count = 0.0, 0
for line in open(details, encoding="utf-8"):
    item = json.loads(line)
    context = item["context"]
    for continuation, kiln in zip(item["continuations"], item["loglik"]):
        ids = context + continuation
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0]
        logp = torch.log_softmax(logits.double(), dim=-1)
        ours = sum(logp[i - 1, ids[i]].item() for i in range(len(context), len(ids)))
        worst, count = max(worst, abs(ours - kiln)), count + 1
        if abs(ours - kiln) > 1e-4:
            print(f"FAIL: item {item['item']}, continuation {continuation}: kiln {kiln:.6f}, "
                  f"transformers {ours:.6f}")
            sys.exit(1)
print(f"ok: {count} log-likelihoods equal transformers' (worst difference {worst:.2e})")
