"""DNN cross-entropy training: minibatch loop, newbob / exponential learning rates, CV rejection,
checkpoints with exact resume, NaN recovery, JSON log and PNG curve.

Exact resume: the checkpoint holds the model, the optimizer (incl. NG-SGD preconditioner state),
the schedule, the epoch's running sums and the position (epoch, chunk, minibatch). The data order
is a pure function of (seed, epoch, chunk), so rerunning the same command after ``kill -9``
continues from the last checkpoint and produces bit-identical results.

Parallel training plugs in through ``Synchronizer``: ``before_update`` sees each minibatch's
gradient buffers, ``after_update`` runs after each local step (model averaging every K steps),
``lr_scale`` scales the learning rate (with the number of workers), ``reduce`` sums statistics.
"""
from __future__ import annotations

import copy
import hashlib
import json
import math
import os
import time
from dataclasses import asdict, dataclass

import numpy as np
import torch
import torch.nn.functional as F

from pynnet.io.atomic import atomic_path, atomic_write
from pynnet.io.errors import fail
from pynnet.io.progress import progress_kwargs
from pynnet.nnet.data import ChunkLoader, FrameSet, log, plan_chunks
from pynnet.nnet.model import Dnn, FeatureTransform, model_from_dict, save_atomic, save_model
from pynnet.nnet.optim import Optimizer, make_optimizer


@dataclass
class TrainConfig:
    optimizer: str = "ngsgd"          # ngsgd | sgd | adagrad
    learn_rate: float = 0.008         # per frame (gradients are sums over the minibatch)
    momentum: float = 0.0             # sgd only
    minibatch_size: int = 256
    schedule: str = "newbob"          # newbob | exponential
    max_epochs: int = 20              # newbob
    start_halving_impr: float = 0.01
    end_halving_impr: float = 0.001
    halving_factor: float = 0.5
    num_epochs: int = 4               # exponential: epochs of decay from learn_rate ...
    final_learn_rate: float = 0.0008  # ... to this rate,
    num_epochs_extra: int = 1         # then epochs at it (nnet2 train_pnorm_fast.sh: 15 + 5)
    buffer_frames: int = 32768
    checkpoint_every: int = 1000      # minibatches
    seed: int = 777
    device: str = "cpu"
    # data-parallel training (pynnet.parallel; one worker: ignored)
    num_workers: int = 1
    sync: str = "average"             # average | allreduce | average-1bit
    average_every: int = 10           # minibatches between averages (0: auto, from the calibration)
    comm_share: float = 0.05          # --average-every auto: the averages' target share of the step time
    calibration: str = ""             # --average-every auto: pynnet-parallel-model --calibrate's file
    lr_scaling: str = "linear"        # the learning rate times K | sqrt(K) | 1
    model_parallel: int = 1           # ranks that split every layer between them (K / this: data parallel)
    elastic: bool = False             # averaging goes on without a rank that was lost (pynnet.parallel.elastic)
    # --minibatch-size auto (CNTK's AutoAdjust; --minibatch-size is then the smallest size)
    auto_minibatch: bool = False
    auto_minibatch_every_hours: float = 24.0   # of training data between searches (Seide: 24 h)
    auto_minibatch_trial_hours: float = 0.75   # the slice each trial size trains (Seide: 45 min)
    auto_minibatch_margin: float = 1.0         # % frame accuracy a larger size may lose
    double_buffering: bool = False    # 1bit: exchange one half-minibatch while computing the next
    error_feedback: bool = True       # 1bit, average-1bit: carry the quantization error forward


# options that may differ between a run and its resumption
_RESUMABLE_CHANGES = {"device", "checkpoint_every"}
MAX_NAN_RESTARTS = 10
FRAMES_PER_HOUR = 360000   # 10 ms frames
_CHECKPOINT_KEYS = ("cfg", "state", "model", "opt", "arch", "input_pipeline")


class WorkersLost(Exception):
    """Raised by an elastic synchronizer's communicator when ranks of the job were lost and the
    others have formed a smaller group (pynnet.parallel.elastic): the training is then rerun in
    the same processes and resumes from the last checkpoint. ``ranks``: the job ranks lost."""

    def __init__(self, ranks: list[int], what: str):
        super().__init__(f"lost rank(s) {ranks} in {what}")
        self.ranks, self.what = list(ranks), what
        self.epoch = self.update = None   # (the trainer's position when it happened)


