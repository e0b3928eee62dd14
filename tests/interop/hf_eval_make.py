"""A model transformers makes, that Kiln never trained, saved with save_pretrained for
`kiln eval --hf` (tests/interop/hf_eval_test.sh, which puts its tokenizer.json beside it).

    hf_eval_make.py OUT VARIANT
VARIANT llama: a LlamaForCausalLM with grouped key/value heads and Llama 3's vocabulary, saved
sharded; qwen_tokenizer: the same shape with Qwen2's vocabulary; gpt2: a GPT2LMHeadModel
with GPT-2's, one file.
"""
import os
import sys

import torch
import transformers

out, variant = sys.argv[1:3]
torch.manual_seed(5)
if variant in ("llama", "qwen_tokenizer"):
    config = transformers.LlamaConfig(vocab_size=128256 if variant == "llama" else 151936,
                                      hidden_size=32, intermediate_size=64,
                                      num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, max_position_embeddings=128,
                                      tie_word_embeddings=False)
    model = transformers.LlamaForCausalLM(config)
    model.save_pretrained(out, max_shard_size="2MB")
elif variant == "gpt2":
    config = transformers.GPT2Config(vocab_size=50257, n_positions=128, n_embd=32, n_layer=2,
                                     n_head=2)
    model = transformers.GPT2LMHeadModel(config)
    model.save_pretrained(out)
else:
    sys.exit(f"hf_eval_make: unknown variant {variant}")
print(f"made {variant} in {out}: {sorted(os.listdir(out))}")
