#!/usr/bin/env python3
"""Compares a model directory with a committed gpt-oss manifest (tests/data/gpt_oss_*_manifest.json).

Reads only the safetensors headers (and model.safetensors.index.json), never the data, and checks:
every manifest tensor is present with the manifest's dtype and shape, no other tensor exists, the
shard files are the manifest's, each tensor sits in the manifest's shard (where recorded), and the
index's total_size equals the manifest's. Exit 0 when everything matches, 1 with one line per
difference otherwise. Standard library only.

Usage: tools/check_against_manifest.py MODEL_DIR tests/data/gpt_oss_20b_manifest.json
"""
import json
import pathlib
import struct
import sys


def read_header(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    header.pop("__metadata__", None)
    return header


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    model = pathlib.Path(sys.argv[1])
    manifest = json.loads(pathlib.Path(sys.argv[2]).read_text())
    problems = []

    index_path = model / "model.safetensors.index.json"
    if index_path.exists():
        index = json.loads(index_path.read_text())
        files = sorted(set(index["weight_map"].values()))
        if index["metadata"]["total_size"] != manifest["total_size"]:
            problems.append(f"index total_size {index['metadata']['total_size']} != {manifest['total_size']}")
    else:
        files = ["model.safetensors"]
    if files != manifest["shards"]:
        problems.append(f"shard files {files} != {manifest['shards']}")

    stored = {}  # name -> (dtype, shape, file)
    for name in files:
        for tensor, info in read_header(model / name).items():
            stored[tensor] = (info["dtype"], info["shape"], name)

    total = 0
    for row in manifest["tensors"]:
        name, dtype, shape = row[0], row[1], row[2]
        if name not in stored:
            problems.append(f"missing {name}")
            continue
        got_dtype, got_shape, got_file = stored.pop(name)
        if (got_dtype, got_shape) != (dtype, shape):
            problems.append(f"{name}: {got_dtype} {got_shape}, manifest {dtype} {shape}")
        if len(row) > 3 and got_file != manifest["shards"][row[3]]:
            problems.append(f"{name}: in {got_file}, manifest {manifest['shards'][row[3]]}")
        size = {"BF16": 2, "U8": 1}[dtype]
        for d in shape:
            size *= d
        total += size
    problems += [f"unexpected {name}" for name in sorted(stored)]
    if total != manifest["total_size"]:
        problems.append(f"manifest tensors total {total} != total_size {manifest['total_size']}")

    for p in problems:
        print(p)
    if problems:
        sys.exit(1)
    print(f"{model}: {len(manifest['tensors'])} tensors, {len(files)} files match {sys.argv[2]}")


if __name__ == "__main__":
    main()
