"""Kiln's task scores checked against the same tasks scored with transformers on the run's export.

Run in the sid chroot (tools/interop.sh) against files the host's kiln wrote:
    task_check.py HF_DIR TOKENIZER_JSON KILN_DB TASKS_DIR CLOZE_DETAILS ARITH_DETAILS ARITH_ITEMS
                  MAX_TOKENS

Everything on this side is computed here, from the task files and the export, by
lm-evaluation-harness's recipe written out (the character tokenizer's table read from the
data's tokenizer.json):
  - cloze (multiple choice): each choice's continuation encoded after the context (a trailing
    space of the context moved to the choice), context + continuation cut from the left to the
    model's n_positions, the choice's summed log-likelihood from the model's logits. Each equals
    Kiln's (--details) within 1e-4, the token ids Kiln read are these, and acc and acc_norm
    (log-likelihood per byte of the choice) equal the scores in Kiln's run store.
  - arithmetic (generation, no examples): greedy generate() of MAX_TOKENS new tokens after the
    prompt (cut from the left to leave them room); Kiln's tokens are its first ones, up to the
    first "\\n"; exact match after strip and lower equals Kiln's per item and in the store.
Prints one line per check; exits 1 at the first that fails.
"""
import json
import math
import sqlite3
import sys

import torch
from transformers import AutoModelForCausalLM

hf_dir, tokenizer_json, kiln_db, tasks_dir, cloze_details, arith_details = sys.argv[1:7]
arith_items, max_tokens = int(sys.argv[7]), int(sys.argv[8])


def fail(why):
    print(f"FAIL: {why}")
    sys.exit(1)


table = json.load(open(tokenizer_json))["bytes"]
id_of = {chr(b): i for i, b in enumerate(table)}


def encode(text):
    return [id_of[c] for c in text]


def decode(ids):
    return "".join(chr(table[i]) for i in ids)


def stored(task, metric):
    db = sqlite3.connect(kiln_db)
    rows = db.execute("SELECT value FROM task_scores WHERE task = ? AND metric = ?",
                      (task, metric)).fetchall()
    if len(rows) != 1:
        fail(f"the run store has {len(rows)} rows of {task}.{metric}, not one")
    return rows[0][0]


def read_jsonl(path, limit=None):
    rows = [json.loads(line) for line in open(path) if line.strip()]
    return rows[:limit] if limit else rows


model = AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32)
model.eval()
block = model.config.n_positions

# --- cloze ---
kiln = read_jsonl(cloze_details)
items = read_jsonl(f"{tasks_dir}/kjv_cloze.jsonl")
if len(kiln) != len(items):
    fail(f"kiln scored {len(kiln)} cloze items, the file has {len(items)}")
acc = acc_norm = 0
worst = 0.0
with torch.no_grad():
    for item, k in zip(items, kiln):
        context, lls = item["context"], []
        moved = len(context) - len(context.rstrip(" "))
        context, spaces = context[:len(context) - moved], context[len(context) - moved:]
        for c, choice in enumerate(item["choices"]):
            ctx, cont = encode(context), encode(spaces + choice)
            if cont != k["continuations"][c]:
                fail(f"item {k['item']} choice {c}: kiln read {k['continuations'][c]}, not {cont}")
            seq = (ctx + cont)[:-1][-block:]
            logits = model(torch.tensor([seq])).logits[0].double()
            logp = torch.log_softmax(logits, -1)
            first = len(seq) - len(cont)
            ll = sum(logp[first + j, t].item() for j, t in enumerate(cont))
            worst = max(worst, abs(ll - k["loglik"][c]))
            if abs(ll - k["loglik"][c]) > 1e-4:
                fail(f"item {k['item']} choice {c}: log-likelihood {ll} here, {k['loglik'][c]} "
                     "in kiln")
            lls.append(ll)
        label = item["label"]
        acc += max(range(len(lls)), key=lambda i: (lls[i], -i)) == label
        norm = [ll / len(choice.encode()) for ll, choice in zip(lls, item["choices"])]
        acc_norm += max(range(len(norm)), key=lambda i: (norm[i], -i)) == label
n = len(items)
print(f"ok: {n} cloze items, {sum(len(i['choices']) for i in items)} log-likelihoods equal "
      f"kiln's (largest difference {worst:.2e})")
for metric, value in (("acc", acc / n), ("acc_norm", acc_norm / n)):
    if not math.isclose(value, stored("kjv_cloze", metric), abs_tol=1e-12):
        fail(f"kjv_cloze.{metric} is {value} here, {stored('kjv_cloze', metric)} in kiln's store")
    print(f"ok: kjv_cloze.{metric} = {value:.4f}, as kiln stored it")

# --- arithmetic ---
kiln = read_jsonl(arith_details)
items = read_jsonl(f"{tasks_dir}/arithmetic.jsonl", arith_items)
if len(kiln) != len(items):
    fail(f"kiln scored {len(kiln)} arithmetic items, expected {len(items)}")
matches = 0
with torch.no_grad():
    for item, k in zip(items, kiln):
        prompt = encode(item["prompt"])[-(block - max_tokens):]
        if prompt != k["context"]:
            fail(f"item {k['item']}: kiln's prompt ids differ from the prompt's")
        out = model.generate(torch.tensor([prompt]), max_new_tokens=max_tokens, do_sample=False,
                             attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                             pad_token_id=0)[0, len(prompt):].tolist()
        text = decode(out)
        cut = text.split("\n")[0]
        kept = out[:len(encode(cut)) + (1 if len(cut) < len(text) else 0)]
        if kept != k["generated"]:
            fail(f"item {k['item']}: generate() gives {kept}, kiln generated {k['generated']}")
        match = float(cut.strip().lower() == item["answer"].strip().lower())
        if match != k["score"]:
            fail(f"item {k['item']}: exact match {match} here, {k['score']} in kiln")
        matches += match
print(f"ok: {len(items)} greedy generations equal kiln's, token for token, up to the stop")
value = matches / len(items)
if not math.isclose(value, stored("arithmetic", "exact_match"), abs_tol=1e-12):
    fail(f"arithmetic.exact_match is {value} here, {stored('arithmetic', 'exact_match')} in kiln")
print(f"ok: arithmetic.exact_match = {value:.4f}, as kiln stored it")
