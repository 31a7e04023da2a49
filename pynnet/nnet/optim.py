"""Optimizers over the affine layers of a Dnn: NG-SGD (Kaldi online natural gradient), SGD with
momentum (nnet1), AdaGrad (Seide et al.: on the raw, aggregated gradient; normalised per matrix).

Gradients are Kaldi-style SUMS over the minibatch's frames (nnet1/nnet2 learning rates such as
0.008 assume that). Each optimizer installs a grad hook on every Affine, so the weight gradient
(or preconditioned direction) is formed inside backward into a preallocated buffer; ``step(lr)``
then applies it. Usage::

    opt = make_optimizer("ngsgd", model)
    loss = F.cross_entropy(model(x), y, reduction="sum"); loss.backward(); opt.step(lr)
"""
from __future__ import annotations

import abc
import math

import torch

from pynnet.io.errors import fail
from pynnet.nnet.model import Affine, Dnn
from pynnet.nnet.ngsgd import NgConfig, OnlineNaturalGradient


class Optimizer(abc.ABC):
    """Base: plain gradients into ``layer.grad``. With ``fused_lr`` set (before backward), an
    optimizer that can (SGD without momentum, NG-SGD) applies its update inside backward as one
    GEMM into the weights, ``W += -lr g^T x`` (as Kaldi does): no gradient buffer, no extra pass
    over the parameters; ``step`` then only counts. Parallel training that needs the gradients
    leaves ``fused_lr`` None."""
    name = "base"
    fusable = False

    def __init__(self, model: Dnn):
        self.model = model
        self.layers = model.affines
        self.num_steps = 0
        self.fused_lr: float | None = None
        for layer in self.layers:
            layer.grad_hook = self._hook

    def _hook(self, layer: Affine, xa: torch.Tensor, g: torch.Tensor) -> None:
        if self.fused_lr is not None and self.fusable:
            with torch.no_grad():
                layer.wb.addmm_(g.t(), xa, alpha=-self.fused_lr)
            return
        torch.mm(g.t(), xa, out=layer.grad_buffer())

    @abc.abstractmethod
    def step(self, lr: float) -> None:
        """Apply one update with learning rate lr (each optimizer its own rule)."""

    def detach(self) -> None:
        for layer in self.layers:
            layer.grad_hook = None

    def state_dict(self) -> dict:
        return {"name": self.name, "num_steps": self.num_steps}

    def load_state_dict(self, s: dict) -> None:
        if s.get("name") != self.name:
            fail(f"checkpoint was written by optimizer '{s.get('name')}', not '{self.name}'")
        self.num_steps = s["num_steps"]


class Sgd(Optimizer):
    """w += v;  v = momentum v - lr g  (momentum 0: plain SGD)."""
    name = "sgd"

    def __init__(self, model: Dnn, momentum: float = 0.0):
        super().__init__(model)
        self.momentum = momentum
        self.velocity: list[torch.Tensor | None] = [None] * len(self.layers)

    @property
    def fusable(self) -> bool:
        return self.momentum == 0.0

    @torch.no_grad()
    def step(self, lr: float) -> None:
        if self.fused_lr is not None and self.fusable:
            self.num_steps += 1
            return
        for i, layer in enumerate(self.layers):
            if self.momentum == 0.0:
                layer.wb.add_(layer.grad, alpha=-lr)
                continue
            v = self.velocity[i]
            if v is None:
                v = self.velocity[i] = torch.zeros_like(layer.wb)
            v.mul_(self.momentum).add_(layer.grad, alpha=-lr)
            layer.wb.add_(v)
        self.num_steps += 1

    def state_dict(self) -> dict:
        return {**super().state_dict(), "momentum": self.momentum,
                "velocity": [None if v is None else v.cpu() for v in self.velocity]}

    def load_state_dict(self, s: dict) -> None:
        super().load_state_dict(s)
        dev = self.layers[0].wb.device
        self.velocity = [None if v is None else v.to(dev) for v in s["velocity"]]


