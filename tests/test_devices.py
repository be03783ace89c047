"""Device paths checked on the CPU: no float64 on the device (MPS), autocast only where torch
has it, precision by device, TF32 flags left alone, memory-aware chunks, stored runs found from
outside the repository, dropout seeds read on the host."""

from __future__ import annotations

import contextlib
import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from lstpe import runtime
from lstpe.brain.task import sum_device
from lstpe.chapters import notebook as nb
from lstpe.nn import dropout as drop
from lstpe.nn.model import BatchedLSTTransformer
from lstpe.training import engine, steps
from lstpe.training import train as train_mod
from lstpe.training.config import TrainConfig
from lstpe.training.optim import StackedOptimizer
from lstpe.training.task import LSTTask, ModelSlot

MIXED = ["2d-fixed", "learn-0.2", "relative", "rope", "c-nope"]


# --------------------------------------------------------------------------- dropout masks


def _old_keep_mask(keys: torch.Tensor, shape: tuple[int, ...], p: torch.Tensor,
                   offset: int = 0) -> torch.Tensor:
    """The implementation before the float64-free threshold (the reference)."""
    n = math.prod(shape)
    e = torch.arange(offset, offset + n, dtype=torch.int64) & drop._MASK32
    u = drop.mix32(drop.mix32(e)[None, :] ^ keys[:, None])
    thresh = (p.to(torch.float64) * 2.0**32).to(torch.int64)[:, None]
    keep = (u >= thresh).to(torch.float32)
    scale = (1.0 / (1.0 - p.to(torch.float32)))[:, None]
    return (keep * scale).view(keys.shape[0], *shape)


@pytest.mark.parametrize("shape", [(1,), (4, 16, 32), (3, 5, 7)])
@pytest.mark.parametrize("offset", [0, 12345])
def test_keep_mask_is_bit_identical_to_the_float64_threshold(shape, offset):
    g = torch.Generator().manual_seed(7)
    ps = torch.cat([torch.tensor([0.0, 0.1, 0.5, 1e-7, 0.9999999, 2.0**-30, 0.3]),
                    torch.rand(9, generator=g)]).float()
    seeds = list(range(len(ps)))
    for epoch, step in [(0, 0), (3, 17), (200, drop.EVAL_STEP)]:
        keys = drop.keys_tensor(seeds, epoch, step)
        new = drop.keep_mask(keys, shape, ps, offset)
        assert torch.equal(new, _old_keep_mask(keys, shape, ps, offset))
    assert torch.equal(drop.keep_threshold(ps), (ps.double() * 2.0**32).long())


# --------------------------------------------------------------------------- no float64


class Float64Spy(TorchDispatchMode):
    """Records every op that makes a float64 tensor on ``device_type`` (None: any device)."""

    def __init__(self, device_type: str | None = None) -> None:
        super().__init__()
        self.device_type, self.seen = device_type, []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor) and t.dtype == torch.float64 and (
                    self.device_type is None or t.device.type == self.device_type):
                self.seen.append(str(func))
        return out


def test_mixed_batch_forward_backward_makes_no_float64_on_the_device(tiny_cfg):
    """The model's device is ``meta`` (any device without float64 would do): the forward and
    backward pass of a mixed batch with dropout creates no float64 tensor there."""
    # torch has no autocast for "meta" (as torch 2.3 for "mps"): attention must not ask for it
    model = BatchedLSTTransformer(MIXED, list(range(len(MIXED))), tiny_cfg)
    seeds = model.dropout_seeds  # read on the host, before the move
    assert seeds == [0]  # 2d-fixed carries dropout
    model = model.to("meta")
    keys = drop.keys_tensor(seeds, 1, 0, "meta")
    x = torch.zeros(8, tiny_cfg.n_tokens, tiny_cfg.n_inputs, device="meta")
    with Float64Spy("meta") as spy:
        logits = model(x, dropout_keys=keys)
        logits.float().sum().backward()
    assert logits.shape[0] == len(MIXED)
    assert spy.seen == []


def test_training_step_makes_no_float64(tiny_cfg, small_splits):
    """One engine step of a mixed batch (dropout included) on the CPU creates no float64
    tensor at all: nothing in the step depends on a device having float64."""
    cfg = TrainConfig(pes=MIXED, seeds=[1], epochs=1, batch_size=16, model=tiny_cfg,
                                device="cpu", checkpoint_every=0, save_attention=False,
                                noise_levels=[])
    slots = [ModelSlot(0, k, s, 1) for k, s in enumerate(cfg.specs)]
    task = LSTTask(cfg, slots, ["adam"] * len(slots), small_splits, {}, torch.device("cpu"))
    opt = StackedOptimizer(task.model.parameters(), ["adam"] * len(slots),
                           [1e-3] * len(slots), [0.0] * len(slots))
    running = engine.Running.zeros(len(slots), torch.device("cpu"))
    step = engine.EagerStep(task, opt, task.model, running, torch.device("cpu"), False)
    task.model.train()
    with Float64Spy() as spy:
        for s, batch in task.batches(1):
            step(batch, task.dropout_keys(1, s))
            break
    assert task.dropout_keys(1, 0) is not None and spy.seen == []


