"""Kiln's task scores judged by lm-evaluation-harness itself: its Hugging Face backend (HFLM)
scores the model directory Kiln scored, on the same tasks written in the harness's YAML
(tests/interop/tasks/*.yaml), and each item's result and each stored score must be the harness's.

Run by tools/interop.sh, in .venv/, from the source tree's root (the YAMLs' data paths are its):
    harness_check.py HF_DIR TOKENIZER_JSON KILN_DB TASK_DIR [--eos TOKEN] [--limit TASK=N]...
                     [--chat TASK]... TASK=DETAILS_JSONL...
TASK_DIR holds the YAML files (the harness's include_path); DETAILS_JSONL is what `kiln eval
--task --details` wrote for TASK. --limit is the harness's --limit; --chat scores TASK with
apply_chat_template and fewshot_as_multiturn, under a ChatML template given to the tokenizer;
--eos names the tokenizer's end-of-text token (below).

What the harness is given besides the directory's weights and the YAML, and why:
  - the tokenizer: a Hugging Face tokenizer.json's folder opened by AutoTokenizer, as the harness
    opens one; Kiln's char tokenizer (its byte table, which transformers cannot read) as a
    byte-level BPE without merges, one token per byte, decoded as bytes;
  - its eos_token, which the harness cannot run without (it begins an empty context, and its text
    is a stop string): --eos, as the published tokenizer_config.json names it; for the char
    tokenizer, which has none, a token added after the table.
Everything else is the harness's default: a BOS only where the tokenizer's post-processor adds one
(none of the files tested has one; docs/tasks.md says where Kiln and the harness part there).
Compared, per item: each choice's continuation tokens (by the harness's _encode_pair), its
log-likelihood within 1e-4, acc; generation: the prompt's tokens (the harness's encoding and
cut), the text before the stop, exact_match. Per task: every metric Kiln stored, its standard
error and item count equal the harness's, under rules version 2.
Prints one line per check; exits 1 at the first that fails.
"""
import argparse
import contextlib
import io
import json
import logging
import math
import os
import sqlite3
import sys

import lm_eval
from lm_eval.models.huggingface import HFLM
from lm_eval.tasks import TaskManager
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import AutoTokenizer, PreTrainedTokenizerFast
from transformers.utils import logging as transformers_logging

