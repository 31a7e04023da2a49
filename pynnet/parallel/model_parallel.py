"""Model parallelism (``--model-parallel M``; Seide et al. 2014, "1-bit SGD ...", and ICASSP 2014):
the M ranks of a model-parallel group each hold a slice of every layer's output units (rows of
``[W b]``: contiguous, the first ``rows % M`` ranks one more) and together compute one minibatch:

* forward: each rank computes its slice of a layer's outputs from the whole input, then the
  slices are all-gathered, so every rank has the layer's whole output as the next layer's input;
  the output layer's logits are all-gathered too, and every rank computes the same loss;
* backward: each rank's dL/d(input) of a layer is a partial sum (its rows' share of ``g W``): a
  reduce-scatter (here an alltoall + a sum in rank order) leaves each rank the sum for its own
  slice of the previous layer's outputs; the weight gradient of a slice, ``g_slice^T [x 1]``,
  needs no communication;
* NG-SGD preconditions the output derivative over the whole layer (its Fisher estimate spans all
  outputs), so each rank all-gathers a layer's derivative and preconditions the whole of it,
  identically on every rank of the group, and keeps its slice: the updates are the single
  process's, within float rounding (tests). The input side is replicated and needs nothing.

With K workers and ``--model-parallel M`` there are K/M model-parallel groups (ranks
g*M .. g*M+M-1) training on K/M data shards (Seide's 4 x 2 is K=8, M=2); ranks holding the same
slice in different groups (m, m+M, ...) synchronise as in data-parallel training (``--sync``):
averaging, gradient allreduce or 1-bit exchanges of their slices. The checkpoints and final.nnet
hold the whole model (group 0 gathers it for rank 0), so a model-parallel run resumes, decodes
and compares as any other.
"""
from __future__ import annotations

import copy

import torch
from torch import nn

from pynnet.io.errors import PynnetError
from pynnet.nnet.model import Affine, Dnn
from pynnet.nnet.ngsgd import NgConfig
from pynnet.nnet.optim import NgSgd, Optimizer, make_optimizer
from pynnet.parallel.comm import CommFailure, Communicator
from pynnet.parallel.sync import ParallelSync, column_stripes, make_sync

ACTIVATIONS = {"sigmoid": torch.sigmoid, "relu": torch.relu}


def group_layout(size: int, model_parallel: int) -> tuple[list[list[int]], list[list[int]]]:
    """(model-parallel groups, data-parallel groups) of ``size`` ranks: rank r holds slice
    r % M of group r // M."""
    m = model_parallel
    if m < 1 or size % m:
        raise PynnetError(f"--model-parallel {m} must divide --num-workers {size} "
                          f"(the workers are (num-workers / model-parallel) data x (model-parallel) model)")
    groups = size // m
    return ([[g * m + j for j in range(m)] for g in range(groups)],
            [[g * m + j for g in range(groups)] for j in range(m)])


# ---------------------------------------------------------------- the collectives of a layer
def gather_slices(part: torch.Tensor, comm: Communicator, bounds: list[tuple[int, int]], what: str) -> torch.Tensor:
    """N x (slice) on each rank -> the N x (all) concatenation, on every rank."""
    width = max(b - a for a, b in bounds)
    n, w = part.shape
    send = part.contiguous() if w == width else torch.zeros(n, width, dtype=part.dtype, device=part.device)
    if w != width:
        send[:, :w] = part
    rows = comm.allgather(send, what)
    return torch.cat([rows[j, :, :b - a] for j, (a, b) in enumerate(bounds)], dim=1)


def reduce_scatter_slices(full: torch.Tensor, comm: Communicator, bounds: list[tuple[int, int]],
                          what: str) -> torch.Tensor:
    """Each rank's partial N x (all) sum -> this rank's slice of the total, summed in rank order
    (the same on every rank of any run)."""
    width = max(b - a for a, b in bounds)
    send = torch.zeros(comm.size, full.shape[0], width, dtype=full.dtype, device=full.device)
    for j, (a, b) in enumerate(bounds):
        send[j, :, :b - a] = full[:, a:b]
    recv = comm.alltoall(send, what)
    a, b = bounds[comm.rank]
    out = recv[0, :, :b - a].clone()
    for r in range(1, comm.size):
        out += recv[r, :, :b - a]
    return out


class _GatherToSlices(torch.autograd.Function):
    """All-gather of a hidden layer's output slices; backward: the next layer's ranks each hold
    a partial dL/d(output), reduce-scattered to the slices."""

    @staticmethod
    def forward(ctx, part, comm, bounds, layer):
        ctx.comm, ctx.bounds, ctx.layer = comm, bounds, layer
        return gather_slices(part, comm, bounds, f"the model-parallel forward of layer {layer}")

    @staticmethod
    def backward(ctx, g):
        return (reduce_scatter_slices(g, ctx.comm, ctx.bounds, f"the model-parallel backward of layer {ctx.layer}"),
                None, None, None)


