"""Kiln's export opened by Hugging Face transformers, as a user opens it next.

Run by tools/interop.sh, in .venv/ against files the host's kiln wrote:
    export_check.py HF_DIR DATA_DIR KILN_LOSS SAMPLE_FILE PROMPT MICRO_BATCH SEQ_LEN LOGITS
                    GENERATED CORPUS [LOGITS_TOLERANCE]

Checks, each against what transformers computes itself:
  - AutoModelForCausalLM.from_pretrained loads every tensor: no missing, unexpected or
    mismatched key, and no warning logged while loading;
  - HF_DIR/tokenizer.json, opened by tokenizers' Tokenizer.from_file and by
    AutoTokenizer.from_pretrained(HF_DIR), encodes CORPUS (the one document `kiln prepare` made
    DATA_DIR's shards of) into the ids of the shards, and decodes them back to it;
  - bos/eos/pad in config.json and generation_config.json are the end-of-text id of the data's
    tokenizer (none for a character tokenizer);
  - the mean loss over the validation shard's windows, laid out as Kiln's loader lays them
    (llm.c's: consecutive windows of MICRO_BATCH x SEQ_LEN + 1 tokens), equals `kiln eval
    --data`'s within 1e-4, and the logits of its first window equal those `kiln eval --logits`
    wrote (LOGITS, a .npy file) within LOGITS_TOLERANCE (1e-4 unless given);
  - a greedy generate() of 32 tokens after PROMPT equals `kiln sample --temperature 0`;
  - greedy generate() of 32 tokens after each of 16 prompts, one at a time, gives the tokens
    Kiln generated for them in one left-padded batch with its key/value cache (GENERATED: the
    details of `kiln eval --task` on a generate task of those prompts), up to Kiln's stop at the
    end-of-text token.
Prints one line per check; exits 1 at the first that fails.
"""
import glob
import json
import logging
import os
import sys

import numpy as np
import torch
import transformers
from tokenizers import Tokenizer
from transformers import AutoModelForCausalLM, AutoTokenizer

hf_dir, data_dir, kiln_loss, sample_file, prompt = sys.argv[1:6]
micro_batch, seq_len, logits_file = int(sys.argv[6]), int(sys.argv[7]), sys.argv[8]
generated_file, corpus_file = sys.argv[9:11]
logits_tolerance = float(sys.argv[11]) if len(sys.argv) > 11 else 1e-4


def fail(why):
    print(f"FAIL: {why}")
    sys.exit(1)


