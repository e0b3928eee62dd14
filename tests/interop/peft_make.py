"""A LoRA adapter folder that PEFT itself wrote, for Kiln to load through adapter.init_from.

Run by tools/interop.sh, in .venv/:
    peft_make.py BASE_DIR TOKENS TARGETS OUT
BASE_DIR is a Hugging Face folder (import_make.py's model/), TOKENS a shard in llm.c's format
(its tokens.bin), TARGETS PEFT's target_modules, comma-separated. The base, in fp32, is wrapped
by get_peft_model with LoraConfig(r=4, lora_alpha=8, use_rslora=True): scale 8 / sqrt(4) = 4,
where plain LoRA's would be 2, so a reader that ignores use_rslora is off by half the update.
PEFT starts every lora_B at zero, an adapter that changes nothing; here B is drawn as GPT-2's
weights are (normal, std 0.02), so the update is of the base's own size. Writes
  OUT/adapter/     save_pretrained: adapter_config.json and adapter_model.safetensors
  OUT/logits.npy   the adapted model's logits, float32 [4, 32, vocab], on the shard's first
                   4 x 32 tokens: the micro-batch `kiln eval --logits` computes on
  OUT/adapter_with_bias/  the same adapter saved with lora_bias=True (PEFT trains a bias beside
                   B), which Kiln's LoRA cannot hold and must refuse
Exits 1 when the adapter moves the base's logits by less than 1e-3, since then logits equal to
PEFT's would not tell a Kiln that loaded the folder from one that ignored it.
"""
import os
import sys

import numpy as np
import peft
import torch
from transformers import AutoModelForCausalLM

base_dir, tokens_file, targets, out = sys.argv[1:5]
micro_batch, seq_len = 4, 32
torch.manual_seed(4321)

tokens = np.fromfile(tokens_file, dtype=np.uint16, offset=1024)  # past llm.c's 256-int header
window = torch.from_numpy(tokens[:micro_batch * seq_len].astype(np.int64)).view(micro_batch,
                                                                                seq_len)
base = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32).eval()
with torch.no_grad():
    base_logits = base(window).logits

config = peft.LoraConfig(task_type="CAUSAL_LM", r=4, lora_alpha=8, use_rslora=True,
                         target_modules=targets.split(","), lora_dropout=0.0)
model = peft.get_peft_model(base, config).eval()
with torch.no_grad():
    adapted = [m for m in model.modules() if isinstance(m, peft.tuners.lora.LoraLayer)]
    for layer in adapted:
        torch.nn.init.normal_(layer.lora_B["default"].weight, std=0.02)
    logits = model(window).logits
model.save_pretrained(os.path.join(out, "adapter"))
np.save(os.path.join(out, "logits.npy"), logits.numpy().astype(np.float32))

moved = (logits - base_logits).abs().max().item()
if moved < 1e-3:
    print(f"FAIL: PEFT's adapter moves the base's logits by only {moved:.3g}")
    sys.exit(1)
with_bias = peft.LoraConfig(task_type="CAUSAL_LM", r=4, lora_alpha=8, use_rslora=True,
                            target_modules=targets.split(","), lora_dropout=0.0, lora_bias=True)
base = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
peft.get_peft_model(base, with_bias).save_pretrained(os.path.join(out, "adapter_with_bias"))
print(f"ok: PEFT wrote a LoRA adapter on {len(adapted)} modules ({targets}, rsLoRA); it moves "
      f"the base's logits by up to {moved:.3g}")