class _GatherToReplicated(torch.autograd.Function):
    """All-gather of the logits; every rank computes the same loss from them, so the derivative
    arriving here is the whole (not a partial) one: each rank keeps its slice."""

    @staticmethod
    def forward(ctx, part, comm, bounds):
        ctx.slice = bounds[comm.rank]
        return gather_slices(part, comm, bounds, "the model-parallel forward of the output layer")

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.slice
        return g[:, a:b].contiguous(), None, None


# ---------------------------------------------------------------- the model
class StripedDnn(nn.Module):
    """This rank's slice of every affine layer of a sigmoid/ReLU ``Dnn`` (see the module doc);
    the feature transform and priors whole. ``state_dict`` is the local one (slices);
    ``full_state``/``load_full_state`` convert to and from the whole model's."""

    def __init__(self, full: Dnn, comm: Communicator):
        super().__init__()
        act = full.arch["activation"]
        if act not in ACTIVATIONS:
            raise PynnetError(f"--model-parallel splits sigmoid or ReLU layers, not {act} "
                              "(a p-norm group would straddle two ranks)")
        self.comm = comm
        self.arch, self.input_pipeline = dict(full.arch), dict(full.input_pipeline)
        self.activation = ACTIVATIONS[act]
        self.transform = copy.deepcopy(full.transform)
        self.register_buffer("log_priors", full.log_priors.detach().clone())
        affs = full.affines
        small = [a.out_dim for a in affs if a.out_dim < comm.size]
        if small:
            raise PynnetError(f"--model-parallel {comm.size}: a layer of {small[0]} units cannot be split "
                              f"{comm.size} ways")
        self.bounds = [column_stripes(a.out_dim, comm.size) for a in affs]
        self.slices = nn.ModuleList(Affine(a.in_dim, b[comm.rank][1] - b[comm.rank][0])
                                    for a, b in zip(affs, self.bounds))
        # the whole model's state-dict keys of the layers (and their order)
        self.full_keys = list(full.state_dict().keys())
        self.layer_keys = [f"layers.{name}.wb" for name, m in full.layers.named_children() if isinstance(m, Affine)]
        self.load_full_state(full.state_dict())

    @property
    def affines(self) -> list[Affine]:
        return list(self.slices)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Transformed input frames (N x spliced dim, the same on every rank of the group) ->
        the whole logits (N x pdfs, on every rank)."""
        last = len(self.slices) - 1
        for k, (a, bounds) in enumerate(zip(self.slices, self.bounds)):
            z = a(x)
            if k == last:
                return _GatherToReplicated.apply(z, self.comm, bounds)
            x = _GatherToSlices.apply(self.activation(z), self.comm, bounds, k + 1)
        raise AssertionError("no layers")

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    @torch.no_grad()
    def load_full_state(self, state: dict) -> None:
        for key, a, bounds in zip(self.layer_keys, self.slices, self.bounds):
            r0, r1 = bounds[self.comm.rank]
            a.wb.copy_(state[key][r0:r1])
        self.transform.load_state_dict({"shift": state["transform.shift"], "scale": state["transform.scale"]})
        self.log_priors.copy_(state["log_priors"])

    @torch.no_grad()
    def full_state(self) -> dict:
        """The whole model's state dict, on every rank of the group (a collective of the group)."""
        rows = {key: gather_slices(a.wb.detach().t(), self.comm, bounds, "the gathering of the model").t()
                for key, a, bounds in zip(self.layer_keys, self.slices, self.bounds)}
        own = {"transform.shift": self.transform.shift, "transform.scale": self.transform.scale,
               "log_priors": self.log_priors}
        return {k: (rows[k] if k in rows else own[k]).detach().cpu().clone().contiguous() for k in self.full_keys}


class StripedNgSgd(NgSgd):
    """NG-SGD over a ``StripedDnn``: the output derivative of a layer is gathered and
    preconditioned whole (the same on every rank of the group), each rank keeping its slice."""

    def __init__(self, model: StripedDnn, config: NgConfig | None = None):
        super().__init__(model, config)
        self.comm, self.bounds = model.comm, model.bounds

    def _precondition_out(self, i: int, g: torch.Tensor) -> tuple[torch.Tensor, float, torch.Tensor]:
        bounds = self.bounds[i]
        whole = gather_slices(g, self.comm, bounds, f"the NG-SGD derivative gathering of layer {i + 1}")
        p_out, gamma, rows = self.pre_out[i].precondition(whole, inplace=True)
        r0, r1 = bounds[self.comm.rank]
        return p_out[:, r0:r1], gamma, rows


