#!/usr/bin/python3
"""Writes a GPT-2 124M checkpoint in llm.c's format, randomly initialised, for tools/bench/peers.sh.

llm.c's CPU trainer (train_gpt2.c) starts from `gpt2_124M.bin`, which its Python script makes
from OpenAI's weights with PyTorch and transformers. Timing a step needs no trained weights, so
this writes the same layout from a seeded generator instead: a header of 256 little-endian
int32 (magic 20240326, version 3, max_seq_len, vocab_size, num_layers, num_heads, channels,
padded_vocab_size, zeros), then every parameter as float32 in llm.c's order: wte [Vp, C],
wpe [maxT, C], then each kind over all layers: ln1 w and b, qkv w [3C, C] and b, attention
projection w [C, C] and b, ln2 w and b, fc w [4C, C] and b, fc projection w [C, 4C] and b; last
the final LayerNorm's w and b. Normal(0, 0.02) weights, LayerNorm gains 1, biases 0.

    /usr/bin/python3 tools/bench/llmc_checkpoint.py OUT.bin
"""

import sys

import numpy as np

MAX_T, V, L, NH, C, VP = 1024, 50257, 12, 12, 768, 50304


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: llmc_checkpoint.py OUT.bin")
    header = np.zeros(256, dtype="<i4")
    header[:8] = [20240326, 3, MAX_T, V, L, NH, C, VP]
    rng = np.random.default_rng(1337)
    normal = lambda *shape: rng.normal(0.0, 0.02, shape).astype("<f4")
    ones, zeros = (lambda *s: np.ones(s, "<f4")), (lambda *s: np.zeros(s, "<f4"))
    tensors = [normal(VP, C), normal(MAX_T, C),
               ones(L, C), zeros(L, C),
               normal(L, 3 * C, C), zeros(L, 3 * C),
               normal(L, C, C), zeros(L, C),
               ones(L, C), zeros(L, C),
               normal(L, 4 * C, C), zeros(L, 4 * C),
               normal(L, C, 4 * C), zeros(L, C),
               ones(C), zeros(C)]
    with open(sys.argv[1], "wb") as out:
        out.write(header.tobytes())
        for t in tensors:
            out.write(t.tobytes())
    print(f"{sys.argv[1]}: {sum(t.size for t in tensors) / 1e6:.2f}M parameters")


if __name__ == "__main__":
    main()
