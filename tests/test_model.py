"""Tests of lstpe.nn.model: the plain and the batched transformer compute the same function for
every PE, and both match a per-sample reference forward written here from the weights dict."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from lstpe import lst
from lstpe.nn import encodings as enc
from lstpe.nn.architecture import ModelConfig, init_weights, trainable_count
from lstpe.nn.dropout import keys_tensor
from lstpe.nn.model import BatchedLSTTransformer, LSTTransformer

ADDITIVE = ["2d-fixed", "1d-fixed", "learn-0.3", "random", "nope"]
OTHERS = ["relative", "rope", "c-nope", "alibi", "rope-2d"]


def test_every_pe_is_covered():
    assert sorted(enc.parse_pe(n).name for n in ADDITIVE + OTHERS) == sorted(enc.PE_NAMES)
    assert all(enc.parse_pe(n).additive for n in ADDITIVE)
    assert not any(enc.parse_pe(n).additive for n in OTHERS)


@pytest.fixture(scope="module")
def x() -> torch.Tensor:
    """(12, 16, 5) puzzles: 4 of each condition."""
    h = lst.load_human()
    return lst.encode(list(h.groupby("vectors").head(4)["puzzle"]))


def perturb(model: torch.nn.Module, seed: int = 0, scale: float = 0.3) -> None:
    """Move every parameter (LayerNorm included) away from its init, so that nothing is
    tested only at ones/zeros."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            if p.requires_grad:  # fixed PEs stay what they are
                p.add_(scale * torch.randn(p.shape, generator=g))


# --------------------------------------------------------------------------- reference


