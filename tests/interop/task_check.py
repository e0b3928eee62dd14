"""Kiln's task scores checked against lm-evaluation-harness's rules, applied here with transformers
on the run's export.

Run in the sid chroot (tools/interop.sh) against files the host's kiln wrote:
    task_check.py HF_DIR TOKENIZER_JSON KILN_DB TASK_TOML=DETAILS_JSONL ...

The rules are written here from the harness's source (v0.4.12-48, commit 4e7e0d47; docs/tasks.md
cites each line), not from Kiln's code. Nothing on this side comes from Kiln but the character
tokenizer's byte table, the export's weights and the details file it is compared with:
  - the text asked (lm_eval/api/task.py fewshot_context, build_qa_turn): each example's text,
    target_delimiter, its target and fewshot_delimiter, then the item's text; under ChatML, each
    example a user turn and an assistant turn, the item a user turn and the assistant's opening;
    examples by FirstNSampler (the pool's first, less any equal to the item);
  - multiple choice (task.py construct_requests, process_results): continuation =
    target_delimiter + choice ("" under a chat template); _encode_pair (api/model.py): the
    context's trailing whitespace (str.rstrip) moved to the continuation, whole text encoded,
    the continuation's tokens the whole's after len(enc(context)); the sequence cut from the left
    to max_length + 1, less its last token (models/huggingface.py); acc by the summed
    log-likelihood, acc_norm by it over len(choice) (characters), acc_bytes over
    len(choice.encode()), ties to the first (np.argmax);
  - generate_until: the context cut to the last max_length - max_gen_toks tokens, greedy
    generate() of max_gen_toks tokens, the text cut at each `until` string (s.split(term)[0]);
    exact_match (api/metrics.py exact_match_hf_evaluate) after the output's filter
    (remove_whitespace: str.strip()), regexes_to_ignore, ignore_case, ignore_punctuation;
  - stderr: sample standard deviation over sqrt(n) (api/metrics.py mean_stderr).
Each log-likelihood equals Kiln's (--details) within 1e-4, the token ids Kiln read are these,
the greedy tokens are Kiln's up to the stop, and every metric and stderr equals Kiln's store.
Prints one line per check; exits 1 at the first that fails.
"""
import json
import math
import os
import re
import sqlite3
import string
import sys
import tomllib

import numpy as np
import torch
from transformers import AutoModelForCausalLM

hf_dir, tokenizer_json, kiln_db = sys.argv[1:4]
pairs = [arg.split("=", 1) for arg in sys.argv[4:]]


def fail(why):
    print(f"FAIL: {why}")
    sys.exit(1)


saved = json.load(open(tokenizer_json))
if "bytes" in saved:  # Kiln's character tokenizer: one token per byte of its table
    table = saved["bytes"]
    id_of = {b: i for i, b in enumerate(table)}

    def encode(text):
        return [id_of[b] for b in text.encode("utf-8")]

    def decode(ids):
        return bytes(table[i] for i in ids).decode("utf-8", errors="replace")
else:  # a Hugging Face tokenizer.json, by the tokenizers library, as the harness's HFLM encodes
    from tokenizers import Tokenizer
    hf_tokenizer = Tokenizer.from_file(tokenizer_json)

    def encode(text):
        return hf_tokenizer.encode(text, add_special_tokens=False).ids

    def decode(ids):
        return hf_tokenizer.decode(ids)


def stored(task, metric):
    db = sqlite3.connect(kiln_db)
    rows = db.execute("SELECT value, stderr, rules FROM task_scores WHERE task = ? AND metric = ?",
                      (task, metric)).fetchall()
    if len(rows) != 1:
        fail(f"the run store has {len(rows)} rows of {task}.{metric}, not one")
    return rows[0]


def read_jsonl(path):
    return [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]


CHATML = {"user": "<|im_start|>user\n", "assistant": "<|im_start|>assistant\n", "end": "<|im_end|>\n"}


