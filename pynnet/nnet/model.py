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
import sys
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
def _padded_ld(n: int) -> int:
    """Row stride for an n-column matrix: a multiple of 16 floats (64 bytes), not of 256 floats.
    An odd stride such as 2049 ([W b] of a 2048-input layer) makes the BLAS update GEMM
    W += g^T x ~1.5x slower, and NG-SGD's skinny M -= H R ~3x slower at 1024 rows; a stride of
    exactly 2048 costs that one ~25% (cache-set conflicts)."""
    if n <= 8:
        return n
    ld = -(-n // 16) * 16
    return ld + 16 if ld % 256 == 0 else ld


def _padded_empty(rows: int, cols: int, like: torch.Tensor | None = None, **kw) -> torch.Tensor:
    """rows x cols view (row stride _padded_ld(cols)) of a new uninitialised buffer."""
    if like is not None:
        kw = {"dtype": like.dtype, "device": like.device}
    return torch.empty(rows, _padded_ld(cols), **kw)[:, :cols]


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
        ctx.layer.grad_hook(ctx.layer, ctx.layer.augmented_input(x), g)
        return gx, None, None


class Affine(nn.Module):
    """``wb`` (out x in+1, bias last) is a view with a padded row stride (see _padded_ld); use
    ``reshape``, not ``view``, to flatten it."""

    def __init__(self, in_dim: int, out_dim: int):
        super().__init__()
        self.in_dim, self.out_dim = in_dim, out_dim
        self.wb = nn.Parameter(_padded_empty(out_dim, in_dim + 1).zero_())
        self.grad_hook: Callable | None = None   # set by an optimizer while training:
        # grad_hook(layer, xa, g): xa = [x 1] (N x in+1, the caller's scratch buffer: the hook may
        # overwrite it), g = dL/dy (N x out, also scratch); called after dL/dx has been formed
        self.grad: torch.Tensor | None = None    # out x in+1 gradient buffer (hook writes it)
        self._xa: torch.Tensor | None = None     # N x in+1 buffer [x 1]

    def _apply(self, fn, recurse=True):
        super()._apply(fn, recurse)
        self.ensure_padded()
        return self

    def ensure_padded(self) -> None:
        """Restore the padded row stride after an operation that made ``wb`` contiguous
        (``.to(device)``, deepcopy)."""
        w = self.wb.data
        if w.dim() == 2 and w.stride() != (_padded_ld(w.shape[1]), 1):
            self.wb.data = _padded_empty(w.shape[0], w.shape[1], like=w).copy_(w)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.grad_hook is not None and torch.is_grad_enabled():
            return _HookedAffine.apply(x, self.wb, self)
        return torch.addmm(self.wb[:, -1], x, self.wb[:, :-1].t())

    def augmented_input(self, x: torch.Tensor) -> torch.Tensor:
        """[x 1] in a reused buffer (for the bias column of the gradient)."""
        n = x.shape[0]
        if self._xa is None or self._xa.shape[0] < n or self._xa.device != x.device or self._xa.dtype != x.dtype:
            self._xa = _padded_empty(max(n, 1), self.in_dim + 1, like=x)
        xa = self._xa[:n]
        xa[:, :-1].copy_(x)
        xa[:, -1].fill_(1.0)   # users may overwrite the buffer (NG-SGD preconditions it in place)
        return xa

    def grad_buffer(self) -> torch.Tensor:
        if self.grad is None or self.grad.device != self.wb.device:
            self.grad = torch.zeros_like(self.wb, memory_format=torch.contiguous_format)
        return self.grad


class _StackBuffers:
    """Preallocated training buffers of a sigmoid/ReLU stack for up to ``cap`` frames: per affine
    its input [x 1] (padded rows; the previous layer's activation is written straight into it),
    and two ping-pong buffers for the backward derivatives."""

    def __init__(self, affs: list["Affine"], cap: int, like: torch.Tensor):
        self.cap, self.dtype, self.device = cap, like.dtype, like.device
        self.xa = [_padded_empty(cap, a.in_dim + 1, like=like) for a in affs]
        wide = max([a.in_dim for a in affs[1:]] or [1])
        self.g = [_padded_empty(cap, wide, like=like) for _ in range(2)]

    def fits(self, n: int, like: torch.Tensor) -> bool:
        return n <= self.cap and like.dtype == self.dtype and like.device == self.device


class _FastStack(torch.autograd.Function):
    """The whole affine + sigmoid/ReLU stack of a Dnn in training with grad hooks, written out:

    forward  a_k = [x_k 1] [W_k b_k]^T (bias inside the GEMM), y_k = act(a_k) in place, written
             straight into the next layer's [x 1] buffer (no copies, no autograd graph per layer);
    backward dL/dx_k = g_k W_k, then act'(a_{k-1}) from the stored output y_{k-1} in the same
             buffer; the layer's grad_hook(layer, [x_k 1], g_k) forms the weight gradient or
             applies the update (it may overwrite both, they are not needed afterwards).

    Same mathematics as the layer-by-layer path (tests compare the two)."""

    @staticmethod
    def forward(ctx, x, model, *wbs):
        affs = model.affines
        n = x.shape[0]
        bufs = model._take_buffers(n, x)
        relu = model.arch["activation"] == "relu"
        xa = bufs.xa[0][:n]
        xa[:, :-1].copy_(x)
        out = None
        for k, a in enumerate(affs):
            xa = bufs.xa[k][:n]
            xa[:, -1].fill_(1.0)           # the hooks may have preconditioned it in place
            if k + 1 < len(affs):
                y = bufs.xa[k + 1][:n, :-1]
                torch.mm(xa, a.wb.t(), out=y)
                torch.relu_(y) if relu else torch.sigmoid_(y)
            else:
                out = torch.mm(xa, a.wb.t())
        ctx.model, ctx.bufs, ctx.n, ctx.relu = model, bufs, n, relu
        return out

    @staticmethod
    def backward(ctx, g):
        model, bufs, n = ctx.model, ctx.bufs, ctx.n
        if bufs is None:
            raise RuntimeError("backward through the same training-stack forward twice "
                               "(its buffers were consumed by the first backward)")
        ctx.bufs = None
        affs = model.affines
        g = g.contiguous()
        for k in range(len(affs) - 1, -1, -1):
            a = affs[k]
            gx = None
            if k > 0:
                gx = torch.mm(g, a.wb[:, :-1], out=bufs.g[k % 2][:n, :a.in_dim])
                y = bufs.xa[k][:n, :-1]     # the previous layer's output, before the hook may overwrite it
                if ctx.relu:
                    torch.ops.aten.threshold_backward.grad_input(gx, y, 0, grad_input=gx)
                else:
                    torch.ops.aten.sigmoid_backward.grad_input(gx, y, grad_input=gx)
            a.grad_hook(a, bufs.xa[k][:n], g)
            g = gx
        model._free_buffers = bufs            # reusable by the next forward
        return (None, None) + (None,) * len(affs)


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
    fast_stack = True   # use _FastStack when it applies (False: layer by layer, for comparisons)

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
        if self._fast_training(x):
            affs = self.affines
            return _FastStack.apply(x, self, *[a.wb for a in affs])
        return self.layers(x)

    def _fast_training(self, x: torch.Tensor) -> bool:
        """Training with optimizer hooks on every layer, sigmoid/ReLU units, no dL/dinput wanted:
        the hand-written stack (_FastStack) applies."""
        if not self.fast_stack or not torch.is_grad_enabled() or x.requires_grad or x.dim() != 2 or x.shape[0] == 0:
            return False
        if self.arch["activation"] not in ("sigmoid", "relu"):
            return False
        affs = self.affines
        return all(a.grad_hook is not None and a.wb.dtype == x.dtype and a.wb.device == x.device
                   for a in affs)

    def _take_buffers(self, n: int, like: torch.Tensor) -> _StackBuffers:
        """The training buffers, taken until the backward gives them back (a second forward before
        that backward gets fresh ones, so nothing a pending backward needs is overwritten)."""
        for a in self.affines:      # after a deepcopy or load_state_dict(assign=True)
            a.ensure_padded()
        b = self.__dict__.pop("_free_buffers", None)
        if b is None or not b.fits(n, like):
            b = _StackBuffers(self.affines, n, like)
        return b

    def __getstate__(self):
        state = super().__getstate__()
        state.pop("_free_buffers", None)   # scratch, not model state (copies and pickles skip it)
        return state

    def utterance_logits(self, feats: torch.Tensor) -> torch.Tensor:
        """Base features of one utterance (T x input_dim) -> logits (T x pdfs)."""
        return self.layers(self.transform(feats))

    def set_priors_from_counts(self, counts: np.ndarray, floor: float = 1e-10) -> None:
        """log p(pdf) from alignment counts (see :func:`log_priors_from_counts`)."""
        self.log_priors.copy_(torch.as_tensor(log_priors_from_counts(counts, floor), dtype=torch.float32))

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())