def test_dropout_seeds_are_read_on_the_host_once(tiny_cfg, small_splits, monkeypatch):
    cfg = TrainConfig(pes=["2d-fixed", "learn-0.2"], seeds=[1, 2], epochs=1,
                                batch_size=16, model=tiny_cfg, device="cpu",
                                checkpoint_every=0, save_attention=False, noise_levels=[])
    slots = [ModelSlot(0, k, s, sd) for k, (s, sd) in
             enumerate((s, sd) for s in cfg.specs for sd in cfg.seeds)]
    task = LSTTask(cfg, slots, ["adam"] * 4, small_splits, {}, torch.device("cpu"))

    def no_device_read(self):
        raise AssertionError("dropout_seeds read from the device's drop_idx during training")

    monkeypatch.setattr(type(task.model), "dropout_seeds", property(no_device_read))
    keys = task.dropout_keys(1, 0)
    assert keys.tolist() == [drop.step_key(sd, 1, 0) for sd in (1, 2)]
    task.evaluate(0, True, None)  # val_dropout keys too


def test_brain_sums_stay_off_a_device_without_float64():
    assert sum_device(torch.device("mps")) == torch.device("cpu")
    assert sum_device(torch.device("cpu")) == torch.device("cpu")


# --------------------------------------------------------------------------- precision


def test_autocast_is_skipped_where_torch_has_none(monkeypatch):
    monkeypatch.setattr(steps, "autocast_supported", lambda device: False)
    ctx = engine.autocast(torch.device("mps"), True)  # torch 2.3 raises for "mps"
    assert isinstance(ctx, contextlib.nullcontext)
    assert engine.amp_dtype(torch.device("cpu"), torch.bfloat16) is None


def test_autocast_follows_the_device_choice(monkeypatch):
    cpu = torch.device("cpu")
    assert isinstance(engine.autocast(cpu, False), contextlib.nullcontext)
    monkeypatch.setattr(runtime, "has_bf16", lambda *a: False)
    assert engine.amp_dtype(cpu, True) is None
    monkeypatch.setattr(runtime, "has_bf16", lambda *a: True)
    assert engine.amp_dtype(cpu, True) == torch.bfloat16
    with engine.autocast(cpu, True):
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.bfloat16


@pytest.mark.parametrize("cap, dtype", [((7, 5), torch.float16), ((7, 0), torch.float16),
                                        ((8, 0), torch.bfloat16), ((9, 0), torch.bfloat16)])
def test_choose_amp_by_cuda_capability(cap, dtype):
    got, why = runtime.choose_amp("cuda", capability=cap)
    assert got == dtype and f"{cap[0]}.{cap[1]}" in why
    assert runtime.choose_amp("cuda", capability=cap, asked=False)[0] is None


def test_choose_amp_on_cpu_and_mps(monkeypatch):
    monkeypatch.setattr(runtime, "has_bf16", lambda *a: False)
    assert runtime.choose_amp("cpu") == (None, runtime.choose_amp("cpu")[1])
    assert "no bf16 instructions" in runtime.choose_amp("cpu")[1]
    monkeypatch.setattr(runtime, "has_bf16", lambda *a: True)
    assert runtime.choose_amp("cpu")[0] == torch.bfloat16
    assert runtime.choose_amp("cpu", asked=False)[0] is None
    assert runtime.choose_amp("mps")[0] is None
    assert runtime.precision_name(torch.float16) == "fp16"
    assert runtime.precision_name(None) == "fp32"


def test_loss_scaler_skips_only_the_overflowing_model():
    """Model 1's gradient is infinite: it keeps its weights and moments and its scale halves;
    model 0 gets exactly the update it gets without scaling (powers of two)."""
    torch.manual_seed(0)
    w0 = torch.randn(2, 3)

    def run(scaled: bool):
        w = torch.nn.Parameter(w0.clone())
        opt = StackedOptimizer([w], ["adam", "adam"], [1e-2, 1e-2], [0.0, 0.0])
        sc = engine.LossScaler(2, torch.device("cpu"))
        loss = (w ** 2).sum(1) * torch.tensor([1.0, float("inf")])
        if scaled:
            sc.backward(loss)
            sc.step(opt)
        else:
            loss.sum().backward()
            opt.step()
        return w.detach(), opt, sc

    w, opt, sc = run(True)
    ref, _, _ = run(False)
    assert torch.equal(w[0], ref[0])
    assert torch.equal(w[1], w0[1]) and torch.equal(opt.exp_avg[0][1], torch.zeros(3))
    assert sc.scale.tolist() == [2.0**16, 2.0**15] and sc.good.tolist() == [1.0, 0.0]