ADAGRAD_FLOOR = 1e-16   # inside the square root (CNTK's floor)


@torch.no_grad()
def adagrad_delta(g: torch.Tensor, sum_sq: torch.Tensor, lr: float, scratch: torch.Tensor) -> torch.Tensor:
    """AdaGrad, normalised per tensor: ``sum_sq += g^2``; the change is
    ``-lr g sqrt(mean(sum_sq)) / sqrt(sum_sq + floor)``: a weight whose accumulated squared
    gradient is the tensor's mean steps as SGD with ``lr`` would, so newbob and SGD's learning
    rates keep their meaning (no 1/sqrt(t) decay; each step is at most lr x the RMS of the
    accumulated gradient). CNTK normalises by the mean of 1 / sqrt(sum_sq) instead, which a few
    weights with tiny gradients dominate: on egs/synth that trained far slower (docs/notes/parallel.md).
    Overwrites ``g`` with the change (and returns it); ``scratch``: a buffer of g's shape."""
    sum_sq.addcmul_(g, g)
    m = torch.add(sum_sq, ADAGRAD_FLOOR, out=scratch).rsqrt_()
    scale = math.sqrt(float(sum_sq.mean()) + ADAGRAD_FLOOR)
    return g.mul_(m).mul_(-lr * scale)


class AdaGrad(Optimizer):
    """AdaGrad on the raw gradient (Seide et al. 2014: before momentum), normalised per matrix
    (``adagrad_delta``), then unit-gain momentum: ``v = m v + (1 - m) delta``, ``w += v``."""
    name = "adagrad"

    def __init__(self, model: Dnn, momentum: float = 0.0):
        super().__init__(model)
        self.momentum = momentum
        self.sum_sq: list[torch.Tensor | None] = [None] * len(self.layers)
        self.velocity: list[torch.Tensor | None] = [None] * len(self.layers)
        self._scratch: list[torch.Tensor | None] = [None] * len(self.layers)

    @torch.no_grad()
    def step(self, lr: float) -> None:
        for i, layer in enumerate(self.layers):
            if self.sum_sq[i] is None:
                self.sum_sq[i] = torch.zeros_like(layer.wb)
                if self.momentum:
                    self.velocity[i] = torch.zeros_like(layer.wb)
            if self._scratch[i] is None:
                self._scratch[i] = torch.empty_like(layer.wb)
            d = adagrad_delta(layer.grad, self.sum_sq[i], lr, self._scratch[i])   # (the gradient is spent)
            if self.momentum:
                d = self.velocity[i].mul_(self.momentum).add_(d, alpha=1.0 - self.momentum)
            layer.wb.add_(d)
        self.num_steps += 1

    def state_dict(self) -> dict:
        cpu = lambda vs: [None if v is None else v.cpu() for v in vs]  # noqa: E731
        return {**super().state_dict(), "momentum": self.momentum, "sum_sq": cpu(self.sum_sq),
                "velocity": cpu(self.velocity)}

    def load_state_dict(self, s: dict) -> None:
        super().load_state_dict(s)
        dev = self.layers[0].wb.device
        self.sum_sq = [None if v is None else v.to(dev) for v in s["sum_sq"]]
        self.velocity = [None if v is None else v.to(dev) for v in s.get("velocity", [None] * len(self.layers))]


