"""First command on a GPU machine: is the CUDA path the same computation as the CPU reference?

Trains one small mixed batch (every PE of Table 1, two seeds, dropout included) for two epochs
with each step mode -- eager on the CPU (the reference), eager, graph and compile on CUDA --
and compares final validation logits and weights with the CPU run, in fp32 (TF32 off, the
default of ``lstpe.training.train.TF32``). Then checks that the device's mixed precision
(:func:`lstpe.runtime.choose_amp`: bf16 on capability >= 8.0, fp16 with per-model loss scaling
on a T4 or V100) stays close, and that training left the global TF32 flags as they were.
Prints one line per mode and exits non-zero on a mismatch, so no GPU time is spent training
with a broken step.

    PYTHONPATH=. python scripts/gpu_check.py [--modes eager graph compile]
"""

from __future__ import annotations

import argparse
import sys
import time

import torch

from lstpe.experiments.registry import table1_pes
from lstpe.nn.architecture import ModelConfig
from lstpe.training.config import TrainConfig
from lstpe.training.train import train


def run(mode: str, device: str, amp: bool = False):
    cfg = TrainConfig(pes=table1_pes(), seeds=[2235, 6312], epochs=2, batch_size=64,
                      n_train=512, model=ModelConfig(d_model=32, n_layers=2), device=device,
                      step_mode=mode, amp=amp, lr=1e-3, checkpoint_every=0,
                      save_attention=False, noise_levels=[], eval_epochs=[])
    t0 = time.perf_counter()
    r = train(cfg, progress=False)
    return r, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--modes", nargs="+", default=["eager", "graph", "compile"])
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("gpu_check: no CUDA device here", file=sys.stderr)
        return 2
    # TF32 is off in train() unless lstpe.training.train.TF32 is set; the flags are restored after
    # it
    from lstpe.runtime import choose_amp

    print(f"amp on this GPU: {choose_amp('cuda')[1]}")
    ref, wall = run("eager", "cpu")
    print(f"cpu eager: {wall:.1f} s (reference)")
    bad = 0
    for mode in args.modes:
        for amp in (False, True):
            try:
                r, wall = run(mode, "cuda", amp)
            except Exception as e:  # noqa: BLE001 - report and go on with the next mode
                print(f"cuda {mode} amp={amp}: FAILED {type(e).__name__}: {e}")
                bad += 1
                continue
            d = (r.artifacts["val_logits"] - ref.artifacts["val_logits"]).abs().max().item()
            acc = (r.final("val")["accuracy"].to_numpy()
                   - ref.final("val")["accuracy"].to_numpy())
            tol = 0.5 if amp else 1e-2
            ok = d < tol
            bad += not ok
            print(f"cuda {mode} amp={amp}: {wall:.1f} s, max |logit diff| {d:.2e}, "
                  f"max |val acc diff| {abs(acc).max():.3f} -> {'ok' if ok else 'MISMATCH'}")
    flags = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    run("eager", "cuda")
    if flags != (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32):
        print("train() changed the global TF32 flags: MISMATCH")
        bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