def rotate_ref(x: np.ndarray, pos: np.ndarray, pairing: str) -> np.ndarray:
    """Rotate feature pairs of x (n, r) by pos * base^(-2k/r) with complex numbers."""
    r = x.shape[1]
    theta = 10000.0 ** (-np.arange(0, r, 2) / r)
    z = x[:, 0::2] + 1j * x[:, 1::2] if pairing == "interleaved" else \
        x[:, : r // 2] + 1j * x[:, r // 2:]
    z = z * np.exp(1j * pos[:, None] * theta[None])
    out = np.empty_like(x)
    if pairing == "interleaved":
        out[:, 0::2], out[:, 1::2] = z.real, z.imag
    else:
        out[:, : r // 2], out[:, r // 2:] = z.real, z.imag
    return out


def rope_ref(x: np.ndarray, spec: enc.PESpec) -> np.ndarray:
    """Rotary PE of the docs: paper = first half of the head dims, split-half pairing;
    textbook = all dims, interleaved. rope-2d: first half of the rotated dims by row, second
    half by column."""
    d = x.shape[1]
    pairing = "half" if spec.variant == "paper" else "interleaved"
    d_rot = d // 2 if spec.variant == "paper" else d
    d_rot -= d_rot % (4 if spec.name == "rope-2d" else 2)
    out = x.copy()
    flat = np.arange(16)
    if spec.name == "rope":
        out[:, :d_rot] = rotate_ref(x[:, :d_rot], flat, pairing)
    else:
        h = d_rot // 2
        out[:, :h] = rotate_ref(x[:, :h], flat // 4, pairing)
        out[:, h:d_rot] = rotate_ref(x[:, h:d_rot], flat % 4, pairing)
    return out


def layer_norm(h: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    mu = h.mean(-1, keepdims=True)
    var = ((h - mu) ** 2).mean(-1, keepdims=True)
    return (h - mu) / np.sqrt(var + 1e-5) * w + b


def gelu(v: np.ndarray) -> np.ndarray:
    return 0.5 * v * (1 + np.vectorize(math.erf)(v / math.sqrt(2)))


def authors_block(spec: enc.PESpec) -> dict:
    """The block of the authors' code, written down here from their source (independent of
    lstpe.nn.architecture): which projections exist, causal mask, temperature, relative offsets."""
    paper = spec.variant == "paper"
    return {
        "out_proj": not (paper and spec.name == "relative"),
        "causal": spec.name == "c-nope" or (paper and spec.name == "relative"),
        "temperature": 0.01 if (paper and spec.name == "c-nope") else 1.0,
        "offsets": range(-15, 1) if paper else range(-15, 16),
    }


def reference_forward(w: dict[str, torch.Tensor], spec: enc.PESpec, x: torch.Tensor,
                      cfg: ModelConfig) -> tuple[np.ndarray, np.ndarray]:
    """One puzzle x (16, 5) through the paper's architecture, float64, one head, score by
    score. Returns logits (4,) and attention (L, 16, 16)."""
    W = {k: v.double().numpy() for k, v in w.items()}
    blk = authors_block(spec)
    d = cfg.d_model
    h = x.double().numpy() @ W["embed.w"] + W["embed.b"]
    pe = W["pe.fixed"] + W["pe.mask"] * W["pe.learn"]
    maps = []
    for layer in range(cfg.n_layers):
        p = f"blocks.{layer}."
        h = h + pe[layer]
        qkv = h @ W[p + "qkv.w"] + W[p + "qkv.b"]
        q, k, v = qkv[:, :d], qkv[:, d:2 * d], qkv[:, 2 * d:]
        if spec.name in ("rope", "rope-2d"):
            q, k = rope_ref(q, spec), rope_ref(k, spec)
        e = np.empty((16, 16))
        for i in range(16):
            for j in range(16):
                s = q[i] @ k[j]
                if spec.name == "relative" and (j - i) in blk["offsets"]:
                    s += q[i] @ W[p + "rel"][j - i + 15]
                s /= math.sqrt(d)
                if spec.name == "alibi":
                    s -= 0.5 * abs(i - j)
                s /= blk["temperature"]
                e[i, j] = -np.inf if blk["causal"] and j > i else s
        a = np.exp(e - e.max(1, keepdims=True))
        a /= a.sum(1, keepdims=True)
        maps.append(a)
        att = a @ v
        if blk["out_proj"]:
            att = att @ W[p + "out.w"] + W[p + "out.b"]
        h = layer_norm(h + att, W[p + "ln1.w"], W[p + "ln1.b"])
        mlp = gelu(gelu(h @ W[p + "fc1.w"] + W[p + "fc1.b"]) @ W[p + "fc2.w"] + W[p + "fc2.b"])
        h = layer_norm(h + mlp, W[p + "ln2.w"], W[p + "ln2.b"])
    return h[15] @ W["head.w"] + W["head.b"], np.stack(maps)


REFERENCE_PES = [enc.parse_pe(n, sigma=0.5 if n == "learn" else None) for n in enc.PE_NAMES] + [
    enc.parse_pe(n, variant="textbook") for n in ("rope", "relative", "c-nope", "rope-2d")
]


def plain_weights(model: LSTTransformer) -> dict[str, torch.Tensor]:
    """The plain model's current tensors in the full :func:`init_weights` layout (absent
    biases and projections as zeros, the additive PE in ``pe.fixed``)."""
    sd = dict(model.named_parameters())
    d = model.cfg.d_model
    w = {"embed.w": sd["embed.weight"].T, "embed.b": sd["embed.bias"],
         "head.w": sd["head.weight"].T, "head.b": sd["head.bias"]}
    for i, blk in enumerate(model.blocks):
        p = f"blocks.{i}."
        for lin, width in (("qkv", 3 * d), ("out", d), ("fc1", 4 * d), ("fc2", d)):
            w[p + lin + ".w"] = sd[p + lin + ".weight"].T if p + lin + ".weight" in sd \
                else torch.zeros(d, width)
            w[p + lin + ".b"] = sd.get(p + lin + ".bias", torch.zeros(width))
        for ln in ("ln1", "ln2"):
            w[p + ln + ".w"], w[p + ln + ".b"] = sd[p + ln + ".weight"], sd[p + ln + ".bias"]
        rel = blk.rel_table()
        w[p + "rel"] = rel if rel is not None else torch.zeros(31, model.cfg.d_head)
    w["pe.fixed"], w["pe.learn"] = model.pe.data, torch.zeros_like(model.pe.data)
    w["pe.mask"] = torch.tensor(0.0)
    return {k: v.detach() for k, v in w.items()}


@torch.no_grad()
@pytest.mark.parametrize("spec", REFERENCE_PES, ids=lambda s: f"{s.label}-{s.variant}")
def test_plain_model_matches_reference_forward(spec, x, tiny_cfg):
    model = LSTTransformer(spec, seed=4, cfg=tiny_cfg).eval()
    perturb(model)
    weights = plain_weights(model)
    logits, attn = model(x, return_attention=True)
    for b in range(4):
        ref_logits, ref_attn = reference_forward(weights, spec, x[b], tiny_cfg)
        # a temperature T multiplies the float32 rounding of the scores by 1/T
        t = authors_block(spec)["temperature"]
        np.testing.assert_allclose(logits[b].numpy(), ref_logits, atol=1e-5 / t**0.5, rtol=0)
        np.testing.assert_allclose(attn[b].numpy(), ref_attn, atol=1e-5 / t, rtol=0)
    # the batched model loaded with the same weights gives the same numbers
    batched = BatchedLSTTransformer([spec], [4], tiny_cfg).eval()
    batched.load_state_dict({k.replace(".", "_"): v[None] for k, v in weights.items()})
    torch.testing.assert_close(batched(x)[0], logits, atol=1e-4, rtol=0)


@torch.no_grad()
@pytest.mark.parametrize("name", ["2d-fixed", "learn-0.5", "rope", "relative"])
def test_reference_forward_at_init(name, x, tiny_cfg):
    """The init weights dict itself (no perturbation) through the reference."""
    spec = enc.parse_pe(name)
    w = init_weights(spec, 9, tiny_cfg)
    logits = LSTTransformer(spec, 9, tiny_cfg).eval()(x)
    for b in range(3):
        ref, _ = reference_forward(w, spec, x[b], tiny_cfg)
        np.testing.assert_allclose(logits[b].numpy(), ref, atol=1e-5, rtol=0)


# --------------------------------------------------------------------------- plain vs batched


def check_same(batched: BatchedLSTTransformer, x: torch.Tensor) -> None:
    """Model m of ``batched`` and its plain copy agree to 1e-5 (float32). Attention logits are
    divided by the softmax temperature (0.01 for c-nope), which multiplies their float32
    rounding (different matmul kernels) by 1/T: its attention maps get atol 1e-5 / T."""
    batched.eval()
    logits, attn = batched(x, return_attention=True)
    for m in range(batched.n_models):
        t = batched.structures[m].temperature
        atol_attn, atol = 1e-5 / t, 1e-5 / t**0.5
        single = batched.to_single(m).eval()
        sl, sa = single(x, return_attention=True)
        torch.testing.assert_close(logits[m], sl, atol=atol, rtol=0)
        torch.testing.assert_close(attn[m], sa, atol=atol_attn, rtol=0)
        torch.testing.assert_close(single(x), sl, atol=atol, rtol=0)
    # without attention maps the last block is computed for the read-out token only
    torch.testing.assert_close(batched(x), logits, atol=1e-4, rtol=0)


@torch.no_grad()
def test_batched_matches_plain_additive_mix(x, tiny_cfg):
    specs = [s for s in ADDITIVE for _ in range(2)]
    seeds = list(range(len(specs)))
    b = BatchedLSTTransformer(specs, seeds, tiny_cfg)
    # at init: model m is exactly LSTTransformer(spec, seed)
    logits = b(x)
    for m, (s, sd) in enumerate(zip(specs, seeds, strict=True)):
        torch.testing.assert_close(logits[m], LSTTransformer(s, sd, tiny_cfg).eval()(x),
                                   atol=1e-5, rtol=0)
    perturb(b)
    check_same(b, x)


@torch.no_grad()
@pytest.mark.parametrize("name", OTHERS)
def test_batched_matches_plain_per_pe(name, x, tiny_cfg):
    b = BatchedLSTTransformer([name] * 3, [5, 6, 7], tiny_cfg)
    logits = b(x)
    for m, sd in enumerate([5, 6, 7]):
        torch.testing.assert_close(logits[m], LSTTransformer(name, sd, tiny_cfg).eval()(x),
                                   atol=1e-4, rtol=0)
    perturb(b)
    check_same(b, x)


@torch.no_grad()
@pytest.mark.parametrize("names", [["2d-fixed", "learn-0.2"], ["alibi"], ["relative"],
                                   ["rope-2d"]])
def test_batched_matches_plain_two_heads(names, x):
    cfg = ModelConfig(d_model=32, n_layers=2, n_heads=2)
    b = BatchedLSTTransformer(names * 2, [1, 2, 3, 4][: 2 * len(names)], cfg)
    perturb(b)
    check_same(b, x)


@torch.no_grad()
def test_batched_per_model_inputs(x, tiny_cfg):
    b = BatchedLSTTransformer(["learn-0.2", "nope"], [1, 2], tiny_cfg)
    xs = torch.stack([x[:6], x[6:]])
    out = b(xs)
    for m in range(2):
        torch.testing.assert_close(out[m], b.to_single(m).eval()(xs[m]), atol=1e-5, rtol=0)


def test_attention_maps_are_distributions(x, tiny_cfg):
    for name in ("c-nope", "relative", "2d-fixed"):
        _, a = LSTTransformer(name, 0, tiny_cfg).eval()(x, return_attention=True)
        assert a.shape == (12, 2, 16, 16)
        torch.testing.assert_close(a.sum(-1), torch.ones(12, 2, 16))
        if enc.parse_pe(name).causal:
            assert (a.triu(1) == 0).all()
        else:
            assert (a.triu(1) > 0).any()


# --------------------------------------------------------------------------- init


def test_common_random_numbers_across_sigmas(tiny_cfg):
    a, b = init_weights("learn-0.1", 11, tiny_cfg), init_weights("learn-0.2", 11, tiny_cfg)
    for k in a:
        if k != "pe.learn":
            assert torch.equal(a[k], b[k]), k
    torch.testing.assert_close(b["pe.learn"], 2 * a["pe.learn"])
    c = init_weights("learn-0.1", 12, tiny_cfg)
    assert not torch.equal(a["embed.w"], c["embed.w"])
    assert not torch.equal(a["pe.learn"], c["pe.learn"])


def test_linear_init_bounds_and_shapes(tiny_cfg):
    w = init_weights("relative", 0, tiny_cfg)
    d = tiny_cfg.d_model
    shapes = {"embed.w": (5, d), "blocks.0.qkv.w": (d, 3 * d), "blocks.1.fc1.w": (d, 4 * d),
              "blocks.1.fc2.w": (4 * d, d), "head.w": (d, 4), "blocks.0.rel": (31, d),
              "pe.fixed": (2, 16, d)}
    for k, shape in shapes.items():
        assert tuple(w[k].shape) == shape, k
    # relative (the authors' module): keys for offsets -15..0 only, N(0, 1); no output proj.
    assert torch.equal(w["blocks.0.rel"][16:], torch.zeros(15, d))
    assert (w["blocks.0.rel"][:16] != 0).all()
    assert torch.equal(w["blocks.0.out.w"], torch.zeros(d, d))
    for k, fan_in in {"embed.w": 5, "blocks.0.qkv.w": d, "blocks.0.fc2.w": 4 * d}.items():
        bound = 1 / math.sqrt(fan_in)
        assert w[k].abs().max() <= bound and w[k].abs().max() > 0.9 * bound


# --------------------------------------------------------------------------- errors


def test_errors(x, tiny_cfg):
    with pytest.raises(ValueError, match="2 PEs but 1 seeds"):
        BatchedLSTTransformer(["nope", "nope"], [0], tiny_cfg)
    with pytest.raises(ValueError, match="at least one"):
        BatchedLSTTransformer([], [], tiny_cfg)
    b = BatchedLSTTransformer(["nope"], [0], tiny_cfg)
    with pytest.raises(ValueError, match=r"\(B, 16, 5\), got \(.*12, 16, 4\)"):
        b(x[..., :4])
    with pytest.raises(ValueError, match="-1"):
        b(x, embed_noise_std=-1.0)
    with pytest.raises(ValueError, match="d_model=30 is not divisible by n_heads=4"):
        ModelConfig(d_model=30, n_heads=4)
    with pytest.raises(ValueError, match="n_layers must be >= 1, got 0"):
        ModelConfig(n_layers=0)
    with pytest.raises(ValueError, match="'bogus'"):
        LSTTransformer("bogus", 0, tiny_cfg)


@torch.no_grad()
def test_embed_noise_changes_output_deterministically(x, tiny_cfg):
    b = BatchedLSTTransformer(["2d-fixed"], [0], tiny_cfg)
    clean = b(x)
    n1 = b(x, embed_noise_std=0.5, generator=torch.Generator().manual_seed(1))
    n2 = b(x, embed_noise_std=0.5, generator=torch.Generator().manual_seed(1))
    assert torch.equal(n1, n2) and not torch.allclose(n1, clean)


# --------------------------------------------------------------------------- every PE in one batch


ALL_SPECS = [enc.parse_pe(n, sigma=0.3 if n == "learn" else None) for n in enc.PE_NAMES] + [
    enc.parse_pe(n, variant="textbook") for n in ("rope", "relative", "c-nope", "rope-2d",
                                                   "2d-fixed")
]


@torch.no_grad()
def test_every_pe_in_one_batched_model(x, tiny_cfg):
    """All 10 PEs and the textbook variants in one batch: each model computes what it
    computes alone (at init and after moving every weight, structural zeros included)."""
    seeds = list(range(len(ALL_SPECS)))
    b = BatchedLSTTransformer(ALL_SPECS, seeds, tiny_cfg).eval()
    logits = b(x)
    for m, (s, sd) in enumerate(zip(ALL_SPECS, seeds, strict=True)):
        alone = BatchedLSTTransformer([s], [sd], tiny_cfg).eval()
        atol = 1e-5 / b.structures[m].temperature ** 0.5
        torch.testing.assert_close(logits[m], alone(x)[0], atol=atol, rtol=0)
    perturb(b)  # also moves the structural zeros: the masks must hide them
    check_same(b, x)


# --------------------------------------------------------------------------- the authors' model

AUTHORS_COUNTS = {"2d-fixed": 1_238_724, "1d-fixed": 1_238_724, "nope": 1_238_724,
                  "rope": 1_238_724, "random": 1_238_724, "learn-0.2": 1_248_964,
                  "relative": 1_145_924, "c-nope": 1_236_164}
"""Trainable parameters of the authors' models at the paper's size."""


@pytest.mark.parametrize("name", list(AUTHORS_COUNTS))
def test_parameter_counts_equal_the_authors(name):
    cfg = ModelConfig()
    plain = LSTTransformer(name, 0, cfg)
    assert sum(p.numel() for p in plain.parameters() if p.requires_grad) == AUTHORS_COUNTS[name]
    assert trainable_count(name, cfg) == AUTHORS_COUNTS[name]


def test_batched_trainable_counts_match():
    cfg = ModelConfig(d_model=32, n_layers=2)
    b = BatchedLSTTransformer(list(AUTHORS_COUNTS), range(len(AUTHORS_COUNTS)), cfg)
    for m, name in enumerate(AUTHORS_COUNTS):
        plain = LSTTransformer(name, m, cfg)
        assert b.trainable_counts()[m] == sum(p.numel() for p in plain.parameters()
                                              if p.requires_grad)


def test_init_statistics_follow_the_authors_modules():
    """nn.MultiheadAttention's init for additive PEs (xavier-uniform in-projection, std
    sqrt(2/(d+3d)) = 0.0559 at d=160, zero biases), nn.Linear's default elsewhere; c-nope
    has no biases, relative no output projection."""
    d = 160
    cfg = ModelConfig()
    w = init_weights("2d-fixed", 1, cfg)
    qkv = torch.stack([w[f"blocks.{i}.qkv.w"] for i in range(4)])
    assert abs(qkv.std().item() - math.sqrt(2 / (4 * d))) < 0.001
    assert abs(math.sqrt(2 / (4 * d)) - 0.0559) < 1e-4
    assert qkv.abs().max() <= math.sqrt(6 / (4 * d))
    for i in range(4):
        assert torch.equal(w[f"blocks.{i}.qkv.b"], torch.zeros(3 * d))
        assert torch.equal(w[f"blocks.{i}.out.b"], torch.zeros(d))
        assert 0.9 / math.sqrt(d) < w[f"blocks.{i}.out.w"].abs().max() <= 1 / math.sqrt(d)
    for name in ("learn-0.2", "random", "nope", "1d-fixed"):
        v = init_weights(name, 1, cfg)
        assert torch.equal(v["blocks.0.qkv.w"], w["blocks.0.qkv.w"])  # same law, same draws
    rope = init_weights("rope", 1, cfg)
    assert 0.9 / math.sqrt(d) < rope["blocks.0.qkv.w"].abs().max() <= 1 / math.sqrt(d)
    assert (rope["blocks.0.qkv.b"] != 0).all() and (rope["blocks.0.out.b"] != 0).all()
    cn = init_weights("c-nope", 1, cfg)
    assert torch.equal(cn["blocks.0.qkv.b"], torch.zeros(3 * d))
    assert torch.equal(cn["blocks.0.out.b"], torch.zeros(d)) and (cn["blocks.0.out.w"] != 0).any()
    rel = init_weights("relative", 1, cfg)
    keys = torch.stack([rel[f"blocks.{i}.rel"][:16] for i in range(4)])
    assert abs(keys.std().item() - 1.0) < 0.02 and abs(keys.mean().item()) < 0.02
    assert (rel["blocks.0.qkv.b"] != 0).all()


def test_2d_fixed_puts_columns_first_in_the_paper_variant(tiny_cfg):
    d = tiny_cfg.d_model
    paper = init_weights("2d-fixed", 0, tiny_cfg)["pe.fixed"][0]
    text = init_weights(enc.parse_pe("2d-fixed", variant="textbook"), 0, tiny_cfg)["pe.fixed"][0]
    col, row = enc.sinusoid_1d(torch.arange(16) % 4, d // 2), enc.sinusoid_1d(
        torch.arange(16) // 4, d // 2)
    torch.testing.assert_close(paper, torch.cat([col, row], 1))
    torch.testing.assert_close(text, torch.cat([row, col], 1))


def skew(qe: torch.Tensor) -> torch.Tensor:
    """Music Transformer's skewing of Q E^T (n, n) (Huang et al. 2018), written out here."""
    n = qe.shape[-1]
    padded = torch.nn.functional.pad(qe, (1, 0))
    return padded.reshape(n + 1, n)[1:]


def test_relative_equals_the_skewed_music_transformer_scores():
    g = torch.Generator().manual_seed(0)
    n, dh = 16, 8
    q, k, v = (torch.randn(1, 1, n, dh, generator=g) for _ in range(3))
    er = torch.randn(n, dh, generator=g)  # the authors' 16 keys, offsets -15..0
    srel = skew(q[0, 0] @ er.T)
    ref = (q[0, 0] @ k[0, 0].T + srel) / math.sqrt(dh)
    ref = ref.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    table = torch.cat([er, torch.zeros(n - 1, dh)])  # rows 0..15 = offsets -15..0
    from lstpe.nn.model import attention

    _, w = attention(q, k, v, enc.parse_pe("relative"), table)
    torch.testing.assert_close(w[0, 0], ref.softmax(-1))


# --------------------------------------------------------------------------- dropout


def test_dropout_only_for_the_sinusoidal_pes_in_train_mode(x, tiny_cfg):
    """The authors' 2d-fixed / 1d-fixed carry Dropout(0.1): stochastic in train mode, no
    other PE is; eval mode is deterministic for all."""
    for name in ("2d-fixed", "1d-fixed", "learn-0.2", "nope", "random", "relative", "c-nope",
                 "rope"):
        m = LSTTransformer(name, 0, tiny_cfg).train()
        torch.manual_seed(0)
        a = m(x)
        b = m(x)
        assert torch.equal(a, b) != (name in ("2d-fixed", "1d-fixed")), name
        m.eval()
        assert torch.equal(m(x), m(x))
        text = LSTTransformer(enc.parse_pe(name.split("-0")[0], sigma=0.2 if "learn" in name
                                           else None, variant="textbook"), 0, tiny_cfg).train()
        assert torch.equal(text(x), text(x)), f"{name} textbook has no dropout"


@torch.no_grad()
def test_batched_dropout_masks_are_per_model(x, tiny_cfg):
    """A dropout model's masks come from its own key: the same in any batch, different keys
    give different outputs, models without dropout ignore the keys."""
    specs, seeds = ["2d-fixed", "learn-0.2", "1d-fixed", "relative"], [5, 6, 7, 8]
    b = BatchedLSTTransformer(specs, seeds, tiny_cfg)
    assert b.dropout_seeds == [5, 7]
    clean = b(x)
    k1 = keys_tensor(b.dropout_seeds, epoch=1, step=0)
    k2 = keys_tensor(b.dropout_seeds, epoch=1, step=1)
    d1, d2 = b(x, dropout_keys=k1), b(x, dropout_keys=k2)
    assert torch.equal(d1[1], clean[1]) and torch.equal(d1[3], clean[3])
    assert not torch.allclose(d1[0], clean[0]) and not torch.allclose(d1[0], d2[0])
    alone = BatchedLSTTransformer(["1d-fixed"], [7], tiny_cfg)
    torch.testing.assert_close(alone(x, dropout_keys=keys_tensor([7], 1, 0))[0], d1[2],
                               atol=1e-5, rtol=0)
    # about 10% of the units are dropped
    from lstpe.nn.dropout import keep_mask

    keep = keep_mask(k1, (64, 16, 32), b.drop_p)
    assert abs((keep == 0).float().mean().item() - 0.1) < 0.01
    torch.testing.assert_close(keep.max(), torch.tensor(1 / 0.9))