def log_priors_from_counts(counts: np.ndarray, floor: float = 1e-10) -> np.ndarray:
    """log p(pdf) from frame counts per pdf; pdfs whose relative frequency is below ``floor``
    (unseen ones) get +1e10, so their pseudo-log-likelihood is hugely negative (Kaldi nnet1's
    PdfPrior does the same, with sqrt(FLT_MAX))."""
    c = np.asarray(counts, dtype=np.float64)
    p = c / max(c.sum(), 1.0)
    return np.where(p > floor, np.log(np.maximum(p, floor)), 1e10)


# ---------------------------------------------------------------- model file
def save_model(path: str | os.PathLike, model: Dnn, extra: dict | None = None) -> None:
    """One file: architecture, input pipeline, feature transform, priors, weights (+ extra), atomic."""
    obj = {"format": MODEL_FORMAT, "arch": model.arch, "input_pipeline": model.input_pipeline,
           "state_dict": {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}}
    if extra:
        obj.update(extra)
    save_atomic(obj, path)


def save_atomic(obj, path: str | os.PathLike) -> None:
    """torch.save through a temp file renamed onto path. A failed write (disk full, quota, file
    size limit) is a one-line error naming the file (torch's writer raises a RuntimeError with a
    C++ backtrace); nothing is left behind."""
    obj = _canonical(obj)
    with atomic_path(path) as tmp:
        # through a file object: the archive inside is then named 'archive', not after the
        # temp file, so identical runs write identical bytes
        with open(tmp, "wb") as f:
            out = _KeepWriteError(f)
            try:
                torch.save(obj, out)
            except RuntimeError as e:    # torch's zip writer: the errno is lost
                if out.error is not None:    # ... but not here (No space left on device: path)
                    raise OSError(out.error.errno, out.error.strerror, os.fspath(path)) from e
                first = (str(e).strip().splitlines() or [""])[0]
                fail(f"cannot write it (disk full or a file size limit?): {first}", path)