def text_of(doc, kind):
    return doc["context"] if kind == "choice" else doc["prompt"]


def target_of(doc, kind):
    return doc["choices"][doc["label"]] if kind == "choice" else doc["answer"]


def asked(spec, pool, doc):
    kind, n = spec["kind"], spec.get("num_fewshot", 0)
    shots = [d for d in pool if d != doc][:n]
    if spec.get("template", "none") == "chatml":
        out = ""
        for shot in shots:
            out += CHATML["user"] + text_of(shot, kind) + CHATML["end"]
            out += CHATML["assistant"] + target_of(shot, kind) + CHATML["end"]
        return out + CHATML["user"] + text_of(doc, kind) + CHATML["end"] + CHATML["assistant"]
    tgt, few = spec.get("target_delimiter", " "), spec.get("fewshot_delimiter", "\n\n")
    return "".join(text_of(s, kind) + tgt + target_of(s, kind) + few for s in shots) + \
        text_of(doc, kind)


def encode_pair(context, continuation):
    n_spaces = len(context) - len(context.rstrip())
    if n_spaces > 0:
        continuation = context[-n_spaces:] + continuation
        context = context[:-n_spaces]
    whole = encode(context + continuation)
    return encode(context), whole[len(encode(context)):]


def argmax(values):
    return int(np.argmax(np.array(values)))


def stderr(scores):
    mu = sum(scores) / len(scores)
    return math.sqrt(sum((x - mu) ** 2 for x in scores) / (len(scores) - 1)) / math.sqrt(len(scores))


def exact_match(spec, prediction, gold):
    if spec.get("filter", "none") == "remove_whitespace":
        prediction = prediction.strip()
    for pattern in spec.get("regexes_to_ignore", []):
        prediction, gold = re.sub(pattern, "", prediction), re.sub(pattern, "", gold)
    if spec.get("ignore_case", False):
        prediction, gold = prediction.lower(), gold.lower()
    if spec.get("ignore_punctuation", False):
        drop = str.maketrans("", "", string.punctuation)
        prediction, gold = prediction.translate(drop), gold.translate(drop)
    return prediction == gold


model = AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32)
model.eval()
max_length = getattr(model.config, "n_positions", None) or model.config.max_position_embeddings


def score_choice(spec, docs, pool, kiln):
    worst, scores = 0.0, {"acc": [], "acc_norm": [], "acc_bytes": []}
    delimiter = "" if spec.get("template", "none") != "none" else spec.get("target_delimiter", " ")
    for doc, k in zip(docs, kiln):
        context, lls = asked(spec, pool, doc), []
        for c, choice in enumerate(doc["choices"]):
            ctx, cont = encode_pair(context, delimiter + choice)
            if cont != k["continuations"][c]:
                fail(f"{spec['name']} item {k['item']} choice {c}: kiln read "
                     f"{k['continuations'][c]}, not {cont}")
            if not ctx:
                fail(f"{spec['name']} item {k['item']}: an empty context (no such item here)")
            seq = (ctx + cont)[-(max_length + 1):][:-1]
            with torch.no_grad():
                logp = torch.log_softmax(model(torch.tensor([seq])).logits[0].double(), -1)
            first = len(seq) - len(cont)
            ll = sum(logp[first + j, t].item() for j, t in enumerate(cont))
            worst = max(worst, abs(ll - k["loglik"][c]))
            if abs(ll - k["loglik"][c]) > 1e-4:
                fail(f"{spec['name']} item {k['item']} choice {c}: log-likelihood {ll} here, "
                     f"{k['loglik'][c]} in kiln")
            lls.append(ll)
        choices, gold = doc["choices"], doc["label"]
        completion_len = np.array([float(len(i)) for i in choices])
        byte_length = np.array([float(len(i.encode("utf-8"))) for i in choices])
        scores["acc"].append(float(argmax(lls) == gold))
        scores["acc_norm"].append(float(argmax(np.array(lls) / completion_len) == gold))
        scores["acc_bytes"].append(float(argmax(np.array(lls) / byte_length) == gold))
    differ = sum(a != b for a, b in zip(scores["acc_norm"], scores["acc_bytes"]))
    if spec["name"].startswith("accents") and differ == 0:
        fail(f"{spec['name']}: acc_norm and acc_bytes agree on every item, so this check cannot "
             "tell characters from bytes: give the fixture choices further apart")
    print(f"ok: {spec['name']}: {sum(len(d['choices']) for d in docs)} log-likelihoods equal "
          f"kiln's (largest difference {worst:.2e}); acc_norm and acc_bytes differ on {differ} "
          f"item(s)")
    return scores


