"""A random mixture-of-experts model transformers makes, for Kiln to read as a llama
(tests/interop/moe_import_test.sh): through model.init_from, `kiln eval --hf` and `kiln sample
--hf`.

    moe_import_make.py OUT VARIANT
VARIANT: mixtral (MixtralForCausalLM: every block 4 experts, top 2) or qwen3_moe
(Qwen3MoeForCausalLM: qk-norm, a head_dim other than hidden / heads, the second of two blocks a
mixture of 4 experts, top 2 without renormalisation, the first dense). Writes
  OUT/model/        save_pretrained(max_shard_size="20KB"): sharded, in fp32, beside a
                    byte-level tokenizer.json (tests/interop/byte_vocabulary.py)
  OUT/tokens.bin    4097 random token ids in llm.c's shard format
  OUT/logits.npy    transformers' logits of the shard's first window [4, 32, vocab], laid out as
                    Kiln's loader lays it
  OUT/task.toml, OUT/items.jsonl   a choice task for `kiln eval --hf` (hf_config_check.py)
Weights are drawn N(0, 0.2), larger than the initialisation's, so that the router's choices and
each expert move the logits well past the comparisons' tolerance.
"""
import json
import os
import sys

import numpy as np
import torch
import transformers

sys.path.insert(0, os.path.dirname(__file__))
from byte_vocabulary import save_byte_tokenizer  # noqa: E402

out, variant = sys.argv[1:3]
torch.manual_seed(5)
vocab, micro_batch, seq_len = 257, 4, 32  # 256 bytes and <|endoftext|>
common = dict(vocab_size=vocab, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=64, num_experts_per_tok=2,
              tie_word_embeddings=False, bos_token_id=None, eos_token_id=None)
if variant == "mixtral":
    config = transformers.MixtralConfig(intermediate_size=24, num_local_experts=4, **common)
    model = transformers.MixtralForCausalLM(config)
elif variant == "qwen3_moe":
    config = transformers.Qwen3MoeConfig(intermediate_size=40, moe_intermediate_size=16,
                                         num_experts=4, decoder_sparse_step=2, head_dim=12,
                                         norm_topk_prob=False, **common)
    model = transformers.Qwen3MoeForCausalLM(config)
else:
    sys.exit(f"unknown variant {variant}")
with torch.no_grad():
    for p in model.parameters():
        if p.dim() > 1:
            p.normal_(0, 0.2)
model_dir = os.path.join(out, "model")
model.save_pretrained(model_dir, max_shard_size="20KB")

save_byte_tokenizer(os.path.join(model_dir, "tokenizer.json"))

tokens = np.random.default_rng(7).integers(0, vocab, size=4097, dtype=np.uint16)
header = np.zeros(256, dtype=np.int32)
header[0], header[1], header[2] = 20240520, 1, tokens.size  # llm.c: magic, version, count
with open(os.path.join(out, "tokens.bin"), "wb") as f:
    f.write(header.tobytes())
    f.write(tokens.tobytes())
loaded = type(model).from_pretrained(model_dir, dtype=torch.float32).eval()
window = torch.from_numpy(tokens[:micro_batch * seq_len].astype(np.int64))
with torch.no_grad():
    logits = loaded(window.view(micro_batch, seq_len)).logits
np.save(os.path.join(out, "logits.npy"), logits.numpy())

with open(os.path.join(out, "items.jsonl"), "w") as f:
    for context, choices in [("The cat sat on the", ["mat", "roof", "moon"]),
                             ("One, two, three,", ["four", "five"]),
                             ("Déjà vu: the café's", ["crème brûlée", "croissant"])]:
        f.write(json.dumps({"context": context, "choices": choices, "label": 0}) + "\n")
with open(os.path.join(out, "task.toml"), "w") as f:
    f.write('name = "moe"\nkind = "choice"\nitems = "items.jsonl"\n')
shards = [n for n in os.listdir(model_dir) if n.endswith(".safetensors")]
print(f"made {type(model).__name__}: {len(shards)} shards")
