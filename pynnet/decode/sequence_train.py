"""Sequence-discriminative training of a DNN, one pass over the data (Kaldi nnet1's
nnet-train-mpe-sequential and nnet-train-mmi-sequential, behind steps/nnet/train_mpe.sh).

Per utterance, as Kaldi does: forward the features; pseudo-log-likelihoods (log-softmax minus the
log priors) replace the acoustic scores of the denominator lattice; the lattice's forward-backward
(:mod:`pynnet.decode.sequence`) gives the derivative of the criterion (sMBR or MPFE expected frame
accuracy against the numerator alignment, or the MMI objective) with respect to each frame's
scaled log-likelihoods, which is the derivative with respect to the network's pre-softmax
outputs (the softmax Jacobian's row sums vanish against a per-frame sum of zero, and the prior is
a constant); one SGD step (summed over the utterance's frames, as nnet1's learning rates assume).

It sits at the decode layer because it needs the decoders' lattices; the network, features and
optimizers come from the layers below.

Utterances are drawn from the lattice archives (one reader per ``lat.JOB.gz``, a seeded random
choice among them for each draw) through a seeded shuffling buffer, so the order is stochastic,
speakers are mixed, memory is bounded (Kaldi shuffles feats.scp and reads lattices by random
access through lat.scp instead) and a pass is reproducible from the seed.
"""
from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator, Sequence

import numpy as np
import torch

from pynnet.decode.lattice import Lattice, read_lattice_ark
from pynnet.decode.sequence import mmi_posteriors, mpe_posteriors, rescore_acoustics
from pynnet.io.errors import PynnetError, fail
from pynnet.nnet.data import FeatureReader
from pynnet.nnet.model import Dnn
from pynnet.nnet.optim import make_optimizer

log = logging.getLogger(__name__)

CRITERIA = ("smbr", "mpfe", "mmi")


@dataclass
class SequenceConfig:
    criterion: str = "smbr"          # smbr | mpfe (steps/nnet/train_mpe.sh --do-smbr true|false) | mmi
    acoustic_scale: float = 0.1
    lm_scale: float = 1.0
    learn_rate: float = 1e-5
    momentum: float = 0.0
    one_silence_class: bool = True   # (nnet1's train_mpe.sh default)
    silence_phones: tuple[int, ...] = ()
    drop_frames: bool = True         # MMI: frames whose reference pdf has no denominator posterior
    seed: int = 777
    shuffle_buffer: int = 256

    def check(self) -> None:
        if self.criterion not in CRITERIA:
            fail(f"unknown criterion '{self.criterion}' (expected one of {', '.join(CRITERIA)})")
        if self.acoustic_scale <= 0 or self.lm_scale < 0 or self.learn_rate <= 0:
            fail("--acoustic-scale and --learn-rate must be positive, --lm-scale not negative")
        if not 0 <= self.momentum < 1:
            fail(f"--momentum must be in [0, 1), got {self.momentum}")
        if self.shuffle_buffer < 1:
            fail(f"--shuffle-buffer must be at least 1, got {self.shuffle_buffer}")


@dataclass
class PassStats:
    utterances: int = 0
    frames: int = 0
    objective: float = 0.0           # sMBR/MPFE: expected correct frames; MMI: objective sum
    no_alignment: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)   # length mismatch, no path through the lattice
    seconds: float = 0.0

    def summary(self, criterion: str) -> str:
        per = self.objective / self.frames if self.frames else float("nan")
        what = "frame-accuracy" if criterion != "mmi" else "MMI objective per frame"
        return (f"Overall average {what} is {per:.6f} over {self.frames} frames; {self.utterances} utterances "
                f"trained, {len(self.no_alignment)} without alignment, {len(self.skipped)} skipped")


