#!/usr/bin/env python3
"""Pins Kiln's Python packages by version and SHA-256 from the top-level names in *.in.

torch.in is what the build needs (LibTorch comes in PyPI's torch wheel); tests.in adds what the
test suite runs against (the client libraries users open Kiln's files with, and the packages that
ship the third-party files the tests use). Both are resolved together, by pip itself, so that one
environment holds them all; torch.txt then keeps the part torch needs and tests.txt the rest,
after a line that includes torch.txt. tools/setup.sh installs them with --require-hashes.
    tools/requirements/lock.py     # run with any Python 3.11 that has pip; rewrites the two .txt
"""
import json
import pathlib
import subprocess
import sys
import tempfile

here = pathlib.Path(__file__).resolve().parent


def resolve(*inputs):
    """pip's resolution of the requirement files `inputs`: {name: (version, file, sha256)}."""
    with tempfile.TemporaryDirectory() as scratch:
        report = pathlib.Path(scratch) / "report.json"
        args = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed",
                "--quiet", "--report", str(report)]
        for path in inputs:
            args += ["-r", str(here / path)]
        subprocess.run(args, check=True)
        chosen = {}
        for item in json.loads(report.read_text())["install"]:
            meta, download = item["metadata"], item["download_info"]
            chosen[meta["name"].lower()] = (meta["version"],
                                           download["archive_info"]["hashes"]["sha256"])
        return chosen


def write(path, header, packages, include=None):
    lines = [f"# {line}" for line in header]
    if include:
        lines.append(f"-r {include}")
    for name in sorted(packages):
        version, sha256 = packages[name]
        lines.append(f"{name}=={version} \\\n    --hash=sha256:{sha256}")
    (here / path).write_text("\n".join(lines) + "\n")


def main():
    both = resolve("torch.in", "tests.in")
    torch_names = set(resolve("torch.in"))
    made_by = "Written by tools/requirements/lock.py from {} (pip's own resolution); do not edit."
    write("torch.txt", ["torch from PyPI and all it installs, pinned by version and SHA-256.",
                        made_by.format("torch.in")],
          {name: both[name] for name in torch_names})
    write("tests.txt", ["What the test suite adds to torch.txt, pinned by version and SHA-256.",
                        made_by.format("tests.in")],
          {name: pin for name, pin in both.items() if name not in torch_names}, "torch.txt")


if __name__ == "__main__":
    main()
