"""A random model made by transformers, for Kiln to load through model.init_from.

Run by tools/interop.sh, in .venv/:
    import_make.py OUT VARIANT DTYPE
VARIANT: gpt (GPT2LMHeadModel) or llama_gqa (LlamaForCausalLM, 4 query heads over 2 key/value
heads). DTYPE: float32 or bfloat16. Writes
  OUT/model/        save_pretrained(max_shard_size="20KB"): sharded, with
                    model.safetensors.index.json, in DTYPE
  OUT/tokens.bin    4097 random token ids in llm.c's shard format (what `kiln prepare` writes)
  OUT/loss.txt      transformers' mean cross-entropy over the shard's windows of 4 x 32 + 1
                    tokens, laid out as Kiln's loader lays them, computed in fp32 from the saved
                    (DTYPE) weights
"""
import os
import sys

import numpy as np
import torch
import transformers

out, variant, dtype = sys.argv[1], sys.argv[2], getattr(torch, sys.argv[3])
torch.manual_seed(1234)
vocab, micro_batch, seq_len = 96, 4, 32
if variant == "gpt":
    config = transformers.GPT2Config(vocab_size=vocab, n_positions=64, n_embd=32, n_layer=2,
                                     n_head=2, bos_token_id=None, eos_token_id=None)
    model = transformers.GPT2LMHeadModel(config)
elif variant == "llama_gqa":
    config = transformers.LlamaConfig(vocab_size=vocab, hidden_size=32, intermediate_size=64,
                                      num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, max_position_embeddings=64,
                                      rms_norm_eps=1e-5, tie_word_embeddings=False,
                                      bos_token_id=None, eos_token_id=None)
    model = transformers.LlamaForCausalLM(config)
else:
    sys.exit(f"unknown variant {variant}")
model.to(dtype).save_pretrained(os.path.join(out, "model"), max_shard_size="20KB")

tokens = np.random.default_rng(7).integers(0, vocab, size=4097, dtype=np.uint16)
header = np.zeros(256, dtype=np.int32)
header[0], header[1], header[2] = 20240520, 1, tokens.size  # llm.c: magic, version, count
with open(os.path.join(out, "tokens.bin"), "wb") as f:
    f.write(header.tobytes())
    f.write(tokens.tobytes())

loaded = type(model).from_pretrained(os.path.join(out, "model"), dtype=torch.float32).eval()
window, losses = micro_batch * seq_len, []
with torch.no_grad():
    for start in range(0, (tokens.size - 1) // window * window, window):
        buf = torch.from_numpy(tokens[start:start + window + 1].astype(np.int64))
        x, y = buf[:-1].view(micro_batch, seq_len), buf[1:].view(micro_batch, seq_len)
        logits = loaded(x).logits
        losses.append(torch.nn.functional.cross_entropy(logits.reshape(-1, vocab),
                                                        y.reshape(-1)).item())
with open(os.path.join(out, "loss.txt"), "w") as f:
    f.write(f"{sum(losses) / len(losses):.6f}\n")
shards = [n for n in os.listdir(os.path.join(out, "model")) if n.endswith(".safetensors")]
print(f"{type(model).__name__} in {sys.argv[3]}: {len(shards)} shards, loss "
      f"{sum(losses) / len(losses):.6f} over {len(losses)} windows")
