"""`kiln sample --hf DIR --temperature 0` against transformers and the tokenizers library on the
same directory (tests/interop/hf_eval_test.sh):

    hf_sample_check.py DIR PROMPT SAMPLE_FILE TOKENS

The prompt encoded by tokenizers (no special tokens, as Kiln encodes it), TOKENS greedy tokens
from generate(), and the text tokenizers decodes them to, after the prompt: Kiln's output, byte
for byte (a random model's tokens are any of the vocabulary's, pieces of characters included),
but where tokenizers' decode replaced bytes that make no character by U+FFFD.
"""
import sys

import torch
from tokenizers import Tokenizer
from transformers import AutoModelForCausalLM

hf_dir, prompt, sample_file, tokens = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
tokenizer = Tokenizer.from_file(f"{hf_dir}/tokenizer.json")
model = AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32)
model.eval()
ids = torch.tensor([tokenizer.encode(prompt, add_special_tokens=False).ids])
with torch.no_grad():
    out = model.generate(ids, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False,
                         eos_token_id=None, pad_token_id=0)[0, ids.size(1):].tolist()
expected = prompt + tokenizer.decode(out, skip_special_tokens=False) + "\n"
raw = open(sample_file, "rb").read()
kiln = raw.decode("utf-8", errors="surrogateescape")
# Where the tokens end inside a character, tokenizers' decode writes U+FFFD for the bytes that
# make none, and Kiln the bytes themselves: the same bytes, read as tokenizers reads them.
if kiln != expected and "\ufffd" in expected:
    kiln = raw.decode("utf-8", errors="replace")
if kiln != expected:
    print(f"FAIL: kiln sample printed {kiln!r}; generate() and tokenizers' decode give "
          f"{expected!r} (ids {out})")
    sys.exit(1)
print(f"ok: kiln sample --hf equals generate() and tokenizers' decode: {expected.strip()!r}")