class NgSgd(Optimizer):
    """Kaldi nnet2 AffineComponentPreconditionedOnline: W += lr * gamma_in gamma_out ytilde^T xtilde,
    scaled down when lr * sum_i ||xtilde_i|| ||ytilde_i|| exceeds max_change_per_sample * N."""
    name = "ngsgd"
    fusable = True

    def __init__(self, model: Dnn, config: NgConfig | None = None):
        super().__init__(model)
        c = self.config = config or NgConfig()
        self.pre_in = [OnlineNaturalGradient(c.rank_in, c.alpha, c.update_period, c.num_samples_history, 1000 * i + 1)
                       for i in range(len(self.layers))]
        self.pre_out = [OnlineNaturalGradient(c.rank_out, c.alpha, c.update_period, c.num_samples_history, 1000 * i + 2)
                        for i in range(len(self.layers))]
        self._change: list[float] = [0.0] * len(self.layers)
        self._n: list[int] = [0] * len(self.layers)
        self._index = {id(layer): i for i, layer in enumerate(self.layers)}
        self.last_scales: list[float] = [1.0] * len(self.layers)

    def _hook(self, layer: Affine, xa: torch.Tensor, g: torch.Tensor) -> None:
        i = self._index[id(layer)]
        # [x 1] and g are the caller's scratch buffers, only needed here (dL/dx was computed
        # from g already), so both are preconditioned in place
        p_in, gam_in, rows_in = self.pre_in[i].precondition(xa, inplace=True)
        p_out, gam_out, rows_out = self._precondition_out(i, g)
        self._change[i] = float((rows_in * rows_out).sqrt().sum())
        self._n[i] = xa.shape[0]
        if self.fused_lr is not None:
            scale = self._max_change_scale(i, self.fused_lr)
            with torch.no_grad():
                layer.wb.addmm_(p_out.t(), p_in, alpha=-self.fused_lr * scale * gam_in * gam_out)
            return
        buf = layer.grad_buffer()
        torch.addmm(buf, p_out.t(), p_in, beta=0.0, alpha=gam_in * gam_out, out=buf)

    def _precondition_out(self, i: int, g: torch.Tensor) -> tuple[torch.Tensor, float, torch.Tensor]:
        """Layer i's preconditioned output derivative (the rows it updates), gamma, row norms."""
        return self.pre_out[i].precondition(g, inplace=True)

    def _max_change_scale(self, i: int, lr: float) -> float:
        mc = self.config.max_change_per_sample
        scale = 1.0
        tot = lr * self._change[i]
        if mc > 0 and tot > mc * self._n[i]:
            scale = mc * self._n[i] / tot
        self.last_scales[i] = scale
        return scale

    @torch.no_grad()
    def step(self, lr: float) -> None:
        if self.fused_lr is None:
            for i, layer in enumerate(self.layers):
                layer.wb.add_(layer.grad, alpha=-lr * self._max_change_scale(i, lr))
        self.num_steps += 1

    def state_dict(self) -> dict:
        def cpu(s):
            return {k: (v.cpu() if isinstance(v, torch.Tensor) else v) for k, v in s.items()}
        return {**super().state_dict(), "config": vars(self.config).copy(),
                "pre_in": [cpu(p.state_dict()) for p in self.pre_in],
                "pre_out": [cpu(p.state_dict()) for p in self.pre_out]}

    def load_state_dict(self, s: dict) -> None:
        super().load_state_dict(s)
        dev = self.layers[0].wb.device
        for p, st in zip(self.pre_in + self.pre_out, s["pre_in"] + s["pre_out"]):
            p.load_state_dict(st)
            p.to(dev)


def check_momentum(name: str, momentum: float) -> None:
    """SGD and AdaGrad have momentum: NG-SGD would silently ignore it."""
    if not 0.0 <= momentum < 1.0:
        fail(f"--momentum must be in [0, 1), not {momentum}")
    if momentum != 0.0 and name not in ("sgd", "adagrad"):
        fail(f"--momentum {momentum}: only --optimizer sgd and adagrad use momentum, not {name}")


def make_optimizer(name: str, model: Dnn, momentum: float = 0.0, ng_config: NgConfig | None = None) -> Optimizer:
    check_momentum(name, momentum)
    if name == "ngsgd":
        return NgSgd(model, ng_config)
    if name == "sgd":
        return Sgd(model, momentum)
    if name == "adagrad":
        return AdaGrad(model, momentum)
    fail(f"unknown optimizer '{name}' (ngsgd, sgd, adagrad)")
