#!/usr/bin/env python3
"""The Python side of tools/bench/prepare.sh: what a researcher's own prepare script would do
with Hugging Face's `tokenizers` (the Rust GPT-2 tokenizer under transformers'
GPT2TokenizerFast), on the vocabulary files Kiln's gpt2 tokenizer reads (data/gpt2).

    prepare_reference.py CORPUS OUT.bin

Reads CORPUS in pieces of about 1 MiB cut after a newline, encodes 16 pieces at a time with
encode_batch (parallel over RAYON_NUM_THREADS threads, every core by default), puts GPT-2's
<|endoftext|> first as kiln prepare does, and writes the ids as uint16 to OUT.bin. Prints one line:
    python: BYTES bytes, TOKENS tokens in SECONDS s: MB/s, peak RSS KB
"""
import resource
import sys
import time

import numpy as np
from tokenizers import Tokenizer, decoders, models, pre_tokenizers

PIECE = 1 << 20
BATCH = 16
END_OF_TEXT = 50256


def pieces(path):
    """The corpus in pieces of about PIECE bytes, each ending with a newline (or the end)."""
    with open(path, "r", encoding="utf-8") as f:
        while True:
            piece = f.read(PIECE)
            if not piece:
                return
            piece += f.readline()
            yield piece


def main():
    corpus, out_path = sys.argv[1], sys.argv[2]
    tokenizer = Tokenizer(models.BPE.from_file("data/gpt2/encoder.json", "data/gpt2/vocab.bpe"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    start = time.perf_counter()
    tokens = 1
    read = 0
    with open(out_path, "wb") as out:
        out.write(np.array([END_OF_TEXT], dtype="<u2").tobytes())
        batch = []
        for piece in pieces(corpus):
            batch.append(piece)
            read += len(piece.encode("utf-8"))
            if len(batch) == BATCH:
                for encoding in tokenizer.encode_batch(batch):
                    out.write(np.array(encoding.ids, dtype="<u2").tobytes())
                    tokens += len(encoding.ids)
                batch = []
        for encoding in tokenizer.encode_batch(batch):
            out.write(np.array(encoding.ids, dtype="<u2").tobytes())
            tokens += len(encoding.ids)
    seconds = time.perf_counter() - start
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"python: {read} bytes, {tokens} tokens in {seconds:.1f} s: "
          f"{read / seconds / 1e6:.1f} MB/s, peak RSS {peak_kb} KB")


if __name__ == "__main__":
    main()