# Kiln's template "chatml": each turn "<|im_start|>ROLE\n" TEXT "<|im_end|>\n", then the
# assistant's opening.
CHATML = ("{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + "
          "'<|im_end|>\\n' }}{% endfor %}"
          "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
TOLERANCE = 1e-4


def fail(why):
    print(f"FAIL: {why}")
    sys.exit(1)


def parse_args():
    parser = argparse.ArgumentParser()
    for name in ("hf_dir", "tokenizer_json", "kiln_db", "task_dir"):
        parser.add_argument(name)
    parser.add_argument("--eos", default="<|endoftext|>")
    parser.add_argument("--limit", action="append", default=[], metavar="TASK=N")
    parser.add_argument("--chat", action="append", default=[], metavar="TASK")
    parser.add_argument("checks", nargs="+", metavar="TASK=DETAILS_JSONL")
    args = parser.parse_args()
    args.limit = {task: int(n) for task, n in (kv.split("=", 1) for kv in args.limit)}
    args.checks = [check.split("=", 1) for check in args.checks]
    return args


def byte_chars():
    """GPT-2's map from a byte to the character that stands for it in a byte-level vocabulary."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
                 *range(ord("®"), ord("ÿ") + 1)]
    others = [b for b in range(256) if b not in printable]
    return {**{b: chr(b) for b in printable}, **{b: chr(256 + n) for n, b in enumerate(others)}}


def char_tokenizer(table, eos):
    """Kiln's char tokenizer, whose token i is the byte table[i], with eos added after them."""
    chars = byte_chars()
    backend = Tokenizer(models.BPE(vocab={chars[b]: i for i, b in enumerate(table)}, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    backend.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend)
    tokenizer.add_special_tokens({"eos_token": eos})
    return tokenizer


def tokenizer_of(path, eos):
    saved = json.load(open(path, encoding="utf-8"))
    tokenizer = char_tokenizer(saved["bytes"], eos) if "bytes" in saved else \
        AutoTokenizer.from_pretrained(os.path.dirname(path), eos_token=eos)
    tokenizer.chat_template = CHATML
    return tokenizer


def read_jsonl(path):
    return [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]


def stored_scores(db, task):
    rows = sqlite3.connect(db).execute(
        "SELECT metric, value, stderr, items, rules FROM task_scores WHERE task = ?",
        (task,)).fetchall()
    if len({row[0] for row in rows}) != len(rows):
        fail(f"the run store has more than one row of some {task} metric: {rows}")
    return {row[0]: row[1:] for row in rows}


def check_choices(lm, task, samples, kiln):
    worst, differ = 0.0, 0
    for sample, k in zip(samples, kiln):
        for c, ((context, continuation), resp) in enumerate(zip(sample["arguments"],
                                                                 sample["resps"])):
            tokens = lm._encode_pair(context, continuation)[1]
            if tokens != k["continuations"][c]:
                fail(f"{task} item {k['item']} choice {c}: kiln read {k['continuations'][c]}, "
                     f"the harness {tokens}")
            ll = resp[0][0]
            worst = max(worst, abs(ll - k["loglik"][c]))
            if abs(ll - k["loglik"][c]) > TOLERANCE:
                fail(f"{task} item {k['item']} choice {c}: log-likelihood {ll} in the harness, "
                     f"{k['loglik'][c]} in kiln")
        if sample["acc"] != k["score"]:
            fail(f"{task} item {k['item']}: acc {sample['acc']} in the harness, {k['score']} "
                 "in kiln")
        differ += sample["acc_norm"] != sample["acc_bytes"]
    if task.startswith("accents") and differ == 0:
        fail(f"{task}: acc_norm and acc_bytes agree on every item, so this check cannot tell "
             "characters from bytes: give the fixture choices further apart")
    print(f"ok: {task}: {sum(len(k['loglik']) for k in kiln)} log-likelihoods equal the "
          f"harness's (largest difference {worst:.2e}); acc_norm and acc_bytes differ on {differ} "
          "item(s)")


def check_generations(lm, task, samples, kiln):
    for sample, k in zip(samples, kiln):
        context, gen_kwargs = sample["arguments"][0]
        # HFLM.generate_until's cut: room for max_gen_toks after the prompt.
        prompt = lm.tok_encode(context)[-(lm.max_length - gen_kwargs["max_gen_toks"]):]
        if prompt != k["context"]:
            fail(f"{task} item {k['item']}: kiln's prompt ids differ from the harness's")
        text = sample["resps"][0][0]
        if text != k["text"]:
            fail(f"{task} item {k['item']}: the text is {text!r} in the harness, {k['text']!r} "
                 "in kiln")
        if sample["exact_match"] != k["score"]:
            fail(f"{task} item {k['item']}: exact_match {sample['exact_match']} in the harness, "
                 f"{k['score']} in kiln")
    print(f"ok: {task}: {len(samples)} greedy generations are the harness's text")


def check_stored(task, results, stored, items):
    # The harness's keys are "METRIC,FILTER" and "METRIC_stderr,FILTER".
    scores = {key: value for key, value in results.items()
              if "," in key and not key.split(",")[0].endswith("_stderr")}
    if {key.split(",")[0] for key in scores} != set(stored):
        fail(f"{task}: kiln stored {sorted(stored)}, the harness scored {sorted(scores)}")
    for key, here in scores.items():
        metric, filter_name = key.split(",")
        value, err, n, rules = stored[metric]
        harness_err = results[f"{metric}_stderr,{filter_name}"]
        if not math.isclose(value, here, abs_tol=1e-12):
            fail(f"{task}.{metric} is {here} in the harness, {value} in kiln's store")
        if not math.isclose(err, harness_err, abs_tol=1e-12):
            fail(f"{task}.{metric} stderr is {harness_err} in the harness, {err} in kiln's store")
        if n != items or rules != 2:
            fail(f"{task}.{metric} is stored over {n} items under rules {rules}, not {items} "
                 "under 2")
        print(f"ok: {task}.{metric} = {here:.4f} ± {err:.4f}, as kiln stored it")


def judge(lm, task_manager, args, task, details):
    # Its progress bars are asked for explicitly (disable=False), which TQDM_DISABLE cannot undo.
    with contextlib.redirect_stderr(io.StringIO()):
        run = lm_eval.simple_evaluate(
            model=lm, tasks=[task], task_manager=task_manager, limit=args.limit.get(task),
            apply_chat_template=task in args.chat, fewshot_as_multiturn=True, log_samples=True)
    samples = sorted(run["samples"][task], key=lambda s: s["doc_id"])
    kiln = read_jsonl(details)
    if [s["doc_id"] for s in samples] != [k["item"] for k in kiln]:
        fail(f"{task}: kiln scored {len(kiln)} items, the harness {len(samples)}, or others")
    check = check_generations if run["configs"][task]["output_type"] == "generate_until" \
        else check_choices
    check(lm, task, samples, kiln)
    check_stored(task, run["results"][task], stored_scores(args.kiln_db, task), len(samples))


def main():
    args = parse_args()
    logging.getLogger("lm_eval").setLevel(logging.ERROR)  # one warning per cut request
    transformers_logging.set_verbosity_error()
    lm = HFLM(pretrained=args.hf_dir, tokenizer=tokenizer_of(args.tokenizer_json, args.eos),
              dtype="float32", device="cpu", batch_size=8)
    # The harness's own tasks stay out: one of its groups is named arithmetic too.
    task_manager = TaskManager(include_path=args.task_dir, include_defaults=False)
    for task, details in args.checks:
        judge(lm, task_manager, args, task, details)


main()
