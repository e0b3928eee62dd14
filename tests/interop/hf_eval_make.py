"""A model directory transformers makes, that Kiln never trained: a random model saved with
save_pretrained beside a published tokenizer.json, for `kiln eval --hf` (tests/interop/hf_eval_test.sh).

    hf_eval_make.py OUT VARIANT SOURCE
VARIANT llama: a LlamaForCausalLM with grouped key/value heads, saved sharded, and Meta's
Llama 3 tokenizer.json (SOURCE/data/tokenizers/llama3); qwen_tokenizer: the same model shape
with Qwen 2.5's tokenizer.json (SOURCE/data/tokenizers/qwen2_5: NFC normalization). VARIANT gpt2: a GPT2LMHeadModel, one
file, and GPT-2's tokenizer made by the tokenizers library from OpenAI's vocabulary files
(SOURCE/data/gpt2: byte-level BPE, as Hugging Face's gpt2 tokenizer.json) and saved.
"""
import os
import shutil
import sys

import torch
import transformers
from tokenizers import Tokenizer, decoders, models, pre_tokenizers

out, variant, source = sys.argv[1:4]
torch.manual_seed(5)
if variant in ("llama", "qwen_tokenizer"):
    published = "llama3" if variant == "llama" else "qwen2_5"
    config = transformers.LlamaConfig(vocab_size=128256 if variant == "llama" else 151936,
                                      hidden_size=32, intermediate_size=64,
                                      num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, max_position_embeddings=128,
                                      tie_word_embeddings=False)
    model = transformers.LlamaForCausalLM(config)
    model.save_pretrained(out, max_shard_size="2MB")
    shutil.copy(os.path.join(source, f"data/tokenizers/{published}/tokenizer.json"), out)
elif variant == "gpt2":
    config = transformers.GPT2Config(vocab_size=50257, n_positions=128, n_embd=32, n_layer=2,
                                     n_head=2)
    model = transformers.GPT2LMHeadModel(config)
    model.save_pretrained(out)
    tokenizer = Tokenizer(models.BPE.from_file(os.path.join(source, "data/gpt2/encoder.json"),
                                               os.path.join(source, "data/gpt2/vocab.bpe")))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.save(os.path.join(out, "tokenizer.json"))
else:
    sys.exit(f"hf_eval_make: unknown variant {variant}")
print(f"made {variant} in {out}: {sorted(os.listdir(out))}")
