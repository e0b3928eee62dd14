"""A sharded snapshot read by the safetensors library, not by Kiln.

    snapshot_shards_check.py SNAPSHOT_DIR HF_DIR

Checks, for a snapshot written by two ranks:
  - each shard_R.safetensors opens with safetensors, and every part the manifest lists is a
    tensor of the file (named <tensor>, or <tensor>@<offsets> away from the origin: docs/snapshots.md) with the manifest's dtype and shape, whose bytes are the file's bytes at
    the manifest's [begin, end);
  - every file's size is the manifest's;
  - the parts of each tensor tile its whole shape exactly once, and both ranks wrote parts;
  - each model tensor, joined from its parts, equals bit for bit a parameter (each matched once)
    or a buffer (rotary frequencies: one in transformers, one a layer in Kiln) of the model that
    transformers loads from `kiln export` of the same snapshot, and every parameter of that model
    is matched; each optimizer state tensor has its parameter's whole shape.
"""

import json
import os
import sys

import numpy as np
import torch
from safetensors import safe_open
from transformers import AutoModelForCausalLM


def fail(message):
    print(f"FAIL: {message}")
    sys.exit(1)


def read_parts(snapshot):
    manifest = json.load(open(os.path.join(snapshot, "manifest.json")))
    parts = {}  # tensor -> [(offsets, array, whole, file)]
    for name, entry in manifest["files"].items():
        path = os.path.join(snapshot, name)
        if os.path.getsize(path) != entry["bytes"]:
            fail(f"{name} holds {os.path.getsize(path)} bytes, the manifest says {entry['bytes']}")
        if not name.endswith(".safetensors"):
            continue
        raw = open(path, "rb").read()
        with safe_open(path, framework="pt") as f:
            keys = set(f.keys())
            for part in entry["parts"]:
                key = part["tensor"]
                if any(part["offsets"]):
                    key += "@" + ",".join(str(o) for o in part["offsets"])
                if key not in keys:
                    fail(f"{name} holds no tensor {key} (it holds {sorted(keys)[:3]}...)")
                tensor = f.get_tensor(key)
                if list(tensor.shape) != part["shape"]:
                    fail(f"{name}: {part['tensor']} is {list(tensor.shape)}, manifest {part['shape']}")
                if part["dtype"] != "F32" or tensor.dtype != torch.float32:
                    fail(f"{name}: {part['tensor']} is {tensor.dtype}, manifest {part['dtype']}")
                array = tensor.numpy()
                if raw[part["begin"] : part["end"]] != array.tobytes():
                    fail(f"{name}: {part['tensor']}'s bytes are not at [{part['begin']}, {part['end']})")
                parts.setdefault(part["tensor"], []).append(
                    (part["offsets"], array, part["whole"], name)
                )
    return parts


def join(tensor, pieces):
    whole = pieces[0][2]
    joined = np.zeros(whole, dtype=np.float32)
    covered = np.zeros(whole, dtype=np.int32)
    for offsets, array, piece_whole, _ in pieces:
        if piece_whole != whole:
            fail(f"{tensor}: parts disagree on the whole shape ({piece_whole} against {whole})")
        box = tuple(slice(o, o + n) for o, n in zip(offsets, array.shape))
        joined[box] = array
        covered[box] += 1
    if not (covered == 1).all():
        fail(f"{tensor}: its parts cover some elements {covered.min()} to {covered.max()} times")
    return joined


def main():
    snapshot, hf = sys.argv[1], sys.argv[2]
    parts = read_parts(snapshot)
    files = {name for pieces in parts.values() for *_, name in pieces}
    if files != {"shard_0.safetensors", "shard_1.safetensors"}:
        fail(f"parts come from {sorted(files)}, not from both ranks' shards")
    split = [t for t, pieces in parts.items() if len(pieces) == 2]
    if not split:
        fail("no tensor is split over the two ranks")

    model = AutoModelForCausalLM.from_pretrained(hf, torch_dtype=torch.float32)
    unmatched = {k: v.detach().numpy() for k, v in model.named_parameters()}
    buffers = [v.numpy() for _, v in model.named_buffers()]
    model_tensors = 0
    for tensor, pieces in sorted(parts.items()):
        joined = join(tensor, pieces)
        if tensor.startswith("model/"):
            model_tensors += 1
            match = next(
                (k for k, v in unmatched.items() if v.shape == joined.shape and np.array_equal(v, joined)),
                None,
            )
            if match is not None:
                del unmatched[match]
            elif not any(b.shape == joined.shape and np.array_equal(b, joined) for b in buffers):
                fail(f"{tensor} {list(joined.shape)} equals no tensor transformers loaded")
        elif tensor.startswith("optimizer/"):
            param = "model/" + tensor.split("/")[1]
            if param not in parts or parts[param][0][2] != list(joined.shape):
                fail(f"{tensor} {list(joined.shape)} does not have its parameter's whole shape")
    if unmatched:
        fail(f"transformers holds parameters the snapshot lacks: {sorted(unmatched)}")
    print(
        f"ok: {model_tensors} model tensors and {len(parts) - model_tensors} optimizer tensors "
        f"from 2 shards; {len(split)} split over the ranks; every model tensor equals transformers'"
    )


main()