def test_tf32_flags_unchanged_by_train_and_setup(tiny_cfg, small_splits, tmp_path,
                                                 monkeypatch):
    monkeypatch.setenv("LSTPE_RESULTS", str(tmp_path))
    before = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32,
              torch.get_float32_matmul_precision())
    cfg = TrainConfig(pes=["learn-0.2"], seeds=[1], epochs=1, batch_size=16,
                                model=tiny_cfg, device="cpu", checkpoint_every=0,
                                save_attention=False, noise_levels=[], eval_epochs=[])
    r = train_mod.train(cfg, progress=False, splits=small_splits)
    nb.setup("preview", "cpu", verbose=False)
    after = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32,
             torch.get_float32_matmul_precision())
    assert after == before
    assert r.manifest["precision"] == "fp32" and r.manifest["tf32"] is None
    # the CUDA branch: set inside, restored after, whatever they were
    with runtime.tf32_mode("cuda", True):
        assert torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
    with runtime.tf32_mode("cuda", False):
        assert not torch.backends.cuda.matmul.allow_tf32
    assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32,
            torch.get_float32_matmul_precision()) == before


# --------------------------------------------------------------------------- memory


def test_table2_on_a_t4_is_split_into_chunks_that_fit():
    from lstpe.experiments.registry import run_config
    from lstpe.training.cost import EVAL_MIN, HEADROOM, chunk_plan

    cfg = run_config("table2", "paper")
    n = len(cfg.pes) * len(cfg.seeds)
    assert n == 315 and cfg.max_models is None
    free = 15.0 * 2**30  # a 16 GB T4 after the CUDA context
    plan = chunk_plan(cfg, n, free, graph=True, n_val=108)
    assert plan.chunks > 1 and plan.chunks * plan.models >= n > (plan.chunks - 1) * plan.models
    peak = plan.models * (plan.train_bytes + plan.eval_chunk * plan.eval_bytes)
    assert peak <= HEADROOM * free and EVAL_MIN <= plan.eval_chunk <= 2048
    # the same through train's helper, on a (faked) CUDA device; overrides win
    cuda = torch.device("cuda")
    assert train_mod.chunk_sizes(cfg, n, cuda, "graph", 108, free_bytes=free) == \
        (plan.models, plan.eval_chunk)
    assert train_mod.chunk_sizes(cfg, n, cuda, "graph", 108, free_bytes=free,
                                 eval_chunk=500)[1] == 500
    fixed = TrainConfig(**{**cfg.to_dict(), "max_models": 15,
                                     "model": cfg.model})
    assert train_mod.chunk_sizes(fixed, n, cuda, "graph", 108, free_bytes=free)[0] == 15
    # an H100 holds more per chunk; the CPU keeps today's chunks
    assert chunk_plan(cfg, n, 78 * 2**30, n_val=108).models > plan.models
    assert train_mod.chunk_sizes(cfg, n, torch.device("cpu")) == (n, train_mod.EVAL_CHUNK)
    with pytest.raises(MemoryError, match="one model needs"):
        chunk_plan(cfg, n, 2**20)


