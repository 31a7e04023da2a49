"""RBM pretraining of a DBN (Kaldi nnet1 ``steps/nnet/pretrain_dbn.sh``, ``rbm-train-cd1-frmshuff``).

Layer 1 is a Gaussian-Bernoulli RBM on the spliced, globally normalised features (lr 0.01, twice
the epochs); the layers above are Bernoulli-Bernoulli RBMs (lr 0.4) trained on the previous
layers' sigmoid outputs, each with its visible bias set from those outputs' mean activation
(log p/(1-p)). CD-1, minibatch 100, L2 0.0002, weights N(0, 0.1). Momentum and step follow
rbm-train-cd1-frmshuff's default (``--with-bug=true``): momentum 0.9 from the second minibatch on,
step ``lr (1 - m)`` with m ramped 0.5 -> 0.9 in 40 steps of 500k frames (20M frames, ~55 h), so the
effective rate starts near 5 lr. Gaussian-Bernoulli layers get nnet1's anti-weight-explosion
protection (reconstruction std > 2 x the data's: weights and biases scaled down, step x 0.9 until
the next ramp step, momentum reset, update skipped).

Files: ``<dir>/<n>.rbm`` after layer n (a rerun skips finished layers), ``<dir>/final.feature_transform``
(the input transform in Kaldi nnet1's text form), ``<dir>/final.dbn``
(feature transform + all layers), ``<dir>/log/rbm.json`` (reconstruction error per epoch),
``<dir>/pretrain_opts.json`` (the options and data the layers were trained with: a rerun with
others fails rather than stacking new layers on old ones; the depth is not among them, so a
deeper rerun reuses the layers below).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass

import numpy as np
import torch

from pynnet.io.atomic import atomic_write
from pynnet.io.errors import fail
from pynnet.io.progress import progress_kwargs
from pynnet.nnet.data import ChunkLoader, FeatureReader, FrameSet, global_cmvn, log, plan_chunks
from pynnet.nnet.model import FeatureTransform, save_atomic

DBN_FORMAT = "pynnet-dbn-v1"
RECORD_FORMAT = "pynnet-rbm-opts-v1"
RECORD_NAME = "pretrain_opts.json"
# How a mismatch names each recorded field (pynnet-rbm-train's options where there is one).
_OPTION_NAMES = {"apply_cmvn": "--apply-cmvn", "delta_order": "--delta-order", "context": "--splice",
                 "input_dim": "feature dim", "hid_dim": "--hid-dim", "epochs": "--rbm-iter",
                 "lr_gb": "--rbm-lrate-low", "lr_bb": "--rbm-lrate", "l2": "--rbm-l2penalty",
                 "minibatch_size": "--minibatch-size", "buffer_frames": "--buffer-frames", "seed": "--seed"}


@dataclass
class RbmConfig:
    minibatch_size: int = 100
    lr_gb: float = 0.01
    lr_bb: float = 0.4
    epochs: int = 1                 # per BB layer; the GB layer gets twice as many
    momentum: float = 0.5            # nnet1 rbm-train-cd1-frmshuff: m ramps momentum -> momentum_max
    momentum_max: float = 0.9        # in momentum_steps steps of momentum_step_frames frames
    momentum_steps: int = 40
    momentum_step_frames: int = 500000
    l2: float = 0.0002
    init_std: float = 0.1
    buffer_frames: int = 32768
    seed: int = 777
    device: str = "cpu"


class Rbm:
    def __init__(self, vis: int, hid: int, gaussian: bool, std: float, gen: torch.Generator):
        self.gaussian = gaussian
        self.W = torch.randn(hid, vis, generator=gen) * std
        self.hbias = torch.zeros(hid)
        self.vbias = torch.zeros(vis)

    def to(self, device: str | torch.device) -> "Rbm":
        self.W, self.hbias, self.vbias = self.W.to(device), self.hbias.to(device), self.vbias.to(device)
        return self

    def hidden(self, v: torch.Tensor) -> torch.Tensor:
        return torch.addmm(self.hbias, v, self.W.t()).sigmoid_()

    def to_dict(self) -> dict:
        return {"W": self.W.cpu(), "hbias": self.hbias.cpu(), "vbias": self.vbias.cpu(),
                "type": "gb" if self.gaussian else "bb"}

    @classmethod
    def from_dict(cls, d: dict) -> "Rbm":
        r = cls.__new__(cls)
        r.gaussian = d["type"] == "gb"
        r.W, r.hbias, r.vbias = d["W"], d["hbias"], d["vbias"]
        return r


class Nnet1Schedule:
    """rbm-train-cd1-frmshuff's momentum and step (its default ``--with-bug=true``): the first
    minibatch with momentum and the step lr (1 - momentum); after each minibatch, when the frames
    seen so far cross a multiple of ``momentum_step_frames`` (n of them), momentum_max and the step
    lr (1 - m) with m = momentum + min(n, steps) (momentum_max - momentum) / steps. ``shrink``
    (the anti-explosion protection's x0.9) holds until that next change."""

    def __init__(self, lr: float, cfg: RbmConfig):
        self.lr, self.cfg = lr, cfg
        self.step, self.momentum = lr * (1.0 - cfg.momentum), cfg.momentum
        self.frames, self.n = 0, -1

    def advance(self, frames: int) -> None:
        c = self.cfg
        self.frames += frames
        n = self.frames // c.momentum_step_frames
        if n > self.n:
            self.n = n
            m = c.momentum + min(n, c.momentum_steps) * (c.momentum_max - c.momentum) / c.momentum_steps
            self.step, self.momentum = self.lr * (1.0 - m), c.momentum_max

    def shrink(self) -> None:
        self.step *= 0.9


def _std(x: torch.Tensor) -> torch.Tensor:
    """Standard deviation of all elements (Kaldi's ComputeStdDev), a float64 scalar on x's device."""
    x = x.double()
    mean = x.mean()
    return ((x * x).mean() - mean * mean).clamp_min(0.0).sqrt()


class PretrainClock:
    """The time the whole pretraining should take, from the first epoch's: a layer's epoch costs
    about 5 GEMMs of vis x hid per frame (CD-1) plus one of each layer below (the propagation), so
    the seconds per unit of that cost measured so far times the units left is the time left."""

    def __init__(self, layers: list[tuple[int, int, int]], frames: int):
        """``layers``: (vis, hid, epochs) of each layer, below to top; ``frames`` per epoch."""
        self.costs: list[float] = []   # cost of one epoch of each layer
        below = 0.0
        for vis, hid, _ in layers:
            self.costs.append(frames * (5.0 * vis * hid + below))
            below += vis * hid
        self.epochs = [e for _, _, e in layers]
        self.total = sum(c * e for c, e in zip(self.costs, self.epochs))
        self.done = 0.0
        self.seconds = 0.0

    def epoch_done(self, layer_index: int, seconds: float) -> None:
        self.done += self.costs[layer_index]
        self.seconds += seconds

    def left(self) -> float:
        """Estimated seconds to the end."""
        return self.seconds / self.done * (self.total - self.done) if self.done else float("nan")


def _duration(s: float) -> str:
    if s < 90:
        return f"{s:.0f} s"
    if s < 5400:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"


def cd1_epochs(rbm: Rbm, batches, num_frames: int, epochs: int, lr: float, cfg: RbmConfig,
               gen: torch.Generator, desc: str, on_epoch=None) -> list[float]:
    """Train with CD-1; ``batches(epoch)`` yields visible minibatches. Returns MSE per epoch.
    One progress bar for all the epochs (frames, with an ETA); ``on_epoch(epoch, seconds)`` is
    called after each epoch, its message printed after the epoch's."""
    import time

    from tqdm import tqdm

    dW, dh, dv = torch.zeros_like(rbm.W), torch.zeros_like(rbm.hbias), torch.zeros_like(rbm.vbias)
    uniform = torch.empty(0)
    errs = []
    steps = 0
    sched = Nnet1Schedule(lr, cfg)

    def check_finite() -> None:   # (not every step: a CPU sync per minibatch costs time)
        if not torch.isfinite(sq):
            fail(f"{desc}: reconstruction error is not finite (learning rate {lr} too high?)")

    bar = tqdm(total=num_frames * epochs, desc=desc, unit="fr", unit_scale=True, **progress_kwargs())
    for ep in range(epochs):
        t0 = time.time()
        sq, n = torch.zeros((), dtype=torch.float64, device=rbm.W.device), 0
        rescaled = 0
        bar.set_postfix_str(f"epoch {ep + 1}/{epochs}", refresh=False)
        for v in batches(ep):
            N = v.shape[0]
            mom, step = sched.momentum, sched.step
            # in-place and fused where possible: at minibatch 100 the elementwise passes over the
            # weight-sized temporaries cost a third as much as the five GEMMs
            pos_h = rbm.hidden(v)
            if uniform.shape != pos_h.shape:
                uniform = torch.empty_like(pos_h)
            h_sample = torch.lt(uniform.uniform_(generator=gen), pos_h).to(v.dtype)
            neg_v = torch.addmm(rbm.vbias, h_sample, rbm.W)
            if not rbm.gaussian:
                neg_v.sigmoid_()
            neg_h = rbm.hidden(neg_v)
            diff = v - neg_v
            # nnet1's anti-weight-explosion protection: a Gaussian-Bernoulli RBM whose
            # reconstructions vary much more than the data is about to diverge
            stds = torch.stack([_std(v), _std(neg_v)]) if rbm.gaussian else None
            if stds is not None and bool(stds[1] > 2.0 * stds[0]):   # (one host sync)
                data_std, recon_std = (float(x) for x in stds)
                scale = data_std / recon_std
                for t in (rbm.W, rbm.hbias, rbm.vbias):
                    t.mul_(scale)
                for t in (dW, dh, dv):
                    t.zero_()
                sched.shrink()
                if rescaled == 0:
                    log(f"WARNING: {desc} epoch {ep + 1}: reconstruction std {recon_std:.3g} > 2 x the data's "
                        f"{data_std:.3g}: weights scaled by {scale:.3g}, step lowered to {sched.step:.3g}")
                rescaled += 1
            else:
                # dW = mom dW + step ((pos_h^T v - neg_h^T neg_v) / N - l2 W)
                dW.addmm_(pos_h.t(), v, beta=mom, alpha=step / N)
                dW.addmm_(neg_h.t(), neg_v, alpha=-step / N)
                dW.add_(rbm.W, alpha=-step * cfg.l2)
                dh.mul_(mom).add_(pos_h.sum(0).sub_(neg_h.sum(0)), alpha=step / N)
                dv.mul_(mom).add_(diff.sum(0), alpha=step / N)
                rbm.W += dW
                rbm.hbias += dh
                rbm.vbias += dv
            sq += torch.dot(diff.view(-1), diff.view(-1))
            n += N
            sched.advance(N)
            bar.update(N)
            steps += 1
            if steps % 256 == 0:
                check_finite()
        check_finite()
        errs.append(float(sq) / max(n, 1))
        more = f" ({rescaled} minibatches rescaled against weight explosion)" if rescaled else ""
        # (the bar is cleared first, so that the message is not drawn over it)
        bar.clear()
        log(f"{desc} epoch {ep + 1}: reconstruction MSE per frame {errs[-1]:.4f}, step {sched.step:.3g}, "
            f"momentum {sched.momentum}{more}")
        if on_epoch is not None:
            on_epoch(ep, time.time() - t0)
    bar.close()
    return errs


def visible_bias_from_outputs(batches, dim: int, max_frames: int = 50000) -> torch.Tensor:
    """log(p / (1 - p)) of the mean activation p of the layer below (over up to max_frames)."""
    s, n = torch.zeros(dim, dtype=torch.float64), 0
    for v in batches:
        s = s.to(v.device) + v.double().sum(0)
        n += v.shape[0]
        if n >= max_frames:
            break
    p = (s / max(n, 1)).clamp(1e-4, 1 - 1e-4)
    return torch.log(p / (1 - p)).float()


def _frame_set(data_dir: str, apply_cmvn: bool, delta_order: int) -> FrameSet:
    reader = FeatureReader(data_dir, apply_cmvn, delta_order)
    from pynnet.io.datadir import read_data_file

    utts = sorted(reader.scp, key=lambda u: u.encode())
    # (values checked there: a bad one is a file:line error, not int()'s traceback)
    t = read_data_file(data_dir, "utt2num_frames", required=False, prog="pynnet-rbm-train") or {}
    frames = {u: int(t[u]) for u in utts if u in t}
    for u in utts:
        if u not in frames:
            frames[u] = reader.read(u).shape[0]
    targets = {u: np.zeros(frames[u], np.int32) for u in utts}
    return FrameSet(reader, targets, utts, frames, lengths_from="utt2num_frames")


def _resume_record(data_dir: str, fs: FrameSet, in_dim: int, context: int, hid_dim: int,
                   apply_cmvn: bool, delta_order: int, cfg: RbmConfig) -> dict:
    """What the layers depend on: everything that changes their values except the depth (a layer
    does not depend on those above it) and the device/threads (rounding only)."""
    import kaldiio

    # the data's identity, cheaply: the utterances, their lengths and the first one's stored
    # features (re-extracted features); before the input pipeline, whose options are recorded apart
    h = hashlib.sha1()
    for u in fs.utts:
        h.update(f"{u} {fs.frames[u]}\n".encode())
    h.update(np.ascontiguousarray(kaldiio.load_mat(fs.reader.scp[fs.utts[0]]), dtype=np.float32).tobytes())
    options = {"apply_cmvn": apply_cmvn, "delta_order": delta_order, "context": context,
               "input_dim": in_dim, "hid_dim": hid_dim, "epochs": cfg.epochs,
               "lr_gb": cfg.lr_gb, "lr_bb": cfg.lr_bb, "l2": cfg.l2, "minibatch_size": cfg.minibatch_size,
               "buffer_frames": cfg.buffer_frames, "seed": cfg.seed, "momentum": cfg.momentum,
               "momentum_max": cfg.momentum_max, "init_std": cfg.init_std,
               # the schedule's version: layers trained with the old one-epoch ramp are not reused
               "momentum_schedule": "nnet1-with-bug", "momentum_steps": cfg.momentum_steps,
               "momentum_step_frames": cfg.momentum_step_frames}
    return {"format": RECORD_FORMAT, "options": options,
            "data": {"dir": os.path.abspath(data_dir), "utts": len(fs.utts), "frames": fs.num_frames,
                     "sha1": h.hexdigest()}}


def _check_resume(path: str, new: dict, out_dir: str) -> None:
    """Fail on one line, naming what differs, unless ``path`` records the same options and data."""
    try:
        with open(path, encoding="utf-8") as f:
            old = json.load(f)
        old_opts, old_data = old["options"], old["data"]
        if old.get("format") != RECORD_FORMAT:
            raise ValueError
    except (ValueError, KeyError, TypeError):
        fail(f"not a pynnet RBM options record ({RECORD_FORMAT}): use a fresh dir or delete {out_dir}", path)
    diffs = [f"{_OPTION_NAMES.get(k, k)} {json.dumps(old_opts.get(k))} -> {json.dumps(v)}"
             for k, v in new["options"].items() if old_opts.get(k) != v]
    nd = new["data"]
    if old_data.get("sha1") != nd["sha1"]:
        diffs.append(f"data {old_data.get('dir')} ({old_data.get('utts')} utts, {old_data.get('frames')} frames) -> "
                     f"{nd['dir']} ({nd['utts']} utts, {nd['frames']} frames)")
    if diffs:
        fail(f"the layers in {out_dir} were trained with other options or data ({'; '.join(diffs)}): "
             f"use a fresh dir or delete {out_dir}", path)


def _load_finished(path: str, what: str, out_dir: str) -> dict:
    try:
        return torch.load(path, map_location="cpu", weights_only=False)
    except Exception as e:  # noqa: BLE001 - a damaged file is the user's to remove
        fail(f"cannot read {what} ({type(e).__name__}): use a fresh dir or delete {out_dir}", path)


def _write_record(path: str, record: dict) -> None:
    with atomic_write(path) as f:
        json.dump(record, f, indent=1)


def _shape(t: object) -> tuple:
    return tuple(t.shape) if isinstance(t, torch.Tensor) else ()


def _check_shape(path: str, shape: tuple, expected: tuple, out_dir: str) -> None:
    # a record guarantees this; a dir from before the record (or without it) may not match
    if shape != expected:
        fail(f"has shape {list(shape)}, these options need {list(expected)} (--splice, --hid-dim or the "
             f"features differ): use a fresh dir or delete {out_dir}", path)


def pretrain_dbn(data_dir: str, out_dir: str, nn_depth: int, hid_dim: int, cfg: RbmConfig, *,
                 context: int = 5, apply_cmvn: bool = False, delta_order: int = 0) -> str:
    """Train ``nn_depth`` stacked RBMs on the data dir's features; returns the path of final.dbn."""
    os.makedirs(os.path.join(out_dir, "log"), exist_ok=True)
    torch.manual_seed(cfg.seed)
    dev = torch.device(cfg.device)
    fs = _frame_set(data_dir, apply_cmvn, delta_order)
    if not fs.utts:
        fail("no utterances", fs.reader.feats_scp)
    pipeline = {"apply_cmvn": apply_cmvn, "delta_order": delta_order}
    tf_path = os.path.join(out_dir, "feature_transform.pt")
    in_dim = fs.reader.read(fs.utts[0]).shape[1]
    record = _resume_record(data_dir, fs, in_dim, context, hid_dim, apply_cmvn, delta_order, cfg)
    record_path = os.path.join(out_dir, RECORD_NAME)
    finished = os.path.exists(tf_path) or any(re.fullmatch(r"[0-9]+\.rbm", f) for f in os.listdir(out_dir))
    legacy = finished and not os.path.exists(record_path)   # made before the record existed
    if not finished:   # (a record beside no finished files is stale: replaced)
        _write_record(record_path, record)
    elif not legacy:
        _check_resume(record_path, record, out_dir)
    transform = FeatureTransform(in_dim, context)
    if os.path.exists(tf_path):
        state = _load_finished(tf_path, "the feature transform", out_dir)
        shift = state.get("shift") if isinstance(state, dict) else None
        _check_shape(tf_path, _shape(shift), (transform.output_dim,), out_dir)
        transform.load_state_dict(state)
    else:
        mean, std = global_cmvn(fs, progress=not progress_kwargs()["disable"])
        transform.set_global_cmvn(mean, std)
        save_atomic(transform.state_dict(), tf_path)
    rbms: list[Rbm] = []
    report_path = os.path.join(out_dir, "log", "rbm.json")
    report = json.load(open(report_path)) if os.path.exists(report_path) else {}
    num_frames = fs.num_frames

    def propagate(x: torch.Tensor) -> torch.Tensor:
        for r in rbms:
            x = r.hidden(x)
        return x

    def batches_for(layer: int):
        def batches(ep: int):
            chunks = plan_chunks(fs, 1000 * layer + ep, cfg.seed, cfg.buffer_frames)
            loader = ChunkLoader(fs, chunks, transform, 0, [cfg.seed, layer, ep])
            try:
                for ch in loader:
                    with torch.no_grad():
                        x = propagate(ch.x[ch.order].to(dev))
                    for i in range(0, x.shape[0], cfg.minibatch_size):
                        yield x[i:i + cfg.minibatch_size]
            finally:
                loader.close()
        return batches

    vis = transform.output_dim
    # finished layers: the run of them from layer 1 (one above a missing layer was trained on
    # another layer below it, so it is trained again)
    for layer in range(1, nn_depth + 1):
        path = os.path.join(out_dir, f"{layer}.rbm")
        if not os.path.exists(path):
            break
        d = _load_finished(path, f"RBM layer {layer}", out_dir)
        _check_shape(path, _shape(d.get("W") if isinstance(d, dict) else None), (hid_dim, vis), out_dir)
        rbms.append(Rbm.from_dict(d).to(dev))
        log(f"{path} exists: layer {layer} already trained")
        vis = hid_dim
    if legacy:   # its files fit these options' shapes: trust that it was made with them
        log(f"{out_dir} has no {RECORD_NAME}: assuming its layers were trained with these options")
        _write_record(record_path, record)
    first = len(rbms) + 1
    dims = [(transform.output_dim if layer == 1 else hid_dim, hid_dim, cfg.epochs * (2 if layer == 1 else 1))
            for layer in range(first, nn_depth + 1)]
    clock = PretrainClock(dims, num_frames)

    def on_epoch(layer: int, epochs: int):
        def report(ep: int, seconds: float) -> None:
            clock.epoch_done(layer - first, seconds)
            left = clock.left()
            if layer == first and ep == 0 and (epochs > 1 or layer < nn_depth):
                # the first figure, the one a user waits for
                log(f"RBM {layer}/{nn_depth} epoch 1 took {_duration(seconds)}: the pretraining of "
                    f"{len(dims)} RBMs should take about {_duration(seconds + left)} "
                    f"(about {_duration(left)} more)")
            elif ep == epochs - 1 and layer < nn_depth:
                rest = f"RBM {nn_depth}" if layer + 1 == nn_depth else f"RBMs {layer + 1}-{nn_depth}"
                log(f"RBM {layer}/{nn_depth} done after {_duration(clock.seconds)} of pretraining: "
                    f"about {_duration(left)} more for {rest}")
        return report

    for layer in range(first, nn_depth + 1):
        path = os.path.join(out_dir, f"{layer}.rbm")
        gen = torch.Generator().manual_seed(cfg.seed + layer)
        gaussian = layer == 1
        rbm = Rbm(vis, hid_dim, gaussian, cfg.init_std, gen).to(dev)   # same initial weights on any device
        if dev.type != "cpu":   # the hidden-unit samples are drawn where the data is
            gen = torch.Generator(device=dev).manual_seed(cfg.seed + layer)
        if not gaussian:
            # visible bias from the previous layer's mean output: log(p / (1 - p))
            with torch.no_grad():
                rbm.vbias = visible_bias_from_outputs(batches_for(layer)(0), vis)
        lr = cfg.lr_gb if gaussian else cfg.lr_bb
        epochs = cfg.epochs * (2 if gaussian else 1)
        with torch.no_grad():
            errs = cd1_epochs(rbm, batches_for(layer), num_frames, epochs, lr, cfg, gen,
                              f"RBM {layer}/{nn_depth} ({'Gaussian' if gaussian else 'Bernoulli'}-Bernoulli "
                              f"{vis}x{hid_dim})", on_epoch=on_epoch(layer, epochs))
        save_atomic(rbm.to_dict(), path)
        report[str(layer)] = {"type": "gb" if gaussian else "bb", "lr": lr, "epochs": epochs,
                              "reconstruction_mse": errs}
        with atomic_write(report_path) as f:
            json.dump(report, f, indent=1)
        rbms.append(rbm)
        vis = hid_dim
    dbn = {"format": DBN_FORMAT, "input_dim": in_dim, "context": context, "input_pipeline": pipeline,
           "transform": transform.state_dict(), "layers": [r.to_dict() for r in rbms]}
    final = os.path.join(out_dir, "final.dbn")
    save_atomic(dbn, final)
    # the input transform also in Kaldi nnet1's form, where Kaldi's recipes look for it
    from pynnet.nnet.kaldi_nnet1 import write_feature_transform
    write_feature_transform(os.path.join(out_dir, "final.feature_transform"), transform)
    log(f"wrote {final}: {nn_depth} layers of {hid_dim} units on {transform.output_dim} inputs")
    return final


def load_dbn(path: str) -> dict:
    if not os.path.exists(path):
        fail("no such DBN file", path)
    try:
        obj = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as e:  # noqa: BLE001
        fail(f"cannot read DBN ({type(e).__name__})", path)
    if not isinstance(obj, dict) or obj.get("format") != DBN_FORMAT:
        fail(f"not a pynnet DBN (expected format {DBN_FORMAT})", path)
    return obj