def _canonical(obj, memo: dict | None = None):
    """``obj`` with every str interned and its dicts, lists and tuples rebuilt (a container met
    twice is rebuilt once; tensors and other objects are kept). Pickle writes a str once and
    refers back to it where the same object recurs: a training resumed after a kill has its
    history read back from checkpoint.pt, each key a str of its own where an uninterrupted run's
    are shared literals, so the same model and history pickled to other bytes
    (bench/kill_resume.py found it in final.nnet)."""
    if type(obj) is str:
        return sys.intern(obj)
    if type(obj) not in (dict, list, tuple):
        return obj
    memo = {} if memo is None else memo
    if id(obj) in memo:
        return memo[id(obj)]
    if type(obj) is dict:
        out = {_canonical(k, memo): _canonical(v, memo) for k, v in obj.items()}
    elif type(obj) is list:
        out = [_canonical(v, memo) for v in obj]
    else:
        out = tuple(_canonical(v, memo) for v in obj)
    memo[id(obj)] = out
    return out


class _KeepWriteError:
    """The file object torch.save writes to, keeping the OSError of a failed write (which torch's
    zip writer turns into a RuntimeError that says only 'unexpected pos')."""

    def __init__(self, f) -> None:
        self._f = f
        self.error: OSError | None = None

    def write(self, data) -> int:
        try:
            return self._f.write(data)
        except OSError as e:
            self.error = e
            raise

    def flush(self) -> None:
        self._f.flush()


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
