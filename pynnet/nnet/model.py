"""The feed-forward acoustic model: feature transform (splice + global CMVN), affine layers with
sigmoid / ReLU / p-norm hidden units, softmax over pdfs, log priors; one model file.

An affine layer keeps weight and bias in ONE parameter ``wb`` (out x in+1, bias last), like the
trailing-1 input of Kaldi's natural-gradient affine component: the weight gradient is a single
GEMM ``g^T [x 1]`` written into a preallocated buffer, no copies. During training an optimizer
installs a ``grad_hook`` on each layer; the hook computes that gradient (plain, or preconditioned
with NG-SGD) inside the layer's autograd backward.
"""
from __future__ import annotations

import math
import os
from typing import Callable

import numpy as np
import torch
from torch import nn

from pynnet.io.atomic import atomic_path
from pynnet.io.errors import fail

MODEL_FORMAT = "pynnet-nnet-v1"


# ---------------------------------------------------------------- feature transform
def splice_frames(feats: torch.Tensor, context: int) -> torch.Tensor:
    """Kaldi splice-feats: frames t-context..t+context side by side, edges replicated."""
    if context == 0:
        return feats
    T = feats.shape[0]
    idx = torch.arange(-context, context + 1).unsqueeze(0) + torch.arange(T).unsqueeze(1)
    idx.clamp_(0, T - 1)
    return feats[idx].reshape(T, -1)


class FeatureTransform(nn.Module):
    """splice +-context, then (x + shift) * scale (Kaldi nnet1 <Splice>, <AddShift>, <Rescale>)."""

    def __init__(self, input_dim: int, context: int = 5):
        super().__init__()
        self.input_dim, self.context = input_dim, context
        out = input_dim * (2 * context + 1)
        self.register_buffer("shift", torch.zeros(out))
        self.register_buffer("scale", torch.ones(out))

    @property
    def output_dim(self) -> int:
        return self.input_dim * (2 * self.context + 1)

    def set_global_cmvn(self, mean: np.ndarray, std: np.ndarray) -> None:
        """Per-dimension mean/std of the *base* features, tiled over the spliced frames."""
        k = 2 * self.context + 1
        self.shift.copy_(torch.as_tensor(-np.tile(mean, k), dtype=torch.float32))
        self.scale.copy_(torch.as_tensor(1.0 / np.tile(np.maximum(std, 1e-5), k), dtype=torch.float32))

    def forward(self, feats: torch.Tensor) -> torch.Tensor:
        if feats.shape[1] != self.input_dim:
            raise ValueError(f"feature dim {feats.shape[1]} != model input dim {self.input_dim}")
        return (splice_frames(feats, self.context) + self.shift) * self.scale


# ---------------------------------------------------------------- layers
class _HookedAffine(torch.autograd.Function):
    """y = x W^T + b; backward returns dL/dx and lets the layer's hook compute dL/d[W b]."""

    @staticmethod
    def forward(ctx, x, wb, layer):
        ctx.save_for_backward(x, wb)
        ctx.layer = layer
        return torch.addmm(wb[:, -1], x, wb[:, :-1].t())

    @staticmethod
    def backward(ctx, g):
        x, wb = ctx.saved_tensors
        gx = g.mm(wb[:, :-1]) if ctx.needs_input_grad[0] else None
        ctx.layer.grad_hook(ctx.layer, x, g)
        return gx, None, None


class Affine(nn.Module):
    def __init__(self, in_dim: int, out_dim: int):
        super().__init__()
        self.in_dim, self.out_dim = in_dim, out_dim
        self.wb = nn.Parameter(torch.zeros(out_dim, in_dim + 1))
        self.grad_hook: Callable | None = None   # set by an optimizer while training
        self.grad: torch.Tensor | None = None    # out x in+1 gradient buffer (hook writes it)
        self._xa: torch.Tensor | None = None     # N x in+1 buffer [x 1]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.grad_hook is not None and torch.is_grad_enabled():
            return _HookedAffine.apply(x, self.wb, self)
        return torch.addmm(self.wb[:, -1], x, self.wb[:, :-1].t())

    def augmented_input(self, x: torch.Tensor) -> torch.Tensor:
        """[x 1] in a reused buffer (for the bias column of the gradient)."""
        n = x.shape[0]
        if self._xa is None or self._xa.shape[0] < n or self._xa.device != x.device or self._xa.dtype != x.dtype:
            self._xa = torch.ones(max(n, 1), self.in_dim + 1, dtype=x.dtype, device=x.device)
        xa = self._xa[:n]
        xa[:, :-1].copy_(x)
        xa[:, -1].fill_(1.0)   # users may overwrite the buffer (NG-SGD preconditions it in place)
        return xa

    def grad_buffer(self) -> torch.Tensor:
        if self.grad is None or self.grad.device != self.wb.device:
            self.grad = torch.zeros_like(self.wb, memory_format=torch.contiguous_format)
        return self.grad


class PNorm(nn.Module):
    """nnet2 p-norm (p=2) over groups of ``group`` units, then NormalizeComponent (rms 1 per row)."""

    def __init__(self, group: int):
        super().__init__()
        self.group = group

    def forward(self, x):
        y = x.view(x.shape[0], -1, self.group).pow(2).sum(2).add(1e-20).sqrt()
        rms = y.pow(2).mean(1, keepdim=True).add(1e-20).sqrt()
        return y / rms


