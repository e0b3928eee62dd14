"""Kiln's logits against transformers' on the same tokens.

Run by tools/interop.sh, in .venv/:
    logits_check.py KILN_NPY TRANSFORMERS_NPY TOLERANCE
Both .npy files hold float32 logits [batch, seq_len, vocab] (`kiln eval --logits`, and what the
test's maker script computed with transformers). Fails when the shapes differ or any logit is
more than TOLERANCE away; prints the largest difference.
"""
import sys

import numpy as np

kiln, theirs, tolerance = np.load(sys.argv[1]), np.load(sys.argv[2]), float(sys.argv[3])
if kiln.shape != theirs.shape:
    print(f"FAIL: kiln's logits are {kiln.shape}, transformers' {theirs.shape}")
    sys.exit(1)
worst = float(np.abs(kiln.astype(np.float64) - theirs).max())
if worst > tolerance:
    print(f"FAIL: kiln's logits differ from transformers' by up to {worst:.3g} (> {tolerance})")
    sys.exit(1)
print(f"ok: logits {kiln.shape} equal transformers' within {worst:.2g}")