def score_generate(spec, docs, pool, kiln):
    max_gen_toks = spec.get("max_gen_toks", 256)
    until = spec.get("until", [spec.get("fewshot_delimiter", "\n\n")])
    matches = []
    for doc, k in zip(docs, kiln):
        prompt = encode(asked(spec, pool, doc))[-(max_length - max_gen_toks):]
        if prompt != k["context"]:
            fail(f"{spec['name']} item {k['item']}: kiln's prompt ids differ from the harness's")
        with torch.no_grad():
            out = model.generate(torch.tensor([prompt]), max_new_tokens=max_gen_toks,
                                 do_sample=False, pad_token_id=0,
                                 attention_mask=torch.ones(1, len(prompt), dtype=torch.long))
        out = out[0, len(prompt):].tolist()
        text = decode(out)
        for term in until:
            text = text.split(term)[0]
        # Kiln stops generating at the token that completes a stop string.
        stop_at = next((n for n in range(1, len(out) + 1)
                        if any(term in decode(out[:n]) for term in until)), len(out))
        if k["generated"] != out[:stop_at]:
            fail(f"{spec['name']} item {k['item']}: generate() gives {out[:stop_at]}, kiln "
                 f"generated {k['generated']}")
        if text != k["text"]:
            fail(f"{spec['name']} item {k['item']}: the text is {text!r} here, {k['text']!r} in kiln")
        matches.append(float(exact_match(spec, text, doc["answer"])))
        if matches[-1] != k["score"]:
            fail(f"{spec['name']} item {k['item']}: exact match {matches[-1]} here, {k['score']} "
                 "in kiln")
    print(f"ok: {spec['name']}: {len(docs)} greedy generations equal kiln's up to the stop")
    return {"exact_match": matches}


for toml_path, details in pairs:
    spec = tomllib.load(open(toml_path, "rb"))
    folder = os.path.dirname(toml_path)
    pool = read_jsonl(os.path.join(folder, spec["items"]))
    docs = pool[:spec["limit"]] if spec.get("limit") else pool
    kiln = read_jsonl(details)
    if len(kiln) != len(docs):
        fail(f"kiln scored {len(kiln)} {spec['name']} items, the file has {len(docs)}")
    if spec.get("num_fewshot", 0) and spec.get("fewshot_sampler") != "first_n":
        fail(f"{toml_path}: the harness's random sampler is Python's; use first_n here")
    score = score_choice if spec["kind"] == "choice" else score_generate
    for metric, values in score(spec, docs, pool, kiln).items():
        value, err, rules = stored(spec["name"], metric)
        here = sum(values) / len(values)
        if not math.isclose(value, here, abs_tol=1e-12):
            fail(f"{spec['name']}.{metric} is {here} here, {value} in kiln's store")
        if not math.isclose(err, stderr(values), abs_tol=1e-12):
            fail(f"{spec['name']}.{metric} stderr is {stderr(values)} here, {err} in kiln's store")
        if rules != 2:
            fail(f"{spec['name']}.{metric} is stored under rules {rules}, not 2")
        print(f"ok: {spec['name']}.{metric} = {here:.4f} ± {err:.4f}, as kiln stored it")
