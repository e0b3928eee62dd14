"""Kiln's hf tokenizer against Hugging Face's tokenizers library, on the same text.

Run by tools/interop.sh, in .venv/:
    tokenizer_check.py gpt2-json DIR       writes DIR/tokenizer.json: GPT-2's, built by
                                           tokenizers from OpenAI's encoder.json and vocab.bpe
                                           (data/gpt2, fetched by tools/setup.sh)
    tokenizer_check.py compare TOKENIZER_JSON TEXT SHARD_DIR
        the ids of `kiln prepare --tokenizer hf` (SHARD_DIR's train shards, llm.c's format: the
        document's end-of-text id, then its tokens) equal
        Tokenizer.from_file(TOKENIZER_JSON).encode(text, add_special_tokens=False).ids, and
        tokenizers decodes them to the text (as its normalizer, if any, leaves it).
Prints one line; exits 1 with the first difference.
"""
import glob
import os
import sys

import numpy as np
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, AddedToken

if sys.argv[1] == "gpt2-json":
    bpe = models.BPE.from_file("data/gpt2/encoder.json", "data/gpt2/vocab.bpe")
    tokenizer = Tokenizer(bpe)
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens([AddedToken("<|endoftext|>", special=True)])
    tokenizer.save(os.path.join(sys.argv[2], "tokenizer.json"))
    print(f"gpt2 tokenizer.json: {tokenizer.get_vocab_size()} ids")
    sys.exit(0)

tokenizer_json, text_file, shard_dir = sys.argv[2:5]
tokenizer = Tokenizer.from_file(tokenizer_json)
text = open(text_file, encoding="utf-8", newline="").read()
expected = tokenizer.encode(text, add_special_tokens=False).ids
dtype = np.uint32 if tokenizer.get_vocab_size() > 65536 else np.uint16
ids = np.concatenate([np.fromfile(f, dtype=dtype, offset=1024)
                      for f in sorted(glob.glob(os.path.join(shard_dir, "train_*.bin")))]).tolist()
ids = ids[1:]  # the end-of-text id kiln prepare puts before each document
if ids != expected:
    at = next((i for i, (a, b) in enumerate(zip(ids, expected)) if a != b),
              min(len(ids), len(expected)))
    around = lambda xs: [tokenizer.id_to_token(i) for i in xs[max(0, at - 3):at + 4]]
    print(f"FAIL: {os.path.basename(os.path.dirname(tokenizer_json))}: ids differ at token {at} "
          f"of {len(expected)}: kiln {around(ids)}, tokenizers {around(expected)}")
    sys.exit(1)
# A normalizer (Qwen's NFC) changes the text: the ids decode to the normalized text.
normalized = tokenizer.normalizer.normalize_str(text) if tokenizer.normalizer else text
if tokenizer.decode(ids, skip_special_tokens=False) != normalized:
    print("FAIL: tokenizers' decode of the ids is not the (normalized) text")
    sys.exit(1)
print(f"ok: {len(ids)} ids equal tokenizers' encode of {len(text)} characters")
