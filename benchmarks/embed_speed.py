"""What the ``fast`` extra buys: the bundled model as it is against its int8 build.

The texts are the blocks of real Claude Code sessions (text, tool inputs and results,
each cut to 2,000 characters as a stored event's text would be long), embedded in the
indexer's batches of 8 by two ``LocalEmbedder`` on the same texts in the same run:

- **as bundled**: ``model.onnx`` as the package ships it (its int8 weights folded back
  to float32 when loaded): what a core install runs;
- **int8 build**: the per-channel int8 build ``embeddings/quantize.py`` makes once
  (needs ``onnx``, the ``fast`` extra); its build time is reported apart.

Each is warmed on one batch, then timed over all texts (wall and process CPU), twice in
alternation so that a noisy neighbour hits both.

Usage: python benchmarks/embed_speed.py --data ../shared/data/claude_code_sessions
"""

from __future__ import annotations

import argparse
import gzip
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from common import machine
from loci.embeddings import LocalEmbedder
from loci.embeddings.local import default_model_path

BATCH = 8
CUT = 2_000


def _block_text(block: dict[str, Any]) -> str:
    if block.get("type") == "text":
        return str(block.get("text", ""))
    if block.get("type") == "tool_use":
        return json.dumps(block.get("input", {}), ensure_ascii=False)
    content = block.get("content", "")
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content)
    return str(content)


def texts(data: Path) -> list[str]:
    found: list[str] = []
    for path in sorted(data.glob("*.json.gz")):
        with gzip.open(path) as handle:
            session = json.load(handle)
        for message in session["messages"]:
            content = message["content"]
            blocks = content if isinstance(content, list) else [{"type": "text",
                                                                 "text": content}]
            found += [text[:CUT] for block in blocks if (text := _block_text(block).strip())]
    return found


def timed(embedder: LocalEmbedder, items: list[str]) -> tuple[float, float, np.ndarray]:
    wall, cpu = time.perf_counter(), time.process_time()
    vectors = [embedder.embed(items[i:i + BATCH]) for i in range(0, len(items), BATCH)]
    return time.perf_counter() - wall, time.process_time() - cpu, np.vstack(vectors)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--limit", type=int, default=600, help="texts to embed")
    args = parser.parse_args()
    items = texts(args.data)[:args.limit]
    with tempfile.TemporaryDirectory() as cache:
        bundled = LocalEmbedder(model_path=default_model_path())
        fast = LocalEmbedder(cache=cache)
        started = time.perf_counter()
        fast.embed(items[:BATCH])
        build = time.perf_counter() - started
        bundled.embed(items[:BATCH])
        runs: dict[str, list[tuple[float, float]]] = {"as bundled": [], "int8 build": []}
        last: dict[str, np.ndarray] = {}
        for _ in range(2):
            for name, embedder in (("as bundled", bundled), ("int8 build", fast)):
                wall, cpu, last[name] = timed(embedder, items)
                runs[name].append((wall, cpu))
        print(f"{machine()}; {len(items)} texts, batches of {BATCH}; "
              f"first use with the int8 build (building it): {build:.1f} s; "
              f"model: {fast.model_path.name}")
        for name, samples in runs.items():
            print(f"{name:12} " + "  ".join(
                f"{len(items) / wall:6.1f} texts/s ({wall:5.1f} s wall, {cpu:5.1f} s CPU)"
                for wall, cpu in samples))
        agree = (last["as bundled"] * last["int8 build"]).sum(axis=1).min()
        print(f"lowest cosine between the two models' vectors: {agree:.4f}")


if __name__ == "__main__":
    main()
