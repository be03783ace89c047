"""Each chapter's execution time, and its slowest cells, measured in one run.

Executes the chapters (all of ``book/`` by default) with papermill, as the book build and the
tests do, each in a fresh kernel, and prints per chapter the wall time, the sum of its cells'
times and its three slowest cells (papermill's per-cell ``duration``), then the total. The
executed notebooks are kept under ``--out`` (default: a temporary folder), so a slow cell can
be read afterwards. Nothing here asserts a time; run it on a machine doing nothing else.

    python benchmarks/chapter_times.py                      # every chapter
    python benchmarks/chapter_times.py 06_sigma_sweep 07    # chapters whose name starts so
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"


def chapters(prefixes: list[str]) -> list[Path]:
    """The book's notebooks whose file name starts with one of ``prefixes`` (all if none).

    Raises:
        SystemExit: a prefix matches no chapter (naming it and the chapters there are).
    """
    every = sorted(BOOK.glob("*.ipynb"))
    if not prefixes:
        return every
    out = []
    for p in prefixes:
        hit = [nb for nb in every if nb.name.startswith(p)]
        if not hit:
            raise SystemExit(f"no chapter starts with {p!r}; chapters: "
                             + ", ".join(nb.stem for nb in every))
        out += [nb for nb in hit if nb not in out]
    return out


def run_one(nb: Path, out: Path) -> dict:
    """Execute ``nb`` into ``out`` with papermill; its wall time (s) and per-cell times."""
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "papermill", str(nb), str(out), "--cwd",
                           str(BOOK), "-k", "python3", "--no-progress-bar"],
                          capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        return {"name": nb.stem, "wall_s": wall, "error": proc.stderr.strip()[-400:]}
    cells = json.loads(out.read_text())["cells"]
    timed = [(c.get("metadata", {}).get("papermill", {}).get("duration") or 0.0,
              i, "".join(c["source"]).strip().splitlines()[:1])
             for i, c in enumerate(cells) if c["cell_type"] == "code"]
    return {"name": nb.stem, "wall_s": wall, "cells_s": sum(t for t, _, _ in timed),
            "slowest": sorted(timed, reverse=True)[:3]}


def cpu_flags() -> str:
    """The CPU's vector flags that decide the matmul kernels (Linux; else the platform)."""
    try:
        flags = Path("/proc/cpuinfo").read_text().split("flags")[1].splitlines()[0].split()
    except (OSError, IndexError):
        return platform.processor() or platform.machine()
    keep = [f for f in flags if f.startswith(("avx", "amx", "fma"))]
    return " ".join(sorted(set(keep))) or "no AVX"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("chapters", nargs="*", help="chapter name prefixes (default: all)")
    ap.add_argument("--out", type=Path, default=None, help="where executed notebooks go")
    a = ap.parse_args(argv)
    out = a.out or Path(tempfile.mkdtemp(prefix="chapter-times-"))
    out.mkdir(parents=True, exist_ok=True)
    print(f"{os.cpu_count()} cores; CPU flags: {cpu_flags()}; executed notebooks in {out}")
    total, failed = 0.0, 0
    for nb in chapters(a.chapters):
        r = run_one(nb, out / nb.name)
        total += r["wall_s"]
        if "error" in r:
            failed += 1
            print(f"{r['name']:<28} {r['wall_s']:7.1f} s  FAILED: {r['error']}")
            continue
        slow = "; ".join(f"cell {i} {t:.1f} s {src[0][:40] if src else ''!r}"
                         for t, i, src in r["slowest"])
        print(f"{r['name']:<28} {r['wall_s']:7.1f} s (cells {r['cells_s']:.1f} s)  {slow}")
    print(f"{'total':<28} {total:7.1f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
