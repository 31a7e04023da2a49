"""Data-parallel DNN training as ``Synchronizer``s of the one training loop (pynnet.nnet.train).

Each rank trains on its own shard of whole utterances (balanced by frames), seeded from
(seed, rank), and runs the same number of minibatches per epoch; how the ranks stay in step is
the pluggable part:

* ``AverageSync`` (``--sync average``, Su & Chen 2015): local NG-SGD/SGD updates; every N
  minibatches the parameters are averaged in memory with one allreduce (nnet2 averages through
  files every 1-2 minutes). The NG-SGD preconditioners stay per rank (each estimates the Fisher
  matrix of its own data); SGD momentum stays per rank too (each velocity continues from its
  own local steps: averaging it would double the bytes of every average).
* ``AllreduceSync`` (``--sync allreduce``): the synchronous baseline: every minibatch's gradient
  (NG-SGD: the preconditioned direction, and the max-change statistics) is averaged with one fp32
  allreduce before the step, so every replica makes the same update.
* ``OneBitAverageSync`` (``--sync average-1bit``): as averaging, but each rank sends the change of
  its parameters since the last average quantized to 1 bit per value with error feedback
  (pynnet.parallel.quantize), allgathered; every rank decodes the same bits in rank order, so
  the replicas stay identical.

Learning rate with K workers (``--lr-scaling``): the rate is multiplied by K (``linear``, the
default), sqrt(K) or 1. Averaging K models each moved by lr x their gradients moves the average
by lr/K x the sum: linear scaling makes an epoch's total step what one worker's is (nnet2's
"effective learning rate" times the number of jobs); in the allreduce mode the gradients are
averaged, so linear scaling applies one worker's per-frame rate to the K minibatches' sum.
"""
from __future__ import annotations

import hashlib
import math
import sys
import time

import numpy as np
import torch

from pynnet.io.errors import PynnetError
from pynnet.nnet.data import FrameSet, log
from pynnet.nnet.model import Dnn
from pynnet.nnet.optim import NgSgd, Optimizer, adagrad_delta
from pynnet.nnet.train import Synchronizer
from pynnet.parallel.comm import CommFailure, Communicator
from pynnet.parallel.quantize import ErrorFeedbackQuantizer

SYNC_MODES = ("average", "allreduce", "average-1bit", "1bit")
LR_SCALINGS = ("linear", "sqrt", "none")


def rank_seed(seed: int, rank: int, size: int) -> int:
    """The data-order seed of ``rank`` of ``size`` (one worker: ``seed`` itself)."""
    if size == 1:
        return seed
    return int(np.random.SeedSequence([seed, rank, size]).generate_state(1)[0])


def shard_utterances(utts: list[str], frames: dict[str, int], size: int) -> list[list[str]]:
    """Whole utterances to ``size`` shards balanced by frames: longest first, each to the shard
    with the fewest frames so far (ties: the lower rank); each shard C-sorted."""
    order = sorted(utts, key=lambda u: (-frames[u], u.encode()))
    load = [0] * size
    shards: list[list[str]] = [[] for _ in range(size)]
    for u in order:
        r = min(range(size), key=lambda j: (load[j], j))
        shards[r].append(u)
        load[r] += frames[u]
    return [sorted(s, key=lambda u: u.encode()) for s in shards]


def flatten_parameters(model: Dnn, extra: int = 0) -> torch.Tensor:
    """Puts every affine layer's ``wb`` into one buffer (each a view with its padded row stride,
    the padding zero) so that one collective moves the whole model; ``extra`` more elements at
    the end. Returns the buffer."""
    affs = model.affines
    for a in affs:
        a.ensure_padded()
    sizes = [a.wb.shape[0] * a.wb.stride(0) for a in affs]
    w = affs[0].wb
    flat = torch.zeros(sum(sizes) + extra, dtype=w.dtype, device=w.device)
    o = 0
    for a, n in zip(affs, sizes):
        rows, cols = a.wb.shape
        view = flat[o:o + n].view(rows, a.wb.stride(0))[:, :cols]
        view.copy_(a.wb.data)
        a.wb.data = view
        o += n
    return flat


