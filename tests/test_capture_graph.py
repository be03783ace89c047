"""The one CUDA-graph capture both graph steps use (``lstpe.training.steps.capture_graph``),
checked on a CPU with torch.cuda's stream and graph calls replaced by recorders: the warm-up
runs three times on the side stream, ``before`` runs after it, the body is captured once on
that same stream, and the state is restored to its value before the warm-up; a replay copies
the new batch into the graph's static inputs."""

from __future__ import annotations

import contextlib

import torch

from lstpe.training import steps


class _Stream:
    def __init__(self, name: str = "side") -> None:
        self.name = name

    def wait_stream(self, other: _Stream) -> None:
        pass


class _Graph:
    def __init__(self) -> None:
        self.replays = 0

    def replay(self) -> None:
        self.replays += 1


def test_capture_warms_up_on_the_side_stream_then_captures_there_and_restores(monkeypatch):
    calls: list[tuple[str, str | None]] = []
    on: list[str | None] = [None]

    @contextlib.contextmanager
    def stream(s: _Stream):
        on.append(s.name)
        yield
        on.pop()

    @contextlib.contextmanager
    def graph(g: _Graph, stream: _Stream):
        on.append(f"capture on {stream.name}")
        yield
        on.pop()

    monkeypatch.setattr(torch.cuda, "Stream", _Stream)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda: _Stream("main"))
    monkeypatch.setattr(torch.cuda, "stream", stream)
    monkeypatch.setattr(torch.cuda, "CUDAGraph", _Graph)
    monkeypatch.setattr(torch.cuda, "graph", graph)
    state = torch.zeros(3)

    def warm(b, k):
        calls.append(("warm", on[-1]))
        state.add_(b.sum())

    def body(b, k):
        calls.append(("body", on[-1]))
        state.add_(100.0)

    batch, keys = torch.ones(2, 2), torch.arange(4)
    g, static_batch, static_keys = steps.capture_graph(
        warm, body, lambda: [state], batch, keys, before=lambda: calls.append(("before", on[-1])))
    assert calls == [("warm", "side")] * 3 + [("before", None), ("body", "capture on side")]
    assert torch.equal(state, torch.zeros(3))  # the warm-up and the capture leave no trace
    assert static_batch is not batch and torch.equal(static_batch, batch)
    steps.replay_graph((g, static_batch, static_keys), 2 * batch, keys + 1)
    assert g.replays == 1 and torch.equal(static_batch, 2 * batch)
    assert torch.equal(static_keys, keys + 1)