def _activation(name: str, group: int) -> nn.Module:
    if name == "sigmoid":
        return nn.Sigmoid()
    if name == "relu":
        return nn.ReLU()
    if name == "pnorm":
        return PNorm(group)
    fail(f"unknown activation '{name}' (sigmoid, relu, pnorm)")


class Dnn(nn.Module):
    """Feature transform + hidden layers + output affine (softmax applied by the loss / forward)."""

    def __init__(self, input_dim: int, hidden_dims: list[int], output_dim: int,
                 activation: str = "sigmoid", context: int = 5, pnorm_group: int = 10,
                 input_pipeline: dict | None = None):
        super().__init__()
        self.arch = {"input_dim": input_dim, "hidden_dims": list(hidden_dims), "output_dim": output_dim,
                     "activation": activation, "context": context, "pnorm_group": pnorm_group}
        # How the base features were produced before the model (applied by the data reader):
        # per-speaker mean normalisation from cmvn.scp, deltas.
        self.input_pipeline = dict(input_pipeline or {"apply_cmvn": False, "delta_order": 0})
        self.transform = FeatureTransform(input_dim, context)
        layers: list[nn.Module] = []
        d = self.transform.output_dim
        for h in hidden_dims:
            if activation == "pnorm":
                layers += [Affine(d, h * pnorm_group), _activation(activation, pnorm_group)]
            else:
                layers += [Affine(d, h), _activation(activation, pnorm_group)]
            d = h
        layers.append(Affine(d, output_dim))
        self.layers = nn.Sequential(*layers)
        self.register_buffer("log_priors", torch.zeros(output_dim))

    @property
    def affines(self) -> list[Affine]:
        return [m for m in self.layers if isinstance(m, Affine)]

    def init_random(self, seed: int) -> None:
        """Glorot-uniform hidden layers (He for ReLU); the output layer starts small (std 0.1/sqrt(in))."""
        g = torch.Generator().manual_seed(seed)
        affs = self.affines
        with torch.no_grad():
            for i, a in enumerate(affs):
                if i == len(affs) - 1:
                    w = torch.randn(a.out_dim, a.in_dim, generator=g) * (0.1 / math.sqrt(a.in_dim))
                elif self.arch["activation"] == "sigmoid":
                    lim = 4.0 * math.sqrt(6.0 / (a.in_dim + a.out_dim))
                    w = (torch.rand(a.out_dim, a.in_dim, generator=g) * 2 - 1) * lim
                else:
                    w = torch.randn(a.out_dim, a.in_dim, generator=g) * math.sqrt(2.0 / a.in_dim)
                a.wb[:, :-1].copy_(w)
                a.wb[:, -1].zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Already-transformed input frames (N x spliced dim) -> logits (N x pdfs)."""
        return self.layers(x)

    def utterance_logits(self, feats: torch.Tensor) -> torch.Tensor:
        """Base features of one utterance (T x input_dim) -> logits (T x pdfs)."""
        return self.layers(self.transform(feats))

    def set_priors_from_counts(self, counts: np.ndarray, floor: float = 1e-10) -> None:
        """log p(pdf) from alignment counts; unseen pdfs get +1e10 so their pseudo-log-likelihood
        is hugely negative (Kaldi nnet1 PdfPrior does the same)."""
        c = np.asarray(counts, dtype=np.float64)
        p = c / max(c.sum(), 1.0)
        lp = np.where(p > floor, np.log(np.maximum(p, floor)), 1e10)
        self.log_priors.copy_(torch.as_tensor(lp, dtype=torch.float32))

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())


# ---------------------------------------------------------------- model file
def save_model(path: str | os.PathLike, model: Dnn, extra: dict | None = None) -> None:
    """One file: architecture, input pipeline, feature transform, priors, weights (+ extra), atomic."""
    obj = {"format": MODEL_FORMAT, "arch": model.arch, "input_pipeline": model.input_pipeline,
           "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()}}
    if extra:
        obj.update(extra)
    with atomic_path(path) as tmp:
        torch.save(obj, tmp)


def load_model_file(path: str | os.PathLike) -> dict:
    path = os.fspath(path)
    if not os.path.exists(path):
        fail("no such model file", path)
    try:
        obj = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as e:  # noqa: BLE001 - any unreadable file is a user error here
        fail(f"cannot read model file ({type(e).__name__}: {e})", path)
    if not isinstance(obj, dict) or obj.get("format") != MODEL_FORMAT:
        fail(f"not a pynnet nnet model (expected format {MODEL_FORMAT})", path)
    return obj


def model_from_dict(obj: dict) -> Dnn:
    a = obj["arch"]
    m = Dnn(a["input_dim"], a["hidden_dims"], a["output_dim"], a["activation"], a["context"],
            a.get("pnorm_group", 10), obj.get("input_pipeline"))
    m.load_state_dict(obj["state_dict"])
    return m


def load_model(path: str | os.PathLike) -> Dnn:
    return model_from_dict(load_model_file(path))