def parameters_sha1(model: Dnn) -> str:
    h = hashlib.sha1()
    for a in model.affines:
        h.update(a.wb.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


class ParallelSync(Synchronizer):
    """What the modes share: rank, shard seeds, reductions, per-rank state in checkpoints, the
    agreement check, the learning-rate scaling."""
    mode = ""

    def __init__(self, comm: Communicator, lr_scaling: str = "linear"):
        if lr_scaling not in LR_SCALINGS:
            raise PynnetError(f"--lr-scaling must be one of {', '.join(LR_SCALINGS)}, not '{lr_scaling}'")
        self.comm, self.lr_scaling = comm, lr_scaling
        self.rank, self.size = comm.rank, comm.size
        self.is_writer = self.rank == 0
        # which of how many data shards this rank trains on (model parallelism: a group of ranks
        # shares one)
        self.shard_index, self.shard_count = self.rank, self.size
        self.local_failure: str | None = None
        self.model: Dnn | None = None
        self.updates_since_sync = 0

    @property
    def lr_scale(self) -> float:
        return {"linear": float(self.size), "sqrt": math.sqrt(self.size), "none": 1.0}[self.lr_scaling]

    def data_seed(self, seed: int) -> int:
        return rank_seed(seed, self.shard_index, self.shard_count)

    # ------------------------------------------------------------ agreement and reductions
    def agree(self, fingerprint: dict) -> None:
        """Every rank must run the same command on the same data: a mismatch is one error
        (printed by rank 0), not a hang in a collective whose sizes differ."""
        all_fp = self.comm.allgather_object(fingerprint, "the start (rank agreement check)")
        diffs = []
        for r, fp in enumerate(all_fp[1:], 1):
            for k in sorted(set(fp) | set(all_fp[0])):
                if fp.get(k) != all_fp[0].get(k):
                    diffs.append(f"rank {r} has {k} {_short(fp.get(k))} (rank 0: {_short(all_fp[0].get(k))})")
        if diffs:
            raise CommFailure("the ranks disagree: " + "; ".join(diffs[:4]) + (" ..." if len(diffs) > 4 else "")
                              + ": every rank must run the same command on the same data",
                              collective=not self.is_writer)

    def shard(self, tr: FrameSet, cv: FrameSet, fingerprint: dict, model: Dnn) -> tuple[FrameSet, FrameSet]:
        self.agree(fingerprint | {"initial model": parameters_sha1(model), "ranks": self.size})
        n = self.shard_count
        for fs, what in ((tr, "training"), (cv, "CV")):
            if len(fs.utts) < n:
                raise CommFailure(f"{fs.reader.feats_scp}: {n} data-parallel workers but only {len(fs.utts)} {what} "
                                  "utterances: each worker needs at least one", collective=not self.is_writer)
        parts = [shard_utterances(fs.utts, fs.frames, n)[self.shard_index] for fs in (tr, cv)]
        log(f"rank {self.rank} of {self.size}" + (f" (data shard {self.shard_index} of {n})" if n != self.size else "")
            + f": {len(parts[0])} training utterances "
            f"({sum(tr.frames[u] for u in parts[0])} frames), {len(parts[1])} CV utterances")
        return (FrameSet(tr.reader, tr.targets, parts[0], tr.frames, tr.lengths_from),
                FrameSet(cv.reader, cv.targets, parts[1], cv.frames, cv.lengths_from))

    def reduce(self, stats: dict[str, float]) -> dict[str, float]:
        """Sums over the ranks (``seconds``: the slowest rank's), added in rank order on every
        rank, so that every rank takes the same newbob decision."""
        keys = sorted(stats)
        rows = self.comm.allgather(torch.tensor([float(stats[k]) for k in keys], dtype=torch.float64),
                                   "the reduction of the statistics").numpy()
        out = {}
        for j, k in enumerate(keys):
            col = rows[:, j]
            out[k] = float(col.max()) if k == "seconds" else float(sum(col.tolist()))
        return out

    def epoch_steps(self, planned: int) -> int | None:
        """The same number of minibatches on every rank: the smallest shard's."""
        counts = self.comm.allgather(torch.tensor([planned], dtype=torch.int64), "the epoch's start")
        return int(counts.min())

    def gather(self, obj):
        return self.comm.gather_object(obj, what="the checkpoint's per-rank state")

    def checkpoint_due(self, step: int, every: int) -> bool:
        return step % every == 0

    def note_checkpoint(self, text: str) -> None:
        self.comm.failure_note = text

    def check_replicas(self) -> None:
        """After an epoch: every replica must be the same model (they are by construction; a
        summation order that differed between ranks would show here): rank 0's is kept."""
        hashes = self.comm.allgather_object(parameters_sha1(self.model), "the end of the epoch (replica check)")
        if len(set(hashes)) > 1:
            if self.is_writer:
                print(f"WARNING: the replicas differ after the epoch ({len(set(hashes))} versions): "
                      "rank 0's model is broadcast", file=sys.stderr, flush=True)
            for a in self.model.affines:
                self.comm.broadcast(a.wb.data, 0, "the replica repair")

    def _failure(self, count: float, step: int) -> str | None:
        if count <= 0:
            return None
        return f"non-finite loss on {int(round(count))} of {self.size} ranks before update {step}"

    def setup(self, model: Dnn, opt: Optimizer) -> None:
        self.model = model


class AverageSync(ParallelSync):
    """``average_every`` 0 (``--average-every auto``): the period is chosen at the start from
    ``auto`` = (calibration file, target share of the step time, minibatch) by the calibrated
    model of our training (pynnet.parallel.perfmodel) when first needed, logged, and kept in the
    checkpoints (a resumed run averages as it started, whatever the calibration file says then)."""
    mode = "average"

    def __init__(self, comm: Communicator, average_every: int = 10, lr_scaling: str = "linear",
                 auto: tuple[str, float, int] | None = None):
        super().__init__(comm, lr_scaling)
        if average_every == 0 and auto is None:
            raise PynnetError("--average-every auto needs a calibration file")
        self.every, self.auto = average_every, auto

    def setup(self, model: Dnn, opt: Optimizer) -> None:
        super().setup(model, opt)
        self.flat = flatten_parameters(model, extra=1)   # + the failure flag

    def period(self) -> int:
        """--average-every (auto: chosen now, unless a checkpoint's was restored)."""
        if self.every == 0:
            self.every = self._auto_period()
        return self.every

    def _auto_period(self) -> int:
        from pynnet.parallel.perfmodel import ModelShape, auto_average_every, load_calibration
        path, share, minibatch = self.auto
        model = self.model
        a = model.arch
        shape = ModelShape(model.transform.output_dim, tuple(a["hidden_dims"]), a["output_dim"])
        every, predicted = auto_average_every(load_calibration(path), shape, minibatch, self.size, share,
                                              onebit=self.mode == "average-1bit")
        if self.is_writer:
            log(f"--average-every auto: every {every} minibatches (predicted: the averages take "
                f"{100 * predicted:.1f}% of the step time, target {100 * share:.1f}%; calibration {path})")
        return every

    def state_dict(self) -> dict:
        return {"every": self.period()}

    def load_state_dict(self, s: dict) -> None:
        self.every = s.get("every", self.every)

    def checkpoint_due(self, step: int, every: int) -> bool:
        # only right after an average, when every replica is the same model
        every = -(-every // self.period()) * self.period()
        return step % every == 0

    def after_update(self, step: int, model: Dnn, optimizer: Optimizer) -> str | None:
        self.updates_since_sync += 1
        if step % self.period():
            return None
        return self._average(step)

    def end_epoch(self, step: int) -> str | None:
        return self._average(step) if self.updates_since_sync else None

    @torch.no_grad()
    def _average(self, step: int) -> str | None:
        self.updates_since_sync = 0
        self.flat[-1] = 1.0 if self.local_failure else 0.0
        self.comm.allreduce(self.flat, "sum", f"the parameter averaging after update {step}")
        bad = float(self.flat[-1])
        self.flat[:-1].div_(self.size)
        return self._failure(bad, step)


class AllreduceSync(ParallelSync):
    mode = "allreduce"
    needs_gradients = True

    def setup(self, model: Dnn, opt: Optimizer) -> None:
        super().setup(model, opt)
        affs = model.affines
        sizes = [a.out_dim * (a.in_dim + 1) for a in affs]
        self.num_layers = len(affs)
        self.tail = sum(sizes)
        w = affs[0].wb
        # gradients, then per layer NG-SGD's max-change statistics (sum of row-norm products,
        # rows), then the failure flag
        self.gflat = torch.zeros(self.tail + 2 * len(affs) + 1, dtype=w.dtype, device=w.device)
        o = 0
        for a, n in zip(affs, sizes):
            a.grad = self.gflat[o:o + n].view(a.out_dim, a.in_dim + 1)
            o += n

    @torch.no_grad()
    def before_update(self, step: int, model: Dnn, optimizer: Optimizer, lr: float = 0.0) -> str | None:
        L, tail = self.num_layers, self.gflat[self.tail:]
        if self.local_failure:
            self.gflat[:self.tail].zero_()
        ng = isinstance(optimizer, NgSgd)
        if ng:
            tail[:L] = torch.tensor(optimizer._change, dtype=tail.dtype)
            tail[L:2 * L] = torch.tensor(optimizer._n, dtype=tail.dtype)
        tail[-1] = 1.0 if self.local_failure else 0.0
        self.comm.allreduce(self.gflat, "sum", f"the gradient allreduce of update {step + 1}")
        t = tail.double().cpu()
        bad = self._failure(float(t[-1]), step + 1)
        if bad:
            return bad
        self.gflat[:self.tail].div_(self.size)
        if ng:
            # the max-change check on the averaged step: lr x the mean change against all rows
            optimizer._change = (t[:L] / self.size).tolist()
            optimizer._n = [int(round(v)) for v in t[L:2 * L].tolist()]
        return None


class OneBitAverageSync(AverageSync):
    mode = "average-1bit"

    def __init__(self, comm: Communicator, average_every: int = 10, lr_scaling: str = "linear",
                 error_feedback: bool = True, auto: tuple[str, float, int] | None = None):
        super().__init__(comm, average_every, lr_scaling, auto)
        self.error_feedback = error_feedback

    def setup(self, model: Dnn, opt: Optimizer) -> None:
        ParallelSync.setup(self, model, opt)
        affs = model.affines
        self.quantizers = [ErrorFeedbackQuantizer(a.out_dim, a.in_dim + 1, self.error_feedback) for a in affs]
        self.offsets = np.cumsum([8] + [q.nbytes for q in self.quantizers]).tolist()
        self.payload = torch.zeros(self.offsets[-1], dtype=torch.uint8)
        self._take_reference()

    def _take_reference(self) -> None:
        # the last average: identical on every rank
        self.ref = [a.wb.detach().cpu().clone().contiguous() for a in self.model.affines]

    @torch.no_grad()
    def _average(self, step: int) -> str | None:
        self.updates_since_sync = 0
        self.payload[:8] = _flag_bytes(1.0 if self.local_failure else 0.0)
        for a, q, ref, o in zip(self.model.affines, self.quantizers, self.ref, self.offsets):
            q.encode(a.wb.detach().cpu() - ref, self.payload[o:o + q.nbytes])
        rows = self.comm.allgather(self.payload, f"the 1-bit parameter averaging after update {step}")
        bad = sum(_flag(rows[r, :8]) for r in range(self.size))
        if bad:
            return self._failure(bad, step)
        for a, q, ref, o in zip(self.model.affines, self.quantizers, self.ref, self.offsets):
            total = torch.zeros_like(ref)
            for r in range(self.size):
                q.decode_add(rows[r, o:o + q.nbytes], total)
            ref.add_(total.div_(self.size))
            a.wb.copy_(ref)
        return None

    def state_dict(self) -> dict:
        return {"residuals": [q.residual.clone() for q in self.quantizers], "every": self.period()}

    def load_state_dict(self, s: dict) -> None:
        """After the model was restored: the residuals of the checkpoint, the reference = the model."""
        for q, r in zip(self.quantizers, s["residuals"]):
            q.residual.copy_(r)
        self.every = s.get("every", self.every)
        self._take_reference()


def column_stripes(cols: int, size: int) -> list[tuple[int, int]]:
    """Rank j's stripe of ``cols`` columns: contiguous, the first ``cols % size`` ranks one
    column more (CNTK's AllReduceDistGradAggregator)."""
    per, extra = divmod(cols, size)
    starts = [per * j + min(extra, j) for j in range(size + 1)]
    return [(starts[j], starts[j + 1]) for j in range(size)]


class OneBitSgdSync(ParallelSync):
    """1-bit SGD (Seide et al. 2014), ``--sync 1bit``: synchronous data parallelism over a global
    minibatch of ``--minibatch-size`` frames (each rank computes the gradient, a sum, of its
    1/K), aggregated in stripes: rank j owns stripe j of every matrix's columns (the bias is one
    more column). Every rank quantizes its whole gradient (1 bit per value, error feedback) and
    sends stripe j to rank j (alltoall); the owner decodes and sums the K stripes in rank order,
    applies the update rule to the aggregate (AdaGrad on the raw gradient, normalised per stripe,
    then unit-gain momentum; or SGD with momentum), quantizes the update with a second residual,
    and every rank allgathers the stripes and adds the decoded updates. Every rank decodes the
    same bits, so the replicas stay identical, and the rule's state lives with the owner (1/K of
    it per rank; CNTK instead decodes the aggregated gradient everywhere and runs AdaGrad on
    every rank).

    Double buffering (``--double-buffering true``): each minibatch is trained as two halves; the
    exchange of one half's gradient runs in a thread while the next half is computed, so each
    update lands one half later (the model is stale by N/2, as in the paper; CNTK's
    bufferedAsyncGradientAggregation). The exchange in flight is finished before every
    checkpoint and at the end of an epoch, on every run alike, so a resumed run is the same as
    an uninterrupted one."""
    mode = "1bit"
    needs_gradients = True
    owns_update = True

    def __init__(self, comm: Communicator, double_buffering: bool = False, error_feedback: bool = True,
                 momentum: float = 0.0):
        super().__init__(comm, "none")
        self.double_buffering, self.error_feedback, self.momentum = double_buffering, error_feedback, momentum
        self.exchange_seconds = 0.0   # the exchanges' own time (in the thread with double buffering)
        self.wait_seconds = 0.0       # how long the training waited for them
        self._pending = None
        self._pool = None

    @property
    def lr_scale(self) -> float:   # (the gradients are summed over the global minibatch)
        return 1.0

    def local_minibatch(self, n: int) -> int:
        parts = self.size * (2 if self.double_buffering else 1)
        if n < parts:
            raise PynnetError(f"--minibatch-size {n} is smaller than the {parts} parts it is split into "
                              f"({self.size} workers" + (" x 2 halves)" if self.double_buffering else ")"))
        return n // parts

    def setup(self, model: Dnn, opt: Optimizer) -> None:
        super().setup(model, opt)
        if opt.name not in ("adagrad", "sgd"):
            raise PynnetError(f"--sync 1bit updates with AdaGrad (Seide et al.) or SGD on the aggregated gradient: "
                              f"use --optimizer adagrad or sgd, not {opt.name}")
        self.rule = opt.name
        affs = model.affines
        K, me = self.size, self.rank
        w = affs[0].wb
        dev = w.device
        self.stripes = [column_stripes(a.in_dim + 1, K) for a in affs]
        # gradient buffers (two with double buffering: one trains while the other is exchanged)
        n = sum(a.out_dim * (a.in_dim + 1) for a in affs)
        self.grads = [torch.zeros(n, dtype=w.dtype, device=dev) for _ in range(2 if self.double_buffering else 1)]
        self._views = [self._layer_views(g) for g in self.grads]
        self._use(0)
        # the first quantization: every stripe of every matrix, with this rank's residuals
        self.q1 = [[ErrorFeedbackQuantizer(a.out_dim, c1 - c0, self.error_feedback, dev) for c0, c1 in st]
                   for a, st in zip(affs, self.stripes)]   # (also the decoders of rank j's stripes)
        # the owner's: the update of its stripes, with the second residuals; the rule's state
        self.q2 = [ErrorFeedbackQuantizer(a.out_dim, st[me][1] - st[me][0], self.error_feedback, dev)
                   for a, st in zip(affs, self.stripes)]
        self.sum_sq = [torch.zeros(a.out_dim, st[me][1] - st[me][0], device=dev) for a, st in zip(affs, self.stripes)]
        self.velocity = [torch.zeros_like(t) for t in self.sum_sq] if self.momentum else None
        self.agg = [torch.zeros_like(t) for t in self.sum_sq]
        self.scratch = [torch.zeros_like(t) for t in self.sum_sq]
        # alltoall blocks: to rank j its stripes of every matrix; allgather blocks: an owner's
        # updates; each led by an 8-byte failure flag, padded to the largest rank's
        self.send_off = [np.cumsum([8] + [q[j].nbytes for q in self.q1]).tolist() for j in range(K)]
        block = max(o[-1] for o in self.send_off)
        self.send = torch.zeros(K, block, dtype=torch.uint8, device=dev)
        self.upd = torch.zeros(block, dtype=torch.uint8, device=dev)   # (an update stripe: a gradient stripe's size)

    def _layer_views(self, flat: torch.Tensor) -> list[torch.Tensor]:
        views, o = [], 0
        for a in self.model.affines:
            k = a.out_dim * (a.in_dim + 1)
            views.append(flat[o:o + k].view(a.out_dim, a.in_dim + 1))
            o += k
        return views

    def _use(self, i: int) -> None:
        """The optimizer's gradient hooks write into gradient buffer ``i``."""
        self.current = i
        for a, v in zip(self.model.affines, self._views[i]):
            a.grad = v

    # ------------------------------------------------------------ one exchange
    @torch.no_grad()
    def _exchange(self, buf: int, lr: float, step: int, failure: str | None):
        """Gradient buffer ``buf`` -> every owner's quantized update (the allgathered rows), and
        the number of ranks that failed."""
        t0 = time.perf_counter()
        K, me = self.size, self.rank
        views = self._views[buf]
        if failure:
            for g in views:
                g.zero_()
        for j in range(K):
            off = self.send_off[j]
            self.send[j, :8] = _flag_bytes(1.0 if failure else 0.0)
            for i, (g, (c0, c1)) in enumerate(zip(views, (st[j] for st in self.stripes))):
                self.q1[i][j].encode(g[:, c0:c1], self.send[j, off[i]:off[i + 1]])
        recv = self.comm.alltoall(self.send, f"the 1-bit gradient exchange of update {step + 1}")
        bad = sum(_flag(recv[r, :8]) for r in range(K))   # (every owner: the count of failed ranks)
        off = self.send_off[me]
        self.upd[:8] = _flag_bytes(bad)
        if not bad:
            for i, agg in enumerate(self.agg):
                agg.zero_()
                q = self.q1[i][me]
                for r in range(K):   # (rank order: every owner sums alike)
                    q.decode_add(recv[r, off[i]:off[i + 1]], agg)
                self.q2[i].encode(self._rule(i, agg, lr), self.upd[off[i]:off[i + 1]])
        rows = self.comm.allgather(self.upd, f"the 1-bit update exchange of update {step + 1}")
        self.exchange_seconds += time.perf_counter() - t0
        return rows, max(_flag(rows[r, :8]) for r in range(K))

    def _rule(self, i: int, agg: torch.Tensor, lr: float) -> torch.Tensor:
        """The change of the owner's stripe of matrix i from its aggregated gradient (in ``agg``)."""
        if self.rule == "adagrad":
            d = adagrad_delta(agg, self.sum_sq[i], lr, self.scratch[i])
            if self.momentum:
                d = self.velocity[i].mul_(self.momentum).add_(d, alpha=1.0 - self.momentum)
            return d
        d = agg.mul_(-lr)   # SGD: v = m v - lr g (Sgd's rule)
        if self.momentum:
            d = self.velocity[i].mul_(self.momentum).add_(d)
        return d

    @torch.no_grad()
    def _apply(self, result, step: int) -> str | None:
        rows, bad = result
        if bad:
            return self._failure(bad, step)
        for i, a in enumerate(self.model.affines):
            for j, (c0, c1) in enumerate(self.stripes[i]):
                off = self.send_off[j]
                self.q1[i][j].decode_add(rows[j, off[i]:off[i + 1]], a.wb[:, c0:c1])
        return None

    def _wait(self, step: int) -> str | None:
        if self._pending is None:
            return None
        t0 = time.perf_counter()
        fut, self._pending = self._pending, None
        result = fut.result()
        self.wait_seconds += time.perf_counter() - t0
        return self._apply(result, step)

    # ------------------------------------------------------------ the trainer's hooks
    def before_update(self, step: int, model: Dnn, optimizer: Optimizer, lr: float = 0.0) -> str | None:
        failure = self.local_failure
        if not self.double_buffering:
            t0 = time.perf_counter()
            result = self._exchange(0, lr, step, failure)
            self.wait_seconds += time.perf_counter() - t0
            return self._apply(result, step + 1)
        # the previous half's update first (its exchange ran while this half was computed)
        bad = self._wait(step)
        if bad:
            return bad
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor
            # (one OpenMP thread: a team of the training's size would stall its GEMMs; docs/notes/nnet.md)
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="pynnet-1bit", initializer=torch.set_num_threads,
                                            initargs=(1,))
        buf = self.current
        self._use(1 - buf)
        self._pending = self._pool.submit(self._exchange, buf, lr, step, failure)
        return None

    def flush(self, step: int) -> str | None:
        """The exchange in flight, finished and applied (before a checkpoint, at an epoch's end)."""
        return self._wait(step)

    def end_epoch(self, step: int) -> str | None:
        failed = self.flush(step)
        if self.is_writer and not failed:
            ex, wait = self.exchange_seconds - self._logged[0], self.wait_seconds - self._logged[1]
            self._logged = (self.exchange_seconds, self.wait_seconds)
            if self.double_buffering:
                log(f"1-bit exchange: {ex:.1f} s in the epoch's exchanges, {wait:.1f} s waited for "
                    f"({max(0.0, 1.0 - wait / ex) if ex > 0 else 0.0:.0%} hidden by double buffering)")
            else:
                log(f"1-bit exchange: {ex:.1f} s in the epoch's exchanges (no double buffering)")
        return failed

    _logged = (0.0, 0.0)

    def state_dict(self) -> dict:
        return {"residuals": [[q.residual.cpu().clone() for q in qs] for qs in self.q1],
                "residuals2": [q.residual.cpu().clone() for q in self.q2],
                "sum_sq": [t.cpu().clone() for t in self.sum_sq],
                "velocity": None if self.velocity is None else [t.cpu().clone() for t in self.velocity]}

    def load_state_dict(self, s: dict) -> None:
        if self._pending is not None:   # (a restart: what was in flight belongs to the abandoned path)
            self._pending.result()
            self._pending = None
        self._use(0)
        if not s:
            return
        for qs, rs in zip(self.q1, s["residuals"]):
            for q, r in zip(qs, rs):
                q.residual.copy_(r)
        for q, r in zip(self.q2, s["residuals2"]):
            q.residual.copy_(r)
        for t, r in zip(self.sum_sq, s["sum_sq"]):
            t.copy_(r)
        if self.velocity is not None:
            for t, r in zip(self.velocity, s["velocity"]):
                t.copy_(r)


def make_sync(cfg, comm: Communicator) -> ParallelSync:
    """The synchronizer of ``cfg.sync`` (a TrainConfig) over ``comm``."""
    mode = cfg.sync
    auto = (cfg.calibration, cfg.comm_share, cfg.minibatch_size) if cfg.average_every == 0 else None
    if mode == "average":
        return AverageSync(comm, cfg.average_every, cfg.lr_scaling, auto)
    if mode == "allreduce":
        return AllreduceSync(comm, cfg.lr_scaling)
    if mode == "average-1bit":
        return OneBitAverageSync(comm, cfg.average_every, cfg.lr_scaling, cfg.error_feedback, auto)
    if mode == "1bit":
        return OneBitSgdSync(comm, cfg.double_buffering, cfg.error_feedback, cfg.momentum)
    raise PynnetError(f"--sync must be one of {', '.join(SYNC_MODES)}, not '{mode}'")


def _flag_bytes(count: float) -> torch.Tensor:
    """A count of failed ranks as the 8 bytes of a float64 at the head of a byte payload."""
    return torch.tensor([float(count)], dtype=torch.float64).view(torch.uint8)


def _flag(b: torch.Tensor) -> float:
    return float(b.clone().view(torch.float64)[0])


def _short(v) -> str:
    s = repr(v)
    return s if len(s) <= 60 else s[:57] + "..."
