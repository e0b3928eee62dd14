"""A LoRA run's exports, opened as a user opens them next: the adapter by PEFT, the merged folder
by transformers.

Run by tools/interop.sh, in .venv/ against files the host's kiln wrote:
    lora_check.py BASE_DIR ADAPTER_DIR MERGED_DIR DATA_DIR LOGITS MICRO_BATCH SEQ_LEN

BASE_DIR is the Hugging Face folder the run started from (model.init_from), ADAPTER_DIR what
`kiln export` wrote for the run (PEFT's adapter folder), MERGED_DIR what `kiln export --merge`
wrote, LOGITS the logits `kiln eval --logits` computed with the adapted model on the validation
shard's first window. Checks that
  - the base alone is more than 1e-3 from Kiln's adapted logits (else the checks below would
    pass for an adapter that changed nothing);
  - peft.PeftModel.from_pretrained(base, ADAPTER_DIR) opens the folder as a causal LM's LoRA
    adapter, and the LoRA tensors it then holds are the folder's, every one and no other (PEFT
    itself only warns of a missing or unexpected key);
  - that model's logits equal Kiln's within 1e-5;
  - the merged folder loads with no missing, unexpected or mismatched key, and its logits equal
    Kiln's within 1e-5.
Prints one line per check; exits 1 at the first that fails.
"""
import glob
import os
import sys

import numpy as np
import peft
import safetensors.torch
import torch
from transformers import AutoModelForCausalLM

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


def logits_of(model):
    with torch.no_grad():
        return model(window).logits


def compare(model, what):
    logits = logits_of(model)
    if logits.shape != kiln_logits.shape:
        fail(f"{what}: logits {tuple(logits.shape)}, kiln's {tuple(kiln_logits.shape)}")
    worst = (logits - kiln_logits).abs().max().item()
    if worst > 1e-5:
        fail(f"{what}: logits differ from kiln's adapted model's by up to {worst:.3g}")
    print(f"ok: {what}: logits of the first window {tuple(logits.shape)} within {worst:.2g}")


def check_loaded(model):
    """The folder's tensors are exactly the LoRA tensors PEFT put into the model."""
    if not isinstance(model, peft.PeftModelForCausalLM):
        fail(f"PeftModel.from_pretrained gave a {type(model).__name__}, not a causal LM's")
    config = model.peft_config["default"]
    if config.peft_type != peft.PeftType.LORA:
        fail(f"adapter_config.json: peft_type {config.peft_type}")
    held = peft.get_peft_model_state_dict(model)
    given = safetensors.torch.load_file(os.path.join(adapter_dir, "adapter_model.safetensors"))
    if held.keys() != given.keys():
        fail(f"PEFT holds {sorted(held.keys() - given.keys())}, which the folder lacks, and "
             f"left {sorted(given.keys() - held.keys())} of the folder's unread")
    for name, tensor in given.items():
        if not torch.equal(held[name], tensor):
            fail(f"{name}: PEFT holds another tensor than the folder's")
    print(f"ok: PEFT reads r {config.r}, lora_alpha {config.lora_alpha}, targets "
          f"{sorted(config.target_modules)}, fan_in_fan_out {config.fan_in_fan_out}, use_rslora "
          f"{config.use_rslora}; it holds the folder's {len(given)} tensors and no other")


base = load(base_dir)
moved = (logits_of(base) - kiln_logits).abs().max().item()
if moved < 1e-3:
    fail(f"the base alone gives kiln's adapted logits within {moved:.3g}: the adapter changed "
         f"nothing, so nothing below would be checked")
print(f"ok: the adapter moves the base's logits by up to {moved:.3g}")
adapted = peft.PeftModel.from_pretrained(base, adapter_dir).eval()
check_loaded(adapted)
compare(adapted, "PeftModel.from_pretrained(base, kiln export)")
compare(load(merged_dir), "kiln export --merge")