_PEAK = """
import json, resource, sys
import torch
import torch.nn.functional as F
from lstpe.nn.model import BatchedLSTTransformer
from lstpe.training.config import preset
from lstpe.training.optim import StackedOptimizer

torch.set_num_threads(1)
mode, M, N = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
cfg = preset("paper")
g = torch.Generator().manual_seed(0)
def puzzles(n):  # (n, 16, 5) one-hot cells, as the task encodes them
    return F.one_hot(torch.randint(0, 6, (n, 16), generator=g), 6)[..., 1:].float()
x, y, xv = puzzles(cfg.batch_size), torch.randint(0, 4, (cfg.batch_size,), generator=g), puzzles(N)
with open("/proc/self/statm") as f:
    before = int(f.read().split()[1]) * resource.getpagesize()
model = BatchedLSTTransformer(["2d-fixed"] * M, list(range(M)), cfg.model)
if mode == "train":  # two steps: Adam's moments exist from the first
    opt = StackedOptimizer(model.parameters(), ["adam"] * M, [1e-4] * M, [0.0] * M)
    for _ in range(2):
        loss = F.cross_entropy(model(x).reshape(-1, 4), y.repeat(M), reduction="sum")
        opt.zero_grad()
        loss.backward()
        opt.step()
        del loss
else:
    model.eval()
    with torch.no_grad():
        model(xv)
# VmHWM: this process's own high-water mark (ru_maxrss would keep the parent's across exec)
with open("/proc/self/status") as f:
    peak = next(int(ln.split()[1]) * 1024 for ln in f if ln.startswith("VmHWM:"))
print(json.dumps({"measured": peak - before}))
"""


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="needs Linux /proc")
@pytest.mark.parametrize("mode", ["train", "eval"])
def test_memory_estimate_covers_the_measured_cpu_peak(tmp_path, mode):
    """The per-model estimates that size GPU chunks (:mod:`lstpe.training.cost`) against the
    peak resident memory of 4 paper-size models measured on the CPU, in a fresh process: two
    training steps (weights, gradients, Adam's moments, saved activations) and one no-grad
    evaluation of 1024 puzzles. The estimate must cover the measured peak, and not by more
    than 2.5x (a planner that wastes most of a GPU is wrong too)."""
    import subprocess
    import sys

    from lstpe.training.config import preset
    from lstpe.training.cost import bytes_per_model, eval_bytes_per_puzzle

    M, N = 4, 1024
    script = tmp_path / "peak.py"
    script.write_text(_PEAK)
    # fixed mmap threshold: freed buffers go back to the system, so the resident peak is the
    # live peak (glibc's dynamic threshold would keep freed activations resident)
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    out = subprocess.run([sys.executable, str(script), mode, str(M), str(N)], env=env,
                         capture_output=True, text=True, timeout=300, check=True)
    measured = json.loads(out.stdout.strip().splitlines()[-1])["measured"]
    cfg = preset("paper")
    if mode == "train":
        estimate = M * bytes_per_model(cfg)
    else:
        n_params = sum(p.numel() for p in BatchedLSTTransformer(["2d-fixed"], [0], cfg.model)
                       .parameters())
        estimate = M * (N * eval_bytes_per_puzzle(cfg.model) + 4 * n_params)
    assert measured > 0.25 * estimate  # the step really ran at this size
    assert estimate >= measured, f"{mode}: estimate {estimate / 2**20:.0f} MiB < measured " \
        f"{measured / 2**20:.0f} MiB"
    assert estimate <= 2.5 * measured


def test_a_resumed_run_keeps_its_planned_chunks(tmp_path):
    assert train_mod._layout(tmp_path, 315, 35) == 35
    assert json.loads((tmp_path / "chunk_layout.json").read_text())["models_per_chunk"] == 35
    assert train_mod._layout(tmp_path, 315, 60) == 35  # less memory free now: same chunks
    assert train_mod._layout(None, 315, 60) == 60


# --------------------------------------------------------------------------- stored runs


def _fake_results(root: Path) -> Path:
    res = root / "results"
    for pe in ("2d-fixed", "learn-0.2"):
        (res / "paper" / "table2" / pe / "2235").mkdir(parents=True)
        (res / "paper" / "table2" / pe / "2235" / "manifest.json").write_text("{}")
    (res / "paper" / ".campaign" / "x").mkdir(parents=True)
    (res / "paper" / ".campaign" / "x" / "manifest.json").write_text("{}")
    (res / "cpu" / "table2").mkdir(parents=True)
    (res / "cpu" / "table2" / "manifest.json").write_text("{}")
    return res


def test_setup_outside_the_repository_finds_the_clone(tmp_path, monkeypatch, capsys):
    outside = tmp_path / "chapter"
    outside.mkdir()
    monkeypatch.chdir(outside)
    monkeypatch.delenv("LSTPE_RESULTS", raising=False)
    monkeypatch.setattr(runtime, "_package_root", lambda: None)  # a pip install, no clone
    clone = tmp_path / "content" / "lstpe"
    monkeypatch.setattr(runtime, "CLONE_DIRS", (str(tmp_path / "nowhere"), str(clone)))
    expected = _fake_results(clone)
    S = nb.setup("preview", "cpu")
    out = capsys.readouterr().out
    assert S.results_dir == expected
    assert "2 fragment(s)" in out and "1 run(s) under cpu/" in out and "the clone" in out
    assert runtime.default_results_dir() == expected  # get_run's default too