def shuffled_lattices(lat_files: Sequence[str], seed: int, buffer: int) -> Iterator[tuple[str, Lattice]]:
    """(utt, lattice) of every archive, in a seeded random order (see the module docstring)."""
    rng = random.Random(seed)
    readers = [read_lattice_ark(f) for f in lat_files]
    pool: list[tuple[str, Lattice]] = []
    while readers or pool:
        while readers and len(pool) < buffer:
            r = rng.randrange(len(readers))
            item = next(readers[r], None)
            if item is None:
                readers.pop(r)
            else:
                pool.append(item)
        if pool:
            k = rng.randrange(len(pool))
            pool[k], pool[-1] = pool[-1], pool[k]
            yield pool.pop()


def train_pass(model: Dnn, feats: FeatureReader, alignments: dict[str, np.ndarray], lat_files: Sequence[str],
               tables, cfg: SequenceConfig, device: torch.device,
               on_utterance: Callable[[PassStats], None] | None = None) -> PassStats:
    """One pass of per-utterance SGD over the denominator lattices; ``model`` is updated in place.
    ``tables``: pynnet.hmm.ali_io.TransitionTables of the transition model."""
    cfg.check()
    opt = make_optimizer("sgd", model, cfg.momentum)
    model.to(device)
    model.train()
    log_priors = model.log_priors.detach().to(device)
    in_dim = model.arch["input_dim"]
    num_pdfs = model.arch["output_dim"]
    if tables.pdf.size and int(tables.pdf[1:].max()) >= num_pdfs:
        fail(f"the transition model has {int(tables.pdf[1:].max()) + 1} pdfs but the network {num_pdfs} outputs")
    sil = set(cfg.silence_phones)
    st = PassStats()
    t0 = time.time()
    for utt, lat in shuffled_lattices(lat_files, cfg.seed, cfg.shuffle_buffer):
        ref = alignments.get(utt)
        if ref is None:
            st.no_alignment.append(utt)
            continue
        if utt not in feats.scp:
            fail(f"utterance '{utt}' of the lattices is not in feats.scp", feats.feats_scp)
        x = feats.read(utt)
        if x.shape[1] != in_dim:
            fail(f"utterance '{utt}': feature dim {x.shape[1]} != model input dim {in_dim} "
                 "(features of another kind, or other --cmvn-opts/--delta-opts?)", feats.feats_scp)
        if x.shape[0] != len(ref):
            log.warning("utterance %s: %d frames but %d in the alignment: skipped", utt, x.shape[0], len(ref))
            st.skipped.append(utt)
            continue
        with torch.no_grad():
            xt = model.transform(torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)).to(device))
        logits = model(xt)
        with torch.no_grad():
            loglikes = (torch.log_softmax(logits, 1) - log_priors).double().cpu().numpy()
        try:
            rescored = rescore_acoustics(lat, loglikes, tables.pdf)
            if cfg.criterion == "mmi":
                out = mmi_posteriors(rescored, ref, tables, acoustic_scale=cfg.acoustic_scale, lm_scale=cfg.lm_scale,
                                     drop_frames=cfg.drop_frames, loglikes=loglikes, num_pdfs=num_pdfs)
            else:
                out = mpe_posteriors(rescored, ref, tables, sil, criterion=cfg.criterion,
                                     one_silence_class=cfg.one_silence_class, acoustic_scale=cfg.acoustic_scale,
                                     lm_scale=cfg.lm_scale, num_pdfs=num_pdfs)
        except PynnetError as e:   # a lattice that does not fit the utterance: Kaldi skips it too
            out, why = None, str(e)
        else:
            why = "empty lattice (no path)"
        if out is None:
            log.warning("utterance %s: %s: skipped", utt, why)
            st.skipped.append(utt)
            continue
        if cfg.criterion == "mmi":
            loss_grad, mmi = out            # (den - num posteriors: the loss derivative already)
            objective = mmi.objective
        else:
            derivs, objective = out         # d E[acc] / d scaled log-likelihood: maximised
            loss_grad = -derivs
        logits.backward(torch.from_numpy(np.asarray(loss_grad, dtype=np.float32)).to(device))
        opt.step(cfg.learn_rate)
        st.utterances += 1
        st.frames += x.shape[0]
        st.objective += float(objective)
        if on_utterance is not None:
            on_utterance(st)
    opt.detach()
    st.seconds = time.time() - t0
    return st
