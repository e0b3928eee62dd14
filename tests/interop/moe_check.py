"""Kiln's mixture-of-experts layer against transformers' own blocks on the same weights.

Run by tools/interop.sh, in .venv/:
    moe_check.py LAYER_SAFETENSORS
The file (tests/interop/moe_transformers_test.cpp wrote it) holds the layer's weights under
transformers' names (gate.weight, experts.gate_up_proj, experts.down_proj), an input x
[batch, time, hidden], and what Kiln computed from them: the output y, and the load-balancing
and router z-losses of that pass. Its metadata names the routing ("mixtral" or "qwen3"), top_k
and norm_topk_prob. Here MixtralSparseMoeBlock or Qwen3MoeSparseMoeBlock gets the same weights
and input; transformers' load_balancing_loss_func (one layer) and SwitchTransformers'
router_z_loss_func score its router logits. Each must equal Kiln's within 1e-5.
Prints one line; exits 1 on a difference.
"""
import json
import sys

import torch
from safetensors import safe_open
from transformers import MixtralConfig, Qwen3MoeConfig
from transformers.models.mixtral.modeling_mixtral import MixtralSparseMoeBlock
from transformers.models.qwen3_moe.modeling_qwen3_moe import (Qwen3MoeSparseMoeBlock,
                                                              load_balancing_loss_func)
from transformers.models.switch_transformers.modeling_switch_transformers import \
    router_z_loss_func

with safe_open(sys.argv[1], framework="pt") as f:
    meta = f.metadata()
    t = {name: f.get_tensor(name) for name in f.keys()}
experts, hidden = t["gate.weight"].shape
ffn = t["experts.down_proj"].shape[2]
top_k = int(meta["top_k"])
if meta["routing"] == "mixtral":
    config = MixtralConfig(hidden_size=hidden, intermediate_size=ffn, num_local_experts=experts,
                           num_experts_per_tok=top_k)
    block = MixtralSparseMoeBlock(config)
else:
    config = Qwen3MoeConfig(hidden_size=hidden, moe_intermediate_size=ffn, num_experts=experts,
                            num_experts_per_tok=top_k,
                            norm_topk_prob=meta["norm_topk_prob"] == "true")
    block = Qwen3MoeSparseMoeBlock(config)
block.load_state_dict({k: t[k] for k in ("gate.weight", "experts.gate_up_proj",
                                         "experts.down_proj")})
block.eval()
x = t["x"]
with torch.no_grad():
    y = block(x)
    logits = torch.nn.functional.linear(x.reshape(-1, hidden), block.gate.weight)
    balance = load_balancing_loss_func((logits,), experts, top_k)
    z = router_z_loss_func(logits.reshape(x.shape[0], x.shape[1], experts))
gaps = {
    "output": (y - t["y"]).abs().max().item(),
    "aux_loss": abs(balance.item() - t["aux_loss"].item()),
    "z_loss": abs(z.item() - t["z_loss"].item()),
}
ok = all(gap <= 1e-5 for gap in gaps.values())
print(json.dumps({"routing": meta["routing"], "norm_topk_prob": meta["norm_topk_prob"],
                  "aux_loss": balance.item(), "z_loss": z.item(), "max_gaps": gaps, "ok": ok}))
sys.exit(0 if ok else 1)