def test_setup_with_no_stored_runs_warns(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LSTPE_RESULTS", raising=False)
    monkeypatch.setattr(runtime, "_package_root", lambda: None)
    monkeypatch.setattr(runtime, "CLONE_DIRS", (str(tmp_path / "nowhere"),))
    S = nb.setup("paper", "cpu")
    out = capsys.readouterr().out
    assert S.results_dir == Path("results")
    assert out.startswith("WARNING: no stored runs found") and "TRAIN" in out


def test_results_search_order(tmp_path, monkeypatch):
    monkeypatch.setenv("LSTPE_RESULTS", str(tmp_path / "env"))
    assert runtime.find_results() == (tmp_path / "env", "LSTPE_RESULTS")
    monkeypatch.delenv("LSTPE_RESULTS")
    root = runtime.repo_root(Path(__file__).parent)
    assert runtime.find_results(Path(__file__).parent) == (root / "results", "repository")
    monkeypatch.chdir(tmp_path)
    assert runtime.find_results() == (root / "results", "package")  # this checkout's


def test_fp16_with_loss_scaling_trains_and_resumes(tiny_cfg, small_splits, tmp_path,
                                                   monkeypatch):
    """The T4 path (fp16 autocast + per-model loss scaling) on the CPU: it trains, stays close
    to fp32, and a resumed run gives the same history (the scaler is checkpointed)."""
    monkeypatch.setattr(steps, "choose_amp", lambda device, *a, **k: (torch.float16, "T4"))
    kw = dict(pes=["2d-fixed", "learn-0.2"], seeds=[1], epochs=3, batch_size=16,
              model=tiny_cfg, device="cpu", save_attention=False, noise_levels=[], lr=3e-3)
    fp32 = train_mod.train(TrainConfig(**kw, checkpoint_every=0), progress=False,
                           splits=small_splits)
    cfg = TrainConfig(**kw, amp=True, checkpoint_every=1)
    fp16 = train_mod.train(cfg, progress=False, splits=small_splits)
    a, b = fp32.history["loss"].to_numpy(), fp16.history["loss"].to_numpy()
    assert np.isfinite(b).all() and not np.array_equal(a, b)
    # close, not equal: fp16 rounding, and steps whose fp16 gradients overflowed at the
    # initial scale of 2^16 are skipped (per model) while the scale adapts
    assert np.abs(a - b).max() < 0.3, np.abs(a - b).max()
    # paused after epoch 1 of 3 (its checkpoint holds the scaler), then resumed: the same run
    import time

    ck = tmp_path / "ck"
    with pytest.raises(engine.Paused):
        train_mod.train_many([cfg], [None], progress=False, splits=small_splits, work_dir=ck,
                             deadline=time.monotonic())
    state = torch.load(ck / "chunk0.pt", weights_only=False)
    assert state["epoch"] == 1 and [t.shape for t in state["scaler"]] == [(2,), (2,)]
    resumed = train_mod.train_many([cfg], [None], progress=False, splits=small_splits,
                                   work_dir=ck)[0]
    assert np.array_equal(resumed.history["loss"].to_numpy(), b)


def test_manifests_say_which_chunks_repeat_bit_for_bit():
    """Rotary and relative PEs gather in attention; on CUDA that backward adds atomically, so
    such a chunk does not repeat bit for bit there (issue 47); a CPU always does."""
    from lstpe.nn.attention import bitwise_on

    assert bitwise_on("cpu", ["rope", "relative"]) == (True, "bit for bit on cpu")
    assert bitwise_on("cuda", ["learn-0.2", "2d-fixed", "alibi", "c-nope"])[0]
    ok, why = bitwise_on("cuda", ["learn-0.2", "rope", "relative"])
    assert not ok and "relative, rope" in why


def _pid_and_double(state: dict, item: int) -> tuple[int, int]:
    return os.getpid(), state["double"](item)


@pytest.mark.skipif(not hasattr(os, "fork") or runtime.usable_cpus() < 1, reason="no fork")
def test_fork_map_keeps_the_order_and_reaches_its_processes_by_the_fork():
    """``fork_map`` hands each process its state by the fork (a lambda, which pickling would
    refuse), returns the items' results in order, and draws them in other processes than this
    one when asked for two (on Linux); asked for one, it loops here."""
    state = {"double": lambda x: 2 * x}
    two = runtime.fork_map(_pid_and_double, state, range(9), workers=2)
    assert [v for _, v in two] == [2 * i for i in range(9)]
    if runtime.sys.platform == "linux":
        assert os.getpid() not in {p for p, _ in two}
    one = runtime.fork_map(_pid_and_double, state, range(3), workers=1)
    assert one == [(os.getpid(), 0), (os.getpid(), 2), (os.getpid(), 4)]