class Synchronizer:
    """Hook between minibatches; the single-worker implementation does nothing (pynnet.parallel
    has the data-parallel ones). ``needs_gradients``: True makes the optimizer keep each
    minibatch's gradient in ``layer.grad`` for ``before_update`` (otherwise SGD/NG-SGD apply their
    update inside backward). ``before_update``/``after_update``/``end_epoch`` return a message
    when some rank failed (``local_failure``: this rank's non-finite loss, set by the trainer):
    every rank then goes back to the last checkpoint together."""
    lr_scale = 1.0
    needs_gradients = False
    owns_update = False   # True: the synchronizer applies the update (1-bit SGD), not the optimizer
    rank, size, is_writer = 0, 1, True
    local_failure: str | None = None
    members: list[int] | None = None   # elastic: the job ranks still in the job (checkpoints record them)

    def setup(self, model: Dnn, optimizer: Optimizer) -> None:
        """Called once the model and optimizer exist (before any checkpoint is restored)."""

    def before_update(self, step: int, model: Dnn, optimizer: Optimizer, lr: float = 0.0) -> str | None:
        pass

    def after_update(self, step: int, model: Dnn, optimizer: Optimizer) -> str | None:
        pass

    def end_epoch(self, step: int) -> str | None:
        """After an epoch's last update (model averaging: the last average)."""

    def flush(self, step: int) -> str | None:
        """Before a checkpoint: finish what is in flight (1-bit SGD's double buffering)."""

    def local_minibatch(self, n: int) -> int:
        """This rank's frames per update for ``--minibatch-size n`` (1-bit SGD: n is global)."""
        return n

    def reduce(self, stats: dict[str, float]) -> dict[str, float]:
        return stats

    def data_seed(self, seed: int) -> int:
        """The seed of this rank's data order."""
        return seed

    def shard(self, tr: FrameSet, cv: FrameSet, fingerprint: dict, model: Dnn) -> tuple[FrameSet, FrameSet]:
        """This rank's parts of the training and CV sets (one worker: all of them)."""
        return tr, cv

    def epoch_steps(self, planned: int) -> int | None:
        """Minibatches of the epoch when every rank must run the same number (None: all there are)."""
        return None

    def checkpoint_due(self, step: int, every: int) -> bool:
        return step % every == 0

    def gather(self, obj) -> list | None:
        """Every rank's ``obj`` on the writer (rank 0), None elsewhere."""
        return [obj]

    def note_checkpoint(self, text: str) -> None:
        """Where the last checkpoint is (for the message when a rank dies)."""

    def check_replicas(self) -> None:
        pass

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, s: dict) -> None:
        pass

    # the model as this rank holds it (model parallelism: a slice of every layer)
    @property
    def data_size(self) -> int:
        """How many ranks train on different data (model parallelism: fewer than ``size``)."""
        return self.size

    def local_model(self, model: Dnn) -> Dnn:
        """The part of the (whole) model this rank trains."""
        return model

    def make_optimizer(self, name: str, model: Dnn, momentum: float) -> Optimizer:
        return make_optimizer(name, model, momentum)

    def model_state(self, model: Dnn) -> dict | None:
        """The whole model's state dict on the writer (None elsewhere), for checkpoints."""
        if not self.is_writer:
            return None
        return {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}

    def load_model(self, model: Dnn, state: dict) -> None:
        """Load a whole model's state dict (a checkpoint's) into this rank's model."""
        model.load_state_dict(state)

    def nonfinite(self, names: list[str]) -> list[str]:
        """The parameters that are not finite on any rank (every rank decides alike)."""
        return names

    # elastic averaging (pynnet.parallel.elastic): a job that goes on after losing ranks
    def checkpoint_entry(self, members: list[int] | None, written_by: int, path: str) -> int:
        """Which of a checkpoint's per-rank states (``ranks``) is this rank's; ``members``: the
        job ranks that wrote it (elastic checkpoints)."""
        if written_by != self.size:
            fail(f"checkpoint was written by {written_by} workers, this run has {self.size}; "
                 "remove it to start over", path)
        return self.rank

    def epoch_data(self, st: dict, seed: int) -> tuple[FrameSet, int] | None:
        """At the start of (or on resuming into) an epoch: this rank's training shard and data
        seed for it, when they are not the ones the trainer has (None: keep them)."""
        return None

    def lost_events(self) -> list[dict]:
        """The losses of ranks so far in this process (epoch, update, ranks, ...)."""
        return []

    def resumed(self, obj: dict, st: dict) -> None:
        """After a checkpoint ``obj`` was restored into ``st`` (elastic: take over the remaining
        utterances of ranks that wrote it and are gone)."""

    def extra_chunks(self, st: dict) -> list[list[str]]:
        """Chunks this rank trains after its own shard's in the epoch of ``st`` (elastic: the
        utterances it took over from lost ranks)."""
        return []


def exponential_lr(initial: float, final: float, epochs_done: float, num_epochs: int) -> float:
    """nnet2 train_pnorm_fast.sh: lr = i * exp(x * ln(f/i) / n) after x of the n epochs of decay,
    f from then on. ``epochs_done`` counts the frames already trained in epochs (fractional): nnet2
    steps the rate once per iteration (samples_per_iter frames per job), we per minibatch."""
    if epochs_done >= num_epochs:
        return final
    return initial * math.exp(epochs_done * math.log(final / initial) / num_epochs)


class _Restart(Exception):
    """A non-finite loss or parameter: go back to the last checkpoint (raised out of the epoch loop)."""


def read_checkpoint(path: str, keys: tuple[str, ...] = _CHECKPOINT_KEYS,
                    hint: str = "delete it to start over") -> dict:
    """torch.load of a training state file; unreadable or truncated -> one-line error."""
    try:
        obj = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as e:  # noqa: BLE001 - any unreadable file is a user error here
        first = (str(e).strip().splitlines() or [""])[0]
        fail(f"cannot read it ({type(e).__name__}: {first}); {hint}", path)
    missing = [k for k in keys if not isinstance(obj, dict) or k not in obj]
    if missing:
        fail(f"not a pynnet training state (no {', '.join(missing)}); {hint}", path)
    return obj


def data_fingerprint(tr: FrameSet, cv: FrameSet, cv_percent: float | None) -> dict:
    """What a run trains on, stored in its checkpoint: resuming on another split or other
    alignments would silently mix two trainings."""
    def utts_sha1(utts: list[str]) -> str:
        return hashlib.sha1("\n".join(utts).encode()).hexdigest()

    h = hashlib.sha1()
    # sorted: another split alone is reported as such, not as other targets
    for u, targets in sorted([(u, tr.targets) for u in tr.utts] + [(u, cv.targets) for u in cv.utts],
                             key=lambda x: x[0].encode()):
        t = np.ascontiguousarray(targets[u], dtype=np.int32)   # int16 or int32 by num_pdfs
        h.update(np.int64(len(t)).tobytes())
        h.update(t.tobytes())
    return {"cv_percent": cv_percent, "num_train_utts": len(tr.utts), "train_utts_sha1": utts_sha1(tr.utts),
            "num_cv_utts": len(cv.utts), "cv_utts_sha1": utts_sha1(cv.utts), "targets_sha1": h.hexdigest()}


def init_fingerprint(dbn: dict | None, feature_transform: "FeatureTransform | None" = None) -> str:
    """What a run's model starts from (kept with its checkpoint and nnet.init): a rerun with
    another --dbn (or --feature-transform), or without one, must not resume it."""
    if dbn is None and feature_transform is None:
        return "random initialisation"
    h = hashlib.sha1()
    if dbn is None:
        for t in (feature_transform.shift, feature_transform.scale):
            h.update(t.detach().cpu().contiguous().numpy().tobytes())
        return f"random initialisation with the feature transform sha1 {h.hexdigest()[:12]}"
    for part in [*dbn["layers"], dbn["transform"]]:
        for k in sorted(part):
            if isinstance(part[k], torch.Tensor):
                h.update(k.encode())
                h.update(part[k].detach().cpu().contiguous().numpy().tobytes())
    return f"the DBN with weights sha1 {h.hexdigest()[:12]}"


def check_same_init(have: str | None, want: str, dbn_path: str | None, path: str) -> None:
    if have is not None and have != want:   # (files from before the field: not checked)
        fail(f"was started from {have}, not from {want} (--dbn {dbn_path or 'not given'}); "
             "remove the exp dir to start over", path)