# ---------------------------------------------------------------- the synchronizer
class ModelParallelSync(ParallelSync):
    """``--model-parallel M`` of ``--num-workers K``: the slices of a layer are combined inside
    each group of M ranks (StripedDnn); with K > M, the ranks holding the same slice synchronise
    by ``cfg.sync`` (the data-parallel synchronizer, over those ranks), and each group trains on
    its own data shard. Checkpoints: rank 0 writes the whole model and every rank's state."""
    mode = "model-parallel"

    def __init__(self, cfg, comm: Communicator):
        super().__init__(comm, cfg.lr_scaling)
        self.model_parallel = cfg.model_parallel
        model_groups, data_groups = group_layout(comm.size, cfg.model_parallel)
        self.mp = comm.split(model_groups)
        self.dp = comm.split(data_groups) if len(model_groups) > 1 else None
        self.shard_index, self.shard_count = comm.rank // cfg.model_parallel, len(model_groups)
        self.inner = make_sync(cfg, self.dp) if self.dp is not None else None
        if self.inner is not None:
            self.inner.is_writer = self.is_writer   # (one rank logs)
        self._failure_msg: str | None = None

    # what the data-parallel synchronizer decides
    @property
    def lr_scale(self) -> float:
        return self.inner.lr_scale if self.inner else 1.0

    @property
    def needs_gradients(self) -> bool:
        return bool(self.inner and self.inner.needs_gradients)

    @property
    def owns_update(self) -> bool:
        return bool(self.inner and self.inner.owns_update)

    @property
    def local_failure(self) -> str | None:
        return self._failure_msg

    @local_failure.setter
    def local_failure(self, v: str | None) -> None:
        # (the loss is computed from the same gathered logits on every rank of a group, so its
        # ranks always agree; the data-parallel synchronizer carries it to the other groups)
        self._failure_msg = v
        if getattr(self, "inner", None) is not None:
            self.inner.local_failure = v

    @property
    def data_size(self) -> int:
        return self.shard_count

    def local_minibatch(self, n: int) -> int:
        return self.inner.local_minibatch(n) if self.inner else n

    # the model and optimizer of this rank
    def local_model(self, model: Dnn) -> Dnn:
        try:
            return StripedDnn(model, self.mp)
        except PynnetError as e:   # (every rank finds it: rank 0 says it)
            raise CommFailure(str(e), collective=not self.is_writer) from None

    def make_optimizer(self, name: str, model: Dnn, momentum: float) -> Optimizer:
        if name == "ngsgd":
            return StripedNgSgd(model)
        if name == "adagrad" and not self.owns_update:
            # (normalised per matrix: the slices would each normalise by their own mean)
            raise PynnetError("--model-parallel trains with --optimizer ngsgd or sgd (adagrad only with --sync 1bit)")
        return make_optimizer(name, model, momentum)

    def model_state(self, model: StripedDnn) -> dict | None:
        if self.shard_index != 0:   # (the groups' models are the same whenever one is saved)
            return None
        state = model.full_state()
        return state if self.is_writer else None

    def load_model(self, model: StripedDnn, state: dict) -> None:
        model.load_full_state(state)

    def nonfinite(self, names: list[str]) -> list[str]:
        everyone = self.comm.allgather_object(names, "the check for non-finite parameters")
        return sorted({n for ns in everyone for n in ns})

    # the trainer's hooks
    def setup(self, model: Dnn, opt: Optimizer) -> None:
        super().setup(model, opt)
        if self.inner is not None:
            self.inner.setup(model, opt)

    def before_update(self, step, model, optimizer, lr=0.0):
        return self.inner.before_update(step, model, optimizer, lr) if self.inner else None

    def after_update(self, step, model, optimizer):
        if self.inner is not None:
            return self.inner.after_update(step, model, optimizer)
        return self.local_failure   # (every rank of the one group has the same: all restart)

    def end_epoch(self, step):
        return self.inner.end_epoch(step) if self.inner else None

    def flush(self, step):
        return self.inner.flush(step) if self.inner else None

    def checkpoint_due(self, step: int, every: int) -> bool:
        return self.inner.checkpoint_due(step, every) if self.inner else step % every == 0

    def reduce(self, stats: dict[str, float]) -> dict[str, float]:
        # (the ranks of a group hold the same statistics: summed over the groups only)
        return self.inner.reduce(stats) if self.inner else stats

    def note_checkpoint(self, text: str) -> None:
        for c in (self.comm, self.mp, self.dp):
            if c is not None:
                c.failure_note = text

    def check_replicas(self) -> None:
        if self.inner is not None:   # (the same slice in every group)
            self.inner.check_replicas()

    def state_dict(self) -> dict:
        return self.inner.state_dict() if self.inner else {}

    def load_state_dict(self, s: dict) -> None:
        if self.inner is not None:
            self.inner.load_state_dict(s)