class Recorder(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


recorder = Recorder()
transformers.logging.get_logger().addHandler(recorder)
model, info = AutoModelForCausalLM.from_pretrained(hf_dir, output_loading_info=True,
                                                   dtype=torch.float32)
model.eval()
for kind in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs"):
    if info.get(kind):
        fail(f"from_pretrained reports {kind}: {info[kind]}")
if recorder.lines:
    fail(f"from_pretrained warned: {recorder.lines}")
print(f"ok: {type(model).__name__} loads with no missing, unexpected or mismatched key")

tokenizer = json.load(open(os.path.join(data_dir, "tokenizer.json")))
if tokenizer["type"] == "char":
    expected = None
    table = tokenizer["bytes"]
    encode = lambda text: [table.index(b) for b in text.encode()]
    decode = lambda ids: bytes(table[i] for i in ids if i < len(table)).decode(errors="replace")
elif tokenizer["type"] == "gpt2":
    expected, encode, decode = 50256, None, None
else:
    fail(f"no check for tokenizer type {tokenizer['type']}")
# The shards in order (train, then validation, then test) hold the document's ids, after the
# end-of-text id that begins it where the tokenizer has one.
prepared = np.concatenate([np.fromfile(f, dtype=np.uint16, offset=1024)
                           for split in ("train", "val", "test")
                           for f in sorted(glob.glob(os.path.join(data_dir, f"{split}_*.bin")))])
prepared = prepared.tolist()[0 if expected is None else 1:]
corpus = open(corpus_file, encoding="utf-8").read()
from_file = Tokenizer.from_file(os.path.join(hf_dir, "tokenizer.json"))
auto = AutoTokenizer.from_pretrained(hf_dir)
for name, encode_with, decode_with in (
        ("Tokenizer.from_file", lambda text: from_file.encode(text, add_special_tokens=False).ids,
         from_file.decode),
        ("AutoTokenizer.from_pretrained",
         lambda text: auto(text, add_special_tokens=False).input_ids,
         lambda ids: auto.decode(ids, clean_up_tokenization_spaces=False))):
    ids = encode_with(corpus)
    if ids != prepared:
        at = next((i for i, (a, b) in enumerate(zip(ids, prepared)) if a != b),
                  min(len(ids), len(prepared)))
        fail(f"{name}: the export's tokenizer.json encodes the corpus into other ids than kiln "
             f"prepare's, from token {at} of {len(prepared)}")
    if decode_with(ids) != corpus:
        fail(f"{name}: the export's tokenizer.json decodes the ids to another text")
print(f"ok: the export's tokenizer.json encodes the corpus into kiln prepare's {len(prepared)} "
      f"ids and back, through Tokenizer.from_file and AutoTokenizer")
generation = json.load(open(os.path.join(hf_dir, "generation_config.json")))
for name in ("bos_token_id", "eos_token_id", "pad_token_id"):
    for where, value in (("config.json", getattr(model.config, name)),
                         ("generation_config.json", generation.get(name, "absent")),
                         ("the model's generation config",
                          getattr(model.generation_config, name))):
        if value != expected:
            fail(f"{name} in {where} is {value}, the data's tokenizer says {expected}")
print(f"ok: bos/eos/pad ids are {expected} in config.json and generation_config.json")

# The validation shard: llm.c's format, a 256-int32 header then uint16 ids.
shards = sorted(glob.glob(os.path.join(data_dir, "val_*.bin")))
tokens = np.concatenate([np.fromfile(f, dtype=np.uint16, offset=1024) for f in shards])
window = micro_batch * seq_len
losses = []
with torch.no_grad():
    for start in range(0, (len(tokens) - 1) // window * window, window):
        buf = torch.from_numpy(tokens[start:start + window + 1].astype(np.int64))
        x, y = buf[:-1].view(micro_batch, seq_len), buf[1:].view(micro_batch, seq_len)
        logits = model(x).logits
        losses.append(torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.size(-1)), y.reshape(-1)).item())
        if start == 0:
            kiln_logits = torch.from_numpy(np.load(logits_file))
            if kiln_logits.shape != logits.shape:
                fail(f"kiln's logits are {tuple(kiln_logits.shape)}, transformers' "
                     f"{tuple(logits.shape)}")
            worst = (kiln_logits - logits).abs().max().item()
            if worst > logits_tolerance:
                fail(f"kiln's logits differ from transformers' by up to {worst:.3g}")
            print(f"ok: logits of the first window {tuple(logits.shape)} within {worst:.2g}")
ours = sum(losses) / len(losses)
if abs(ours - float(kiln_loss)) > 1e-4:
    fail(f"transformers' loss over {len(losses)} windows is {ours:.6f}, kiln eval's {kiln_loss}")
print(f"ok: loss over {len(losses)} windows {ours:.6f}, kiln eval {kiln_loss}")

if encode is not None:
    ids = torch.tensor([encode(prompt)])
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=32, do_sample=False, eos_token_id=None,
                             pad_token_id=None)
    text = prompt + decode(out[0, ids.size(1):].tolist())
    kiln_text = open(sample_file, encoding="utf-8").read().rstrip("\n")
    if text != kiln_text:
        fail(f"greedy generate gives {text!r}, kiln sample {kiln_text!r}")
    print(f"ok: greedy generate of 32 tokens equals kiln sample: {text!r}")

kiln_rows = [json.loads(line) for line in open(generated_file)]
if len(kiln_rows) != 16:
    fail(f"kiln generated for {len(kiln_rows)} prompts, not 16")
eot = model.config.eos_token_id
for k in kiln_rows:
    ids = torch.tensor([k["context"]])
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=32, do_sample=False, eos_token_id=None,
                             pad_token_id=None)[0, ids.size(1):].tolist()
    ours, theirs = k["generated"], out[:len(k["generated"])]
    stopped = len(ours) == 32 or (eot is not None and out[len(ours)] == eot)
    if ours != theirs or not stopped:
        fail(f"prompt {k['item']}: greedy generate gives {out}, kiln generated {ours}")
print(f"ok: 16 prompts x 32 greedy tokens, batched with kiln's cache, equal generate()'s "
      f"token for token ({sum(len(k['generated']) for k in kiln_rows)} tokens)")