def check_same_data(obj: dict, data: dict, path: str) -> None:
    """Refuse to resume a checkpoint on other data. Checkpoints from before these fields: accepted."""
    old = obj.get("data") or {}

    def known(k: str) -> bool:
        return old.get(k) is not None and data.get(k) is not None

    diff = []
    if known("cv_percent") and float(old["cv_percent"]) != float(data["cv_percent"]):
        diff.append(f"--cv-percent {old['cv_percent']} now {data['cv_percent']}")
    for name, what in (("train", "training"), ("cv", "CV")):
        if known(f"{name}_utts_sha1") and old[f"{name}_utts_sha1"] != data[f"{name}_utts_sha1"]:
            diff.append(f"the {what} utterance list differs ({old.get(f'num_{name}_utts')} utterances then, "
                        f"{data.get(f'num_{name}_utts')} now)")
    if known("targets_sha1") and old["targets_sha1"] != data["targets_sha1"]:
        diff.append("the alignment targets differ")
    if diff:
        fail("checkpoint was written for other data (" + "; ".join(diff) + "); remove it to start over", path)


class Trainer:
    def __init__(self, exp_dir: str, model: Dnn, tr: FrameSet, cv: FrameSet, cfg: TrainConfig,
                 sync: Synchronizer | None = None, progress: bool = True, data_id: dict | None = None,
                 checkpoint: dict | None = None):
        """``checkpoint``: checkpoint.pt already read by the caller (resume without reading it again)."""
        self.dir, self.cfg, self.tr, self.cv = exp_dir, cfg, tr, cv
        self._resume_from = checkpoint
        self.data_id = data_id if data_id is not None else data_fingerprint(tr, cv, None)
        self.sync = sync or Synchronizer()
        self.progress = progress
        self.device = torch.device(cfg.device)
        self.model = self.sync.local_model(model).to(self.device)
        # (a synchronizer that owns the update keeps the momentum itself)
        self.opt = self.sync.make_optimizer(cfg.optimizer, self.model, 0.0 if self.sync.owns_update else cfg.momentum)
        self.sync.setup(self.model, self.opt)
        self.data_seed = self.sync.data_seed(cfg.seed)
        self.ckpt_path = os.path.join(exp_dir, "checkpoint.pt")
        self.best_path = os.path.join(exp_dir, "nnet", "best.pt")
        self.st: dict = {}
        # the loader threads transform features on the CPU, whatever the training device
        self.cpu_transform = copy.deepcopy(self.model.transform).cpu()

    # ------------------------------------------------------------ state
    def _snapshot(self) -> dict:
        # (K workers: only rank 0 writes the model; the others' copy would be thrown away)
        return {"model": self.sync.model_state(self.model), "opt": self.opt.state_dict()}

    def _restore(self, snap: dict) -> None:
        """A snapshot's model; the optimizer (and synchronizer) state: this rank's."""
        self.sync.load_model(self.model, snap["model"])
        part = snap["ranks"][self._entry(snap)] if "ranks" in snap else snap
        self.opt.load_state_dict(part["opt"])
        self.sync.load_state_dict(part.get("sync") or {})

    def _save_snapshot(self, obj: dict, path: str) -> None:
        """Rank 0 writes ``obj`` (model, opt, ...) with every rank's optimizer and synchronizer
        state (one worker: the file as it always was)."""
        local = {"opt": obj["opt"], "sync": self.sync.state_dict(), "state": obj.get("state")}
        parts = self.sync.gather(local)
        if parts is None:
            return
        if self.sync.size > 1:
            obj["ranks"] = parts
            if self.sync.members is not None:
                obj["members"] = list(self.sync.members)
        save_atomic(obj, path)

    def _entry(self, obj: dict, path: str = "") -> int:
        """Which of ``obj``'s per-rank states is this rank's."""
        ranks = obj.get("ranks")
        if ranks and obj.get("members") and (ranks[0].get("state") or {}).get("done") and len(ranks) != self.sync.size:
            return 0   # (a finished elastic training that had lost ranks: nothing to resume)
        return self.sync.checkpoint_entry(obj.get("members"), len(ranks) if ranks else 1, path or self.ckpt_path)

    def _nonfinite_params(self) -> list[str]:
        with torch.no_grad():
            return self.sync.nonfinite([k for k, v in self.model.named_parameters()
                                        if not bool(torch.isfinite(v).all())])

    def check_finite(self, where: str) -> None:
        """A checkpoint or best model must never hold inf/NaN (a finite loss does not prove that:
        an inf bias into a sigmoid still gives finite outputs)."""
        bad = self._nonfinite_params()
        if bad:
            raise _Restart(f"non-finite parameters ({', '.join(bad)}) at {where}")

    def save_checkpoint(self) -> None:
        st = self.st
        self.check_finite(f"epoch {st['epoch']} chunk {st['chunk']} minibatch {st['batch']} (checkpoint not written)")
        obj = {"cfg": asdict(self.cfg), "state": self.st, **self._snapshot(),
               "arch": self.model.arch, "input_pipeline": self.model.input_pipeline,
               "threads": torch.get_num_threads(), "device": device_name(self.device), "data": self.data_id}
        self._save_snapshot(obj, self.ckpt_path)
        self._note_checkpoint(written=True)

    def _note_checkpoint(self, written: bool) -> None:
        """K workers: where a rerun would resume, for the message when a rank dies or hangs (in
        memory for the ranks, in log/last_checkpoint for the launcher)."""
        if self.sync.size == 1:
            return
        where = f"{self.ckpt_path} (epoch {self.st['epoch']}, update {self.st['step']})"
        if written and self.sync.is_writer:
            with atomic_write(os.path.join(self.dir, "log", "last_checkpoint")) as f:
                f.write(where + "\n")
        self.sync.note_checkpoint(f"the last checkpoint is {where}: rerun the same command to resume from it")

    def load_checkpoint(self, obj: dict | None = None) -> bool:
        """Restore checkpoint.pt (``obj``: its contents, already read)."""
        if obj is None:
            if not os.path.exists(self.ckpt_path):
                return False
            obj = read_checkpoint(self.ckpt_path)
        check_same_data(obj, self.data_id, self.ckpt_path)
        old = obj["cfg"]
        defaults = asdict(TrainConfig())   # (options newer than the checkpoint: their defaults)
        diff = [k for k, v in asdict(self.cfg).items()
                if k not in _RESUMABLE_CHANGES and old.get(k, defaults[k]) != v]
        if diff:
            fail("checkpoint was written with other options (" +
                 ", ".join(f"{k}: {old.get(k)} now {getattr(self.cfg, k)}" for k in diff) +
                 "); remove it to start over", self.ckpt_path)
        threads, here = torch.get_num_threads(), device_name(self.device)
        # GEMMs on another device (GPU model, CUDA version) or split over another number of CPU
        # threads round differently
        if obj.get("device", here) != here:
            log(f"WARNING: {self.ckpt_path} was written on {obj['device']}, resuming on {here}: "
                "training continues, but not bit-identical to an uninterrupted run")
        elif obj.get("threads", threads) != threads and self.device.type == "cpu":
            log(f"WARNING: {self.ckpt_path} was written with {obj['threads']} torch threads, resuming with "
                f"{threads}: training continues, but not bit-identical to an uninterrupted run")
        ranks = obj.get("ranks")
        entry = self._entry(obj)
        self._restore(obj)
        self.st = ranks[entry]["state"] if ranks else obj["state"]
        self.sync.local_failure = None
        known = self.st.setdefault("lost", []) if self.sync.members is not None else []
        known += [e for e in self.sync.lost_events() if e not in known]
        self.sync.resumed(obj, self.st)
        self._note_checkpoint(written=False)
        return True

    # ------------------------------------------------------------ evaluation
    @torch.no_grad()
    def evaluate(self, fs: FrameSet) -> tuple[float, float]:
        """Mean cross-entropy and frame accuracy over a FrameSet."""
        self.model.eval()
        loss_sum, correct, n = 0.0, 0, 0
        chunks = plan_chunks(fs, 0, self.cfg.seed, self.cfg.buffer_frames, shuffle=False)
        loader = ChunkLoader(fs, chunks, self.cpu_transform, 0, None)
        try:
            for ch in loader:
                x, y = ch.x.to(self.device), ch.y.to(self.device)
                for i in range(0, len(y), 4096):
                    out = self.model(x[i:i + 4096])
                    loss_sum += float(F.cross_entropy(out, y[i:i + 4096], reduction="sum"))
                    correct += int((out.argmax(1) == y[i:i + 4096]).sum())
                n += len(y)
        finally:
            loader.close()
        s = self.sync.reduce({"loss": loss_sum, "correct": correct, "frames": n})
        if s["frames"] == 0:
            fail("the CV set has no usable frames (every CV utterance was skipped: the warnings above)")
        return s["loss"] / s["frames"], s["correct"] / s["frames"]

    # ------------------------------------------------------------ one epoch (from a position)
    def run_epoch(self) -> None:
        st, cfg = self.st, self.cfg
        epoch = st["epoch"]
        shard = self.sync.epoch_data(st, cfg.seed)
        if shard is not None:
            self.tr, self.data_seed = shard
        chunks = plan_chunks(self.tr, epoch, self.data_seed, cfg.buffer_frames) + self.sync.extra_chunks(st)
        # K workers: every rank runs the same number of minibatches (the smallest shard's); a rank
        # that comes out short (utterances skipped while loading) goes round its shard again
        mb = self.sync.local_minibatch(self._minibatch())
        total = self.sync.epoch_steps(self._planned_steps(chunks, mb))
        if total is not None:
            st["epoch_steps_total"] = total
            chunks = chunks + chunks
        exponential = cfg.schedule == "exponential"
        from tqdm import tqdm

        bar = tqdm(total=self.tr.num_frames, initial=st["acc"]["frames"], unit="fr", unit_scale=True,
                   desc=f"epoch {epoch} lr {st['lr']:.3g}", **progress_kwargs(self.progress))
        loader = ChunkLoader(self.tr, chunks, self.cpu_transform, st["chunk"], [self.data_seed, epoch, 2])
        self.model.train()
        t0 = time.time()
        try:
            for ch in loader:
                if total is not None and st.get("epoch_step", 0) >= total:
                    break
                x, y = ch.x.to(self.device), ch.y.to(self.device)
                order = ch.order.to(self.device)
                # (the position in frames: a size chosen automatically takes effect mid-chunk)
                pos = st.get("pos", st["batch"] * mb)
                while pos < len(y):
                    if total is not None and st.get("epoch_step", 0) >= total:
                        break
                    if self._tuning_due():   # (the same update on every rank; its time counts)
                        mb = self.sync.local_minibatch(self._tune_minibatch(chunks, ch, x, y, order, pos, epoch))
                        if total is not None:   # (the rest of the epoch in minibatches of the new size)
                            left = -(-(len(y) - pos) // mb) + self._planned_steps(chunks[ch.index + 1:], mb)
                            total = st["epoch_steps_total"] = st.get("epoch_step", 0) + self.sync.epoch_steps(left)
                        continue
                    if exponential:
                        st["lr"] = self._exponential_lr()
                    idx = order[pos:pos + mb]
                    xb, yb = x[idx], y[idx]
                    lv, correct = self._update(xb, yb, st["lr"] * self.sync.lr_scale,
                                               f"epoch {epoch} chunk {ch.index} minibatch {st['batch']}")
                    a = st["acc"]
                    if not self.sync.local_failure:
                        a["loss"] += lv
                        a["correct"] += correct
                        a["frames"] += len(yb)
                    pos += len(yb)
                    st["batch"], st["pos"] = st["batch"] + 1, pos
                    bar.update(len(yb))
                    if self.sync.checkpoint_due(st["step"], cfg.checkpoint_every):
                        failed = self.sync.flush(st["step"])
                        if failed:
                            raise _Restart(failed)
                        a["seconds"] += time.time() - t0
                        t0 = time.time()
                        self.save_checkpoint()
                if pos >= len(y):
                    st["chunk"], st["batch"], st["pos"] = ch.index + 1, 0, 0
            if total is not None and st.get("epoch_step", 0) < total:
                fail(f"rank {self.sync.rank} ran out of usable training frames in epoch {epoch} "
                     f"({st.get('epoch_step', 0)} of {total} minibatches: too many utterances skipped, "
                     "the warnings above)", self.tr.reader.feats_scp)
            failed = self.sync.end_epoch(st["step"])
            if failed:
                raise _Restart(failed)
        finally:
            loader.close()
            bar.close()
            st["acc"]["seconds"] += time.time() - t0

    def _planned_steps(self, chunks: list[list[str]], mb: int) -> int:
        """Minibatches of ``mb`` frames in ``chunks`` (from the alignment lengths)."""
        return sum(-(-sum(self.tr.frames[u] for u in c) // mb) for c in chunks)

    def _update(self, xb: torch.Tensor, yb: torch.Tensor, lr: float, where: str) -> tuple[float, int]:
        """One minibatch: forward, backward, the synchronizer's hooks, the update. Returns the
        loss (a sum) and the frames classified right."""
        st = self.st
        self.opt.fused_lr = None if self.sync.needs_gradients else lr
        out = self.model(xb)
        loss = F.cross_entropy(out, yb, reduction="sum")
        lv = float(loss.detach())
        if not math.isfinite(lv):
            what = f"non-finite loss at {where}"
            if self.sync.size == 1:
                raise _Restart(what)
            # K workers: this rank stops updating and tells the others at the next
            # synchronisation; then every rank restores the same checkpoint
            self.sync.local_failure = self.sync.local_failure or what
        if not self.sync.local_failure:
            loss.backward()
        failed = self.sync.before_update(st["step"], self.model, self.opt, lr)
        if failed:
            raise _Restart(failed)
        if not self.sync.local_failure and not self.sync.owns_update:
            self.opt.step(lr)
        st["step"] += 1
        st["epoch_step"] = st.get("epoch_step", 0) + 1
        failed = self.sync.after_update(st["step"], self.model, self.opt)
        if failed:
            raise _Restart(failed)
        return lv, int((out.detach().argmax(1) == yb).sum())

    # ------------------------------------------------------------ automatic minibatch size
    def _minibatch(self) -> int:
        """The (global) minibatch size in use: --minibatch-size, or the last automatic choice."""
        return self.st.get("minibatch", self.cfg.minibatch_size)

    def _tuning_due(self) -> bool:
        """Every --auto-minibatch-every-hours of data, counted in updates (the same on every rank)."""
        if not self.cfg.auto_minibatch:
            return False
        due = self.st.get("next_tuning_step")
        return due is None or self.st["step"] >= due

    def _tune_minibatch(self, chunks: list[list[str]], ch, x: torch.Tensor, y: torch.Tensor, order: torch.Tensor,
                        pos: int, epoch: int) -> int:
        """CNTK's AutoAdjust (Seide et al. 2014): train the next --auto-minibatch-trial-hours of
        data with sizes from max(--minibatch-size, prev/2) up by x sqrt(2) (multiples of 64) to
        2 x prev, reloading the model, optimizer and synchronizer state before each; stop at the
        first whose frame accuracy falls below the first's x (1 - margin %); keep the last good.
        The decision is a function of the state and the data, so a resumed run repeats it."""
        from pynnet.nnet.data import load_chunk

        st, cfg = self.st, self.cfg
        prev = self._minibatch()
        lo, hi = max(cfg.minibatch_size, prev / 2), 2 * prev
        sizes, t = [], lo
        while t <= hi * (1 + 1e-9):
            n = max(64, 64 * int((t + 32) // 64))
            if n not in sizes:
                sizes.append(n)
            t *= math.sqrt(2.0)
        # the trial slice: this rank's next frames, as the epoch will see them
        want = int(cfg.auto_minibatch_trial_hours * FRAMES_PER_HOUR / self.sync.data_size)
        idx = order[pos:pos + want]
        xs, ys, have = [x[idx]], [y[idx]], len(idx)
        for k in range(ch.index + 1, len(chunks)):
            if have >= want:
                break
            nxt = load_chunk(self.tr, chunks[k], self.cpu_transform, k, [self.data_seed, epoch, 2])
            take = nxt.order[:want - have]
            xs.append(nxt.x[take].to(self.device))
            ys.append(nxt.y[take].to(self.device))
            have += len(take)
        failed = self.sync.flush(st["step"])   # (nothing in flight into the trials)
        if failed:
            raise _Restart(failed)
        x, y = torch.cat(xs), torch.cat(ys)
        saved = copy.deepcopy({"model": self.model.state_dict(), "opt": self.opt.state_dict(),
                               "sync": self.sync.state_dict(), "st": st})
        trials, base, chosen = [], None, prev
        lr = st["lr"] * self.sync.lr_scale
        for n in sizes:
            local = self.sync.local_minibatch(n)
            steps = len(y) // local
            steps = self.sync.epoch_steps(steps) if self.sync.size > 1 else steps
            correct = frames = 0
            for i in range(0, steps * local, local):
                _, c = self._update(x[i:i + local], y[i:i + local], lr, f"the minibatch-size trial {n}")
                correct, frames = correct + c, frames + local
            failed = self.sync.flush(st["step"])
            if failed:
                raise _Restart(failed)
            tot = self.sync.reduce({"correct": correct, "frames": frames})
            acc = tot["correct"] / max(tot["frames"], 1)
            ok = tot["frames"] > 0 and (base is None or acc >= base * (1 - cfg.auto_minibatch_margin / 100))
            trials.append({"minibatch": n, "frame_acc": acc, "frames": int(tot["frames"]), "ok": ok})
            self._restore_in_memory(copy.deepcopy(saved))
            if not ok:
                break
            base = acc if base is None else base
            chosen = n
        st["minibatch"] = chosen
        per_update = self.sync.local_minibatch(chosen) * self.sync.data_size
        st["next_tuning_step"] = st["step"] + max(1, int(cfg.auto_minibatch_every_hours * FRAMES_PER_HOUR / per_update))
        st.setdefault("minibatch_trials", []).append({"epoch": epoch, "chunk": ch.index, "step": st["step"],
                                                      "trials": trials, "chosen": chosen})
        log("automatic minibatch size: " + ", ".join(
            f"{t['minibatch']}: " + (f"{100 * t['frame_acc']:.2f}%" + ("" if t["ok"] else " (worse)") if t["frames"]
                                     else "no whole minibatch in the slice") for t in trials)
            + f" -> {chosen} (was {prev})")
        return chosen

    def _restore_in_memory(self, saved: dict) -> None:
        self.model.load_state_dict(saved["model"])
        self.opt.load_state_dict(saved["opt"])
        self.sync.load_state_dict(saved["sync"])
        self.st.clear()
        self.st.update(saved["st"])

    # ------------------------------------------------------------ the schedule
    def train(self) -> dict:
        try:
            return self._train()
        except WorkersLost as e:   # (elastic: the job reruns the training, which resumes)
            if self.st:
                e.epoch, e.update = self.st.get("epoch"), self.st.get("step")
            raise

    def _train(self) -> dict:
        cfg = self.cfg
        resume, self._resume_from = self._resume_from, None   # (not kept in memory while training)
        if self.load_checkpoint(resume):
            st = self.st
            if st.get("done"):
                log(f"{self.dir}: training already finished")
                # stopped (or failed: disk full) after the last checkpoint but before final.nnet
                if not os.path.exists(os.path.join(self.dir, "final.nnet")):
                    self._write_final()
                return st
            log(f"{self.dir}: resuming from {self.ckpt_path}: epoch {st['epoch']}, "
                f"chunk {st['chunk']}, minibatch {st['batch']}")
        else:
            bad = self._nonfinite_params()
            if bad:
                fail(f"the initial model has non-finite parameters ({', '.join(bad)})", self.dir)
            cv_loss, cv_acc = self.evaluate(self.cv)
            self.st = st = {"epoch": 1, "chunk": 0, "batch": 0, "step": 0, "lr": cfg.learn_rate,
                            "halving": False, "best_loss": cv_loss, "done": False, "nan_restarts": 0, "lr_factor": 1.0,
                            "acc": _zero_acc(),
                            "history": [{"epoch": 0, "cv_loss": cv_loss, "cv_acc": cv_acc, "lr": cfg.learn_rate}]}
            log(f"initial CV: loss {cv_loss:.4f} frame accuracy {100 * cv_acc:.2f}%")
            self._save_best()
            self.save_checkpoint()
        while not st["done"]:
            if cfg.schedule == "exponential":
                st["lr"] = self._exponential_lr()
                if st["acc"]["frames"] == 0:
                    st["epoch_lr"] = st["lr"]
            try:
                self.run_epoch()
                self.sync.check_replicas()
                self.check_finite(f"the end of epoch {st['epoch']}")
                self._end_epoch()
                self.save_checkpoint()
            except _Restart as e:
                self._recover(str(e))
                st = self.st
        self._write_final()
        return st

    def _exponential_lr(self) -> float:
        """The rate for the next minibatch: the epoch's position counts in (exact resume)."""
        st, cfg = self.st, self.cfg
        if st.get("epoch_steps_total"):   # K workers: the same rate on every rank
            done = st["epoch"] - 1 + st.get("epoch_step", 0) / st["epoch_steps_total"]
        else:
            done = st["epoch"] - 1 + st["acc"]["frames"] / max(self.tr.num_frames, 1)
        return st["lr_factor"] * exponential_lr(cfg.learn_rate, cfg.final_learn_rate, done, cfg.num_epochs)

    def _recover(self, what: str) -> None:
        restarts = self.st["nan_restarts"] + 1
        if restarts > MAX_NAN_RESTARTS:
            fail(f"{what}: gave up after {MAX_NAN_RESTARTS} restarts with halved learning rates", self.ckpt_path)
        # halve the rate in use, not the checkpoint's: a second failure before the next checkpoint
        # must halve again
        lr, factor = self.st["lr"] * 0.5, self.st["lr_factor"] * 0.5
        self.load_checkpoint()
        st = self.st
        st["lr_factor"] = factor   # keeps the halving under the exponential schedule too
        st["lr"] = self._exponential_lr() if self.cfg.schedule == "exponential" else lr
        st["nan_restarts"] = restarts
        if self.sync.is_writer:   # (K workers: every rank recovers; one says so)
            log(f"WARNING: {what}: restored the last checkpoint (epoch {st['epoch']}, chunk {st['chunk']}, "
                f"minibatch {st['batch']}) and halved the learning rate to {st['lr']:.4g}")

    def _end_epoch(self) -> None:
        st, cfg = self.st, self.cfg
        a = self.sync.reduce(dict(st["acc"]))
        if a["frames"] == 0:
            fail(f"no usable training frames in epoch {st['epoch']} (every training utterance was skipped: "
                 "the warnings above)", self.tr.reader.feats_scp)
        tr_loss, tr_acc = a["loss"] / a["frames"], a["correct"] / a["frames"]
        cv_loss, cv_acc = self.evaluate(self.cv)
        # under the exponential schedule: the rate of the epoch's first and last minibatch
        lr_rec = {"lr": st["epoch_lr"], "lr_last": st["lr"]} if cfg.schedule == "exponential" else {"lr": st["lr"]}
        rec = {"epoch": st["epoch"], **lr_rec, **({"minibatch": self._minibatch()} if cfg.auto_minibatch else {}),
               "train_loss": tr_loss, "train_acc": tr_acc,
               "cv_loss": cv_loss, "cv_acc": cv_acc, "frames": int(a["frames"]),
               "frames_per_sec": a["frames"] / max(a["seconds"], 1e-9), "seconds": a["seconds"]}
        loss_prev = st["best_loss"]
        # a non-finite CV loss is rejected under every schedule (never the best model)
        if math.isfinite(cv_loss) and (cfg.schedule == "exponential" or cv_loss < loss_prev):
            rec["accepted"] = True
            st["best_loss"] = cv_loss
            self._save_best()
        else:
            rec["accepted"] = False
            self._restore(self._read_best())
        log(f"epoch {st['epoch']}: lr {rec['lr']:.4g}"
            + (f"-{rec['lr_last']:.4g}" if "lr_last" in rec else "") + f" train loss {tr_loss:.4f} acc {100 * tr_acc:.2f}% | "
            f"CV loss {cv_loss:.4f} acc {100 * cv_acc:.2f}% | {rec['frames_per_sec']:.0f} frames/s | "
            + ("accepted" if rec["accepted"] else "REJECTED (restored the previous model)"))
        lost = [e for e in st.get("lost", []) if e.get("epoch") == st["epoch"]]
        if lost:
            rec["lost_ranks"] = lost
        st["history"].append(rec)
        self._write_log()
        st["epoch"] += 1
        st["chunk"], st["batch"], st["pos"], st["acc"], st["epoch_step"] = 0, 0, 0, _zero_acc(), 0
        if cfg.schedule == "exponential":
            st["done"] = st["epoch"] > cfg.num_epochs + cfg.num_epochs_extra
            return
        # nnet1 train_scheduler.sh: stop / start halving on the relative CV improvement
        rel_impr = (loss_prev - st["best_loss"]) / loss_prev if loss_prev != 0 else 0.0
        if st["halving"] and rel_impr < cfg.end_halving_impr:
            log(f"finished: relative CV improvement {rel_impr:.5f} < {cfg.end_halving_impr} while halving")
            st["done"] = True
            return
        if rel_impr < cfg.start_halving_impr:
            st["halving"] = True
        if st["halving"]:
            st["lr"] *= cfg.halving_factor
        if st["epoch"] > cfg.max_epochs:
            log(f"finished: reached --max-epochs {cfg.max_epochs}")
            st["done"] = True

    def _read_best(self) -> dict:
        return read_checkpoint(self.best_path, ("model", "opt"), f"delete {self.ckpt_path} to start over")

    def _save_best(self) -> None:
        self._save_snapshot(self._snapshot(), self.best_path)

    def _write_log(self) -> None:
        if not self.sync.is_writer:
            return
        hist = self.st["history"]
        with atomic_write(os.path.join(self.dir, "log", "train.json")) as f:
            json.dump(hist, f, indent=1)
        plot_curve(hist, os.path.join(self.dir, "train_curve.png"))

    def _write_final(self) -> None:
        if not self.sync.is_writer:
            return
        best = self._read_best()
        final = model_from_dict({"arch": self.model.arch, "input_pipeline": self.model.input_pipeline,
                                 "state_dict": best["model"]})
        hist = self.st["history"]
        # the history without the timings (log/train.json has them): identical runs, identical bytes
        timeless = [{k: v for k, v in h.items() if k not in ("seconds", "frames_per_sec")} for h in hist]
        save_model(os.path.join(self.dir, "final.nnet"), final,
                   {"history": timeless, **({"lost_ranks": self.st["lost"]} if self.st.get("lost") else {})})
        log(f"{self.dir}/final.nnet: CV loss {self.st['best_loss']:.4f} after {len(hist) - 1} epochs")


def _zero_acc() -> dict:
    return {"loss": 0.0, "correct": 0, "frames": 0, "seconds": 0.0}


def plot_curve(history: list[dict], path: str) -> None:
    """Loss and frame accuracy per epoch (train and CV), PNG via matplotlib's Agg backend."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ep = [h["epoch"] for h in history if "train_loss" in h]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    ax1.plot([h["epoch"] for h in history], [h["cv_loss"] for h in history], "o-", label="CV")
    ax1.plot(ep, [h["train_loss"] for h in history if "train_loss" in h], "s-", label="train")
    ax1.set_xlabel("epoch"), ax1.set_ylabel("cross-entropy per frame"), ax1.legend(), ax1.grid(alpha=.3)
    ax2.plot([h["epoch"] for h in history], [100 * h["cv_acc"] for h in history], "o-", label="CV")
    ax2.plot(ep, [100 * h["train_acc"] for h in history if "train_loss" in h], "s-", label="train")
    ax2.set_xlabel("epoch"), ax2.set_ylabel("frame accuracy (%)"), ax2.legend(), ax2.grid(alpha=.3)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=80)
    plt.close(fig)


def device_name(device: torch.device) -> str:
    """'cpu', or the GPU model and CUDA version (what decides a run's rounding)."""
    if device.type != "cuda":
        return device.type
    return f"cuda ({torch.cuda.get_device_name(device)}, CUDA {torch.version.cuda})"


def set_threads() -> None:
    """Torch intra-op threads from OMP_NUM_THREADS (path.sh sets 1 per job)."""
    n = os.environ.get("OMP_NUM_THREADS")
    if n and n.isascii() and n.isdigit() and int(n) > 0:  # '²'.isdigit() but int('²') raises
        torch.set_num_threads(int(n))


def seed_everything(seed: int) -> None:
    torch.manual_seed(seed)
    np.random.seed(seed % (2 ** 32))


# ---------------------------------------------------------------- from data to a trained model
def build_and_train(data_dir: str, ali_dir: str, exp_dir: str, cfg: TrainConfig, *,
                    hidden_dims: list[int] | None = None, activation: str | None = None, context: int | None = None,
                    pnorm_group: int = 10, apply_cmvn: bool = False, delta_order: int = 0,
                    cv_percent: float = 10.0, cv_data_dir: str | None = None, cv_ali_dir: str | None = None,
                    dbn_path: str | None = None, dbn: dict | None = None,
                    feature_transform: FeatureTransform | None = None, feature_transform_path: str = "",
                    progress: bool = True,
                    targets: tuple[dict, int] | None = None, sync: Synchronizer | None = None) -> dict:
    """steps/nnet/train.sh in one call: frame sets, initial model (random or DBN; global CMVN and
    priors from the training data) in ``exp_dir/nnet.init``, then training to ``exp_dir/final.nnet``.
    Rerunning after an interruption resumes from ``exp_dir/checkpoint.pt``. CV: ``cv_percent`` % of
    the utterances held out, or ``cv_data_dir`` (aligned in ``cv_ali_dir``; load_frame_sets). The model's shape
    (``hidden_dims``, ``activation``, ``context``): with a DBN the DBN's (given values must agree),
    else the given ones or DEFAULT_SHAPE's. ``feature_transform`` (Kaldi nnet1's --feature-transform,
    read from ``feature_transform_path``): the input transform instead of splicing + a global CMVN
    of the data; with a DBN it must be the DBN's. The model's transform is also written as
    ``exp_dir/final.feature_transform`` (nnet1 text, as Kaldi's train.sh leaves it)."""
    from pynnet.io.tables import write_table
    from pynnet.nnet.data import global_cmvn, load_frame_sets, pdf_counts
    from pynnet.nnet.model import load_model_file

    set_threads()
    seed_everything(cfg.seed)
    sync = sync or Synchronizer()
    writer = sync.is_writer
    if not writer:
        progress = False
    os.makedirs(os.path.join(exp_dir, "log"), exist_ok=True)
    ckpt = os.path.join(exp_dir, "checkpoint.pt")
    obj = read_checkpoint(ckpt) if os.path.exists(ckpt) else None   # unreadable: fail before the data
    # (handed to the Trainer, which resumes from it without reading the file again)
    pipeline = {"apply_cmvn": apply_cmvn, "delta_order": delta_order}
    if not dbn_path:
        dbn = None
    elif dbn is None:   # (``dbn``: the file already read by the caller)
        from pynnet.nnet.rbm import load_dbn
        dbn = load_dbn(dbn_path)
    if dbn is not None and dbn["input_pipeline"] != pipeline:
        fail(f"the DBN was trained on features with {dbn['input_pipeline']}, not {pipeline}", dbn_path)
    given = {"hidden_dims": hidden_dims, "activation": activation, "context": context}
    if dbn is not None:
        shape = dbn_shape(dbn)
        for k, v in given.items():
            if v is not None and (list(v) if k == "hidden_dims" else v) != shape[k]:
                fail(f"{k} {v}: the DBN has {shape[k]}", dbn_path)
    else:
        if feature_transform is not None and given["context"] is None:
            given["context"] = feature_transform.context
        shape = {k: DEFAULT_SHAPE[k] if v is None else v for k, v in given.items()}
    hidden_dims, activation, context = list(shape["hidden_dims"]), shape["activation"], shape["context"]
    if feature_transform is not None:
        if dbn is not None:
            from pynnet.nnet.kaldi_nnet1 import same_transform
            dbn_transform = FeatureTransform(dbn["input_dim"], dbn["context"])
            dbn_transform.load_state_dict(dbn["transform"])
            if not same_transform(feature_transform, dbn_transform):
                fail(f"is not the feature transform of the DBN {dbn_path} (pynnet's DBN holds its own: "
                     "leave --feature-transform out, or give the DBN dir's final.feature_transform)",
                     feature_transform_path)
        elif feature_transform.context != context:
            fail(f"splices +-{feature_transform.context} frames, --splice says {context}", feature_transform_path)
    init_id = init_fingerprint(dbn, None if dbn is not None else feature_transform)
    if obj is not None:
        check_same_init((obj.get("data") or {}).get("init"), init_id, dbn_path, ckpt)
    tr, cv, num_pdfs = load_frame_sets(data_dir, ali_dir, apply_cmvn=apply_cmvn, delta_order=delta_order,
                                       cv_percent=cv_percent, seed=cfg.seed, targets=targets,
                                       cv_data_dir=cv_data_dir, cv_ali_dir=cv_ali_dir)
    log(f"{len(tr.utts)} training utterances ({tr.num_frames} frames), {len(cv.utts)} CV utterances "
        f"({cv.num_frames} frames), {num_pdfs} pdfs")
    data_id = data_fingerprint(tr, cv, None if cv_data_dir else cv_percent) | {"init": init_id}
    init_path = os.path.join(exp_dir, "nnet.init")
    if obj is not None:
        # before the lists are rewritten: they must keep describing the checkpoint's split
        check_same_data(obj, data_id, ckpt)
    if writer:
        write_table(os.path.join(exp_dir, "train_utts.list"), [(u, "") for u in tr.utts])   # atomic
        write_table(os.path.join(exp_dir, "cv_utts.list"), [(u, "") for u in cv.utts])
    if obj is not None:
        model = model_from_dict({"arch": obj["arch"], "input_pipeline": obj["input_pipeline"],
                                 "state_dict": obj["model"]})
        _check_same_model(model, ckpt, dbn_path, hidden_dims, activation, context, pipeline)
    elif os.path.exists(init_path):
        init_obj = load_model_file(init_path)
        check_same_init(init_obj.get("init"), init_id, dbn_path, init_path)
        model = model_from_dict(init_obj)
        _check_same_model(model, init_path, dbn_path, hidden_dims, activation, context, pipeline)
        log(f"using the existing {init_path}")
    else:
        first = tr.reader.read(tr.utts[0])
        in_dim = first.shape[1]
        if dbn_path:
            model = dbn_to_dnn(dbn, num_pdfs, cfg.seed)
            if model.arch["input_dim"] != in_dim:
                fail(f"the DBN takes {model.arch['input_dim']}-dim features, the data has {in_dim}", dbn_path)
        else:
            model = Dnn(in_dim, hidden_dims, num_pdfs, activation, context, pnorm_group, pipeline)
            model.init_random(cfg.seed)
            if feature_transform is None:
                mean, std = global_cmvn(tr, progress=progress)
                model.transform.set_global_cmvn(mean, std)
            elif feature_transform.input_dim != in_dim:
                fail(f"takes {feature_transform.input_dim}-dim features, the data has {in_dim}",
                     feature_transform_path)
            else:
                model.transform.load_state_dict(feature_transform.state_dict())
        counts = pdf_counts([tr, cv], num_pdfs)
        model.set_priors_from_counts(counts)
        # (K workers: every rank builds the same initial model; rank 0 writes it)
        if writer:
            # Kaldi nnet1's prior file (analyze-counts output: a text vector)
            with atomic_write(os.path.join(exp_dir, "ali_train_pdf.counts")) as f:
                f.write("[ " + " ".join(str(int(c)) for c in counts) + " ]\n")
            save_model(init_path, model, {"init": init_id})
        log(f"wrote {init_path}: {model.num_params()} parameters, "
            f"{model.transform.output_dim} inputs -> {model.arch['hidden_dims']} -> {num_pdfs}")
    if model.arch["output_dim"] != num_pdfs:
        fail(f"model has {model.arch['output_dim']} outputs but the alignments have {num_pdfs} pdfs", init_path)
    from pynnet.nnet.kaldi_nnet1 import write_feature_transform
    if writer:
        write_feature_transform(os.path.join(exp_dir, "final.feature_transform"), model.transform)
    # K workers: each rank's shards, after checking that every rank runs the same training
    tr, cv = sync.shard(tr, cv, {"options": {k: v for k, v in asdict(cfg).items() if k != "device"},
                                 "data": data_id}, model)
    trainer = Trainer(exp_dir, model, tr, cv, cfg, sync, progress, data_id, checkpoint=obj)
    del obj   # the trainer holds it until the resume, not the whole training
    return trainer.train()


def _check_same_model(model: Dnn, path: str, dbn_path, hidden_dims, activation, context, pipeline) -> None:
    """A rerun must ask for the model it is resuming (the DBN decides the shape with --dbn)."""
    a = model.arch
    want = {"input_pipeline": pipeline}
    if not dbn_path:
        want.update(hidden_dims=list(hidden_dims), activation=activation, context=context)
    have = {"input_pipeline": model.input_pipeline, "hidden_dims": a["hidden_dims"],
            "activation": a["activation"], "context": a["context"]}
    diff = [f"{k}: {have[k]} now {v}" for k, v in want.items() if have[k] != v]
    if diff:
        fail("was made for another model (" + "; ".join(diff) + "); remove the exp dir to start over", path)


# the model's shape without a DBN unless given (Kaldi nnet1 steps/nnet/train.sh's defaults:
# --hid-layers 4 --hid-dim 1024 --splice 5; a DBN is 6 x 2048 by pretrain_dbn.sh's)
DEFAULT_SHAPE = {"hidden_dims": [1024] * 4, "activation": "sigmoid", "context": 5}


def dbn_shape(dbn: dict) -> dict:
    """The shape of the DNN made from ``dbn``: its hidden layers, sigmoid units, its splicing."""
    return {"hidden_dims": [int(layer["W"].shape[0]) for layer in dbn["layers"]], "activation": "sigmoid",
            "context": dbn["context"]}


def dbn_to_dnn(dbn: dict, num_pdfs: int, seed: int) -> Dnn:
    """A sigmoid DNN whose hidden layers are the DBN's RBMs (weights, hidden biases) and whose
    feature transform is the DBN's; the softmax layer on top starts as nnet1's steps/nnet/train.sh
    makes it over a DBN (make_nnet_proto.py --hid-layers 0): N(0, 0.1 x 35 sqrt(2/(in+out))),
    bias 0."""
    layers = dbn["layers"]
    shape = dbn_shape(dbn)
    model = Dnn(dbn["input_dim"], shape["hidden_dims"], num_pdfs, shape["activation"], shape["context"],
                input_pipeline=dbn["input_pipeline"])
    model.init_random(seed)
    model.transform.load_state_dict(dbn["transform"])
    with torch.no_grad():
        for aff, layer in zip(model.affines, layers):
            aff.wb[:, :-1].copy_(layer["W"])
            aff.wb[:, -1].copy_(layer["hbias"])
        out = model.affines[-1]
        std = 0.1 * 35.0 * math.sqrt(2.0 / (out.in_dim + out.out_dim))
        g = torch.Generator().manual_seed(seed)
        out.wb[:, :-1].copy_(torch.randn(out.out_dim, out.in_dim, generator=g) * std)
        out.wb[:, -1].zero_()
    return model
