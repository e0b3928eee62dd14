"""A random tiny model transformers makes with one config.json field away from its default,
saved with save_pretrained for `kiln eval --hf` (tests/interop/hf_config_test.sh), with a
byte-level tokenizer.json and a choice task to score it on.

    hf_config_make.py OUT CASE
Writes OUT/model/ (config.json, model.safetensors, tokenizer.json: one token per byte, no
merges, so that a text's tokens are its bytes whoever encodes it), OUT/task.toml and
OUT/items.jsonl. CASE names the field (see CASES); cases marked "as transformers 4" rewrite the
saved config.json in transformers 4's spelling (rope_theta beside rope_scaling, whose type is
under the pre-4.43 key "type"), which transformers 5 still reads.
"""
import json
import os
import sys

import torch
import transformers

sys.path.insert(0, os.path.dirname(__file__))
from byte_vocabulary import save_byte_tokenizer  # noqa: E402

LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 16}
CASES = {
    # GPT-2: what Kiln's gpt reads besides the sizes.
    "gpt2_layer_norm_epsilon": ("gpt2", {"layer_norm_epsilon": 0.25}),
    "gpt2_gelu_pytorch_tanh": ("gpt2", {"activation_function": "gelu_pytorch_tanh"}),
    # Llama: a head size other than hidden / heads, the norm's epsilon, the rotary base, a tied
    # head, and Llama 3's scaling in transformers 4's old spelling.
    "llama_head_dim": ("llama", {"head_dim": 12}),
    "llama_rms_norm_eps": ("llama", {"rms_norm_eps": 0.25}),
    "llama_rope_theta": ("llama", {"rope_parameters": {"rope_type": "default",
                                                       "rope_theta": 37.0}}),
    "llama_tie_word_embeddings": ("llama", {"tie_word_embeddings": True}),
    "llama_llama3_type_key": ("llama", {"rope_parameters": {**LLAMA3, "rope_theta": 500.0}}),
}


out, case = sys.argv[1:3]
family, fields = CASES[case]
torch.manual_seed(11)
vocab = 257  # 256 bytes and <|endoftext|>
if family == "gpt2":
    config = transformers.GPT2Config(vocab_size=vocab, n_positions=64, n_embd=32, n_layer=2,
                                     n_head=2, bos_token_id=256, eos_token_id=256, **fields)
    model = transformers.GPT2LMHeadModel(config)
else:
    config = transformers.LlamaConfig(vocab_size=vocab, hidden_size=32, intermediate_size=48,
                                      num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, max_position_embeddings=64,
                                      **{"tie_word_embeddings": False, **fields})
    model = transformers.LlamaForCausalLM(config)
# Larger weights than the initialisation's 0.02, so that each field moves the logits well past
# the comparison's tolerance.
with torch.no_grad():
    for p in model.parameters():
        if p.dim() > 1:
            p.normal_(0, 0.3)
model_dir = os.path.join(out, "model")
model.save_pretrained(model_dir)
if case == "llama_llama3_type_key":
    path = os.path.join(model_dir, "config.json")
    saved = json.load(open(path))
    rope = saved.pop("rope_parameters")
    saved["rope_theta"] = rope.pop("rope_theta")
    saved["rope_scaling"] = {"type": rope.pop("rope_type"), **rope}
    json.dump(saved, open(path, "w"), indent=2)

save_byte_tokenizer(os.path.join(model_dir, "tokenizer.json"))

with open(os.path.join(out, "items.jsonl"), "w") as f:
    for context, choices in [("The cat sat on the", ["mat", "roof", "moon"]),
                             ("One, two, three,", ["four", "five"]),
                             ("Déjà vu: the café's", ["crème brûlée", "croissant"])]:
        f.write(json.dumps({"context": context, "choices": choices, "label": 0}) + "\n")
with open(os.path.join(out, "task.toml"), "w") as f:
    f.write('name = "fields"\nkind = "choice"\nitems = "items.jsonl"\n')
print(f"made {case}: {type(model).__name__} with {fields}")
