"""Frame pipeline for DNN training: (features, pdf targets) per utterance -> shuffled minibatches.

* Targets: Kaldi ``ali.*.gz`` (transition ids) mapped to pdf ids through the alignment dir's
  ``final.mdl`` (``ali-to-pdf``); utterances without an alignment (or whose length does not match
  the features) are counted and skipped with a message.
* Features: read lazily per utterance from ``feats.scp`` (kaldiio), optional per-speaker mean
  normalisation from ``cmvn.scp`` (``apply-cmvn``, norm_vars false) and deltas (``add-deltas``),
  then the model's transform (splice +-5, global CMVN) -- so memory is bounded for any corpus.
* Randomisation (nnet1's frame randomizer): each epoch the training utterances are put in a
  seeded random order and cut into consecutive chunks of about ``buffer_frames`` (32768) frames;
  a chunk's frames are shuffled with a generator seeded by (seed, epoch, chunk) and cut into
  minibatches. A position is therefore just (epoch, chunk, minibatch): exact resume needs no
  buffered data.
* Double buffering: a background thread loads and transforms chunk k+1 while chunk k trains; at
  most two chunk buffers exist at any time.
"""
from __future__ import annotations

import os
import queue
import sys
import threading
from dataclasses import dataclass, field
from typing import Iterator

import numpy as np
import torch

from pynnet.feat.tables import kaldiio_error
from pynnet.io.errors import PynnetError, fail
from pynnet.io.progress import progress_kwargs
from pynnet.io.tables import read_table_lines


_log_rank = 0


def set_log_rank(rank: int, label: int | None = None) -> None:
    """K workers: rank 0 logs everything; the others only their warnings, marked with the rank
    (one log for the job, not K copies of it). ``label``: the rank named in the marks (an elastic
    job that lost ranks: the job rank, where ``rank`` is the place among the survivors)."""
    global _log_rank, _log_label
    _log_rank, _log_label = rank, rank if label is None else label


_log_label = 0


def log(msg: str) -> None:
    if _log_rank:
        if not msg.startswith("WARNING"):
            return
        msg = f"rank {_log_label}: {msg}"
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- targets
def read_pdf_alignments(ali_dir: str) -> tuple[dict[str, np.ndarray], int]:
    """``ali_dir/ali.*.gz`` + ``ali_dir/final.mdl`` -> ({utt: int32 pdf ids}, num_pdfs)."""
    from pynnet.hmm.ali_io import TransitionTables, read_alignments_by_file
    from pynnet.hmm.model_io import read_transition_model

    mdl = os.path.join(ali_dir, "final.mdl")
    tm = read_transition_model(mdl)   # a GMM's or an nnet's final.mdl
    tables = TransitionTables.from_model(tm)
    # int16 halves the memory of a large corpus's targets; one file's transition ids at a time
    dtype = np.int16 if tm.num_pdfs < 32767 else np.int32
    out = {}
    for _, part in read_alignments_by_file(ali_dir):
        for utt, tids in part.items():
            try:
                tables.check(tids, f"utterance '{utt}'")
            except PynnetError as e:
                fail(f"{e} (model {mdl})", ali_dir)
            out[utt] = tables.pdf[tids].astype(dtype)
    return out, int(tm.num_pdfs)


# ---------------------------------------------------------------- base features
def add_deltas(feats: np.ndarray, order: int, window: int = 2) -> np.ndarray:
    """Kaldi add-deltas: [x, d x, d^2 x ...] with the regression window, edges replicated."""
    if order == 0:
        return feats
    T = feats.shape[0]
    scales = [np.array([1.0])]
    base = np.arange(-window, window + 1, dtype=np.float64)
    base /= (base ** 2).sum()
    for _ in range(order):
        scales.append(np.convolve(scales[-1], base))
    out = [feats]
    for s in scales[1:]:
        half = (len(s) - 1) // 2
        acc = np.zeros_like(feats, dtype=np.float64)
        for j, c in enumerate(s):
            if c != 0.0:
                acc += c * feats[np.clip(np.arange(T) + j - half, 0, T - 1)]
        out.append(acc.astype(feats.dtype))
    return np.concatenate(out, axis=1)


def read_cmvn_scp(path: str) -> dict[str, tuple[str, int]]:
    """cmvn.scp -> {speaker: (rxfilename, line)} for ``speaker_mean``."""
    return {k: (v, n) for n, k, v in read_table_lines(path)}


def speaker_mean(cmvn: dict[str, tuple[str, int]], spk: str, path: str) -> np.ndarray:
    """The mean of a speaker's Kaldi CMVN stats (``apply-cmvn --norm-vars=false``); unreadable or
    malformed stats are a one-line error naming the scp ``path`` and line."""
    import kaldiio

    if spk not in cmvn:
        fail(f"no CMVN stats for speaker '{spk}'", path)
    rx, line = cmvn[spk]
    try:
        st = np.asarray(kaldiio.load_mat(rx), dtype=np.float64)
    except Exception as e:  # noqa: BLE001 - kaldiio raises anything from struct.error to AssertionError
        fail(f"cannot read the CMVN stats of speaker '{spk}': {type(e).__name__}: {kaldiio_error(e)}", path, line)
    if st.ndim != 2 or st.shape[0] != 2 or not st[0, -1] > 0:
        fail(f"speaker '{spk}': not Kaldi CMVN stats (2 x dim+1 with a positive count)", path, line)
    return st[0, :-1] / st[0, -1]


class FeatureReader:
    """Reads one utterance's base features (lazily, from feats.scp) with the input pipeline applied."""

    def __init__(self, data_dir: str, apply_cmvn: bool = False, delta_order: int = 0):
        import kaldiio

        self.data_dir = data_dir
        self.feats_scp = os.path.join(data_dir, "feats.scp")
        self.scp: dict[str, str] = {}
        self.line: dict[str, int] = {}
        for n, key, rest in read_table_lines(self.feats_scp):
            self.scp[key] = rest
            self.line[key] = n
        self.apply_cmvn, self.delta_order = apply_cmvn, delta_order
        self.utt2spk: dict[str, str] = {}
        self.cmvn: dict[str, tuple[str, int]] = {}
        if apply_cmvn:
            for f in ("utt2spk", "cmvn.scp"):
                if not os.path.exists(os.path.join(data_dir, f)):
                    fail("needed for --apply-cmvn true (per-speaker mean normalisation)", os.path.join(data_dir, f))
            self.utt2spk = {k: v for _, k, v in read_table_lines(os.path.join(data_dir, "utt2spk"))}
            self.cmvn = read_cmvn_scp(os.path.join(data_dir, "cmvn.scp"))
        self._kaldiio = kaldiio
        self._cmvn_cache: dict[str, np.ndarray] = {}
        self.dim: int | None = None

    def _speaker_mean(self, utt: str) -> np.ndarray:
        spk = self.utt2spk.get(utt)
        if spk is None:
            fail(f"utterance '{utt}' not in utt2spk", os.path.join(self.data_dir, "utt2spk"))
        if spk not in self._cmvn_cache:
            self._cmvn_cache[spk] = speaker_mean(self.cmvn, spk, os.path.join(self.data_dir, "cmvn.scp"))
        return self._cmvn_cache[spk]

    def read(self, utt: str) -> np.ndarray:
        try:
            m = np.asarray(self._kaldiio.load_mat(self.scp[utt]), dtype=np.float32)
        except PynnetError:
            raise
        except Exception as e:  # noqa: BLE001 - a broken ark/offset is a user-data error
            fail(f"cannot read features of '{utt}': {kaldiio_error(e)}", self.feats_scp, self.line[utt])
        if m.ndim != 2:
            fail(f"features of '{utt}' are not a matrix", self.feats_scp, self.line[utt])
        if self.apply_cmvn:
            mean = self._speaker_mean(utt)
            if mean.shape[0] != m.shape[1]:
                fail(f"CMVN stats dim {mean.shape[0]} != feature dim {m.shape[1]} for '{utt}'",
                     os.path.join(self.data_dir, "cmvn.scp"))
            m = (m - mean).astype(np.float32)
        m = add_deltas(m, self.delta_order)
        if self.dim is None:
            self.dim = m.shape[1]
        elif m.shape[1] != self.dim:
            fail(f"feature dim mismatch: utterance '{utt}' has dim {m.shape[1]}, expected {self.dim}",
                 self.feats_scp, self.line[utt])
        return m


# ---------------------------------------------------------------- training set
@dataclass
class FrameSet:
    """Utterances with features and targets, and how many frames each has."""
    reader: FeatureReader
    targets: dict[str, np.ndarray]
    utts: list[str]
    frames: dict[str, int] = field(default_factory=dict)
    lengths_from: str = "alignment"   # what ``targets`` lengths come from (for messages)

    @property
    def num_frames(self) -> int:
        return sum(self.frames[u] for u in self.utts)


def load_frame_sets(data_dir: str, ali_dir: str, *, apply_cmvn: bool, delta_order: int,
                    cv_percent: float, seed: int, targets: tuple[dict, int] | None = None,
                    cv_data_dir: str | None = None, cv_ali_dir: str | None = None
                    ) -> tuple[FrameSet, FrameSet, int]:
    """Train and CV FrameSets and the number of pdfs. The CV set is held out of ``data_dir`` by
    utterance (``cv_percent`` %), or, with ``cv_data_dir`` (Kaldi nnet1's <data-cv>), is that dir's
    utterances aligned in ``cv_ali_dir`` (default ``ali_dir``), and all of ``data_dir`` trains."""
    reader = FeatureReader(data_dir, apply_cmvn, delta_order)
    pdf_ali, num_pdfs = targets if targets is not None else read_pdf_alignments(ali_dir)
    usable, frames = _aligned(reader, pdf_ali, ali_dir)
    if cv_data_dir is not None:
        cv_reader = FeatureReader(cv_data_dir, apply_cmvn, delta_order)
        cv_ali, cv_pdfs = pdf_ali, num_pdfs
        if cv_ali_dir is not None and os.path.realpath(cv_ali_dir) != os.path.realpath(ali_dir):
            cv_ali, cv_pdfs = read_pdf_alignments(cv_ali_dir)
        if cv_pdfs != num_pdfs:
            fail(f"its model has {cv_pdfs} pdfs, the training alignments' {num_pdfs}: alignments of another model?",
                 os.path.join(cv_ali_dir or ali_dir, "final.mdl"))
        cv, cv_frames = _aligned(cv_reader, cv_ali, cv_ali_dir or ali_dir)
        d_tr, d_cv = reader.read(usable[0]).shape[1], cv_reader.read(cv[0]).shape[1]
        if d_cv != d_tr:
            fail(f"the CV features have dimension {d_cv}, the training features ({reader.feats_scp}) {d_tr}",
                 cv_reader.feats_scp)
        both = set(usable) & set(cv)
        if both:
            log(f"WARNING: {len(both)} utterances are in both the training and the CV data (e.g. {min(both)})")
        return (FrameSet(reader, pdf_ali, usable, frames), FrameSet(cv_reader, cv_ali, cv, cv_frames), num_pdfs)
    rng = np.random.default_rng([seed, 7])
    order = [usable[i] for i in rng.permutation(len(usable))]
    n_cv = int(round(len(usable) * cv_percent / 100.0))
    if cv_percent > 0:
        n_cv = max(1, n_cv)
    if n_cv >= len(usable):
        fail(f"only {len(usable)} usable utterances: too few to hold out {cv_percent}% for CV", data_dir)
    cv = sorted(order[:n_cv], key=lambda u: u.encode())
    tr = sorted(order[n_cv:], key=lambda u: u.encode())
    return FrameSet(reader, pdf_ali, tr, frames), FrameSet(reader, pdf_ali, cv, frames), num_pdfs


def _aligned(reader: FeatureReader, pdf_ali: dict[str, np.ndarray], ali_dir: str) -> tuple[list[str], dict[str, int]]:
    """The reader's utterances that have an alignment (C-sorted) and their lengths."""
    utts = sorted(reader.scp, key=lambda u: u.encode())
    usable, frames = [], {}
    no_ali = 0
    for u in utts:
        a = pdf_ali.get(u)
        if a is None:
            no_ali += 1
            continue
        usable.append(u)
        frames[u] = len(a)
    if no_ali:
        log(f"load_frame_sets: {no_ali} of {len(utts)} utterances have no alignment; skipping them")
    if not usable:
        fail(f"no utterance of feats.scp has an alignment in {ali_dir}", reader.feats_scp)
    return usable, frames


def read_example(fs: FrameSet, utt: str) -> tuple[np.ndarray, np.ndarray] | None:
    """Base features and targets of one utterance, or None (with a message) if lengths differ or
    the features hold NaN/inf (one such frame would make the global CMVN, and with it every
    minibatch, NaN: training would only halve the learning rate until it gave up)."""
    m = fs.reader.read(utt)
    t = fs.targets[utt]
    if m.shape[0] != len(t):
        log(f"WARNING: utterance '{utt}': {m.shape[0]} feature frames but {len(t)} {fs.lengths_from} frames; skipping")
        return None
    if not np.isfinite(m).all():
        log(f"WARNING: utterance '{utt}': NaN or inf in its features; skipping")
        return None
    return m, t


def global_cmvn(fs: FrameSet, max_frames: int = 2_000_000, progress: bool = True,
                seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Mean and std of the base features over the training utterances; a corpus of more than
    ``max_frames`` frames is sampled, whole utterances in a seeded random order (the first ones in
    sorted order would be a few speakers)."""
    from tqdm import tqdm

    utts = fs.utts
    if fs.num_frames > max_frames:
        rng = np.random.default_rng([seed, 11])
        utts = [utts[i] for i in rng.permutation(len(utts))]
    s = s2 = None
    n = 0
    for u in tqdm(utts, desc="global CMVN", unit="utt", **progress_kwargs(progress)):
        ex = read_example(fs, u)
        if ex is None:
            continue
        m = ex[0].astype(np.float64)
        s = m.sum(0) if s is None else s + m.sum(0)
        s2 = (m * m).sum(0) if s2 is None else s2 + (m * m).sum(0)
        n += m.shape[0]
        if n >= max_frames:
            break
    if n == 0:
        fail(f"no usable training frames for the global CMVN: every utterance was skipped (its "
             f"{fs.lengths_from} length differs from its features', or NaN/inf: the warnings above)",
             fs.reader.feats_scp)
    mean = s / n
    var = np.maximum(s2 / n - mean * mean, 1e-10)
    return mean, np.sqrt(var)


def pdf_counts(fs_list: list[FrameSet], num_pdfs: int) -> np.ndarray:
    c = np.zeros(num_pdfs, dtype=np.float64)
    for fs in fs_list:
        for u in fs.utts:
            c += np.bincount(fs.targets[u], minlength=num_pdfs)[:num_pdfs]
    return c


# ---------------------------------------------------------------- chunks and minibatches
def plan_chunks(fs: FrameSet, epoch: int, seed: int, buffer_frames: int, shuffle: bool = True) -> list[list[str]]:
    """The epoch's utterance order, cut into consecutive chunks of about ``buffer_frames`` frames."""
    utts = fs.utts
    if shuffle:
        rng = np.random.default_rng([seed, epoch, 1])
        utts = [utts[i] for i in rng.permutation(len(utts))]
    chunks, cur, n = [], [], 0
    for u in utts:
        f = fs.frames[u]
        if cur and n + f > buffer_frames:
            chunks.append(cur)
            cur, n = [], 0
        cur.append(u)
        n += f
    if cur:
        chunks.append(cur)
    return chunks


@dataclass
class Chunk:
    index: int
    x: torch.Tensor        # frames x spliced dim, transformed
    y: torch.Tensor        # frames (int64 pdf ids)
    order: torch.Tensor    # frame permutation


def load_chunk(fs: FrameSet, utts: list[str], transform, index: int, perm_seed: list[int] | None) -> Chunk:
    xs, ys = [], []
    with torch.no_grad():
        for u in utts:
            ex = read_example(fs, u)
            if ex is None:
                continue
            m, t = ex
            if m.shape[1] != transform.input_dim:
                fail(f"feature dim {m.shape[1]} of utterance '{u}' != model input dim {transform.input_dim}",
                     fs.reader.feats_scp, fs.reader.line[u])
            if not m.flags.writeable:
                m = m.copy()
            xs.append(transform(torch.from_numpy(m)))
            ys.append(torch.from_numpy(t.astype(np.int64)))
    if not xs:
        x = torch.zeros(0, transform.output_dim)
        y = torch.zeros(0, dtype=torch.int64)
    else:
        x, y = torch.cat(xs), torch.cat(ys)
    if perm_seed is None:
        order = torch.arange(len(y))
    else:
        order = torch.from_numpy(np.random.default_rng(perm_seed).permutation(len(y)))
    return Chunk(index, x, y, order)


class ChunkLoader:
    """Background (double-buffered) loading of chunks[start:], at most two buffers alive."""

    def __init__(self, fs: FrameSet, chunks: list[list[str]], transform, start: int, seed_prefix: list[int] | None):
        self._q: queue.Queue = queue.Queue()
        self._slots = threading.Semaphore(2)
        self._stop = threading.Event()
        self._args = (fs, chunks, transform, start, seed_prefix)
        self._threads = torch.get_num_threads()   # (also initialises this thread's own count)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        fs, chunks, transform, start, seed_prefix = self._args
        # The loader's torch ops run on one thread. With the default, this thread got its own
        # OpenMP team of the training's size, and its spinning workers stalled the training's
        # GEMMs on the shared cores: 2 training threads were slower than 1 (docs/PERFORMANCE.md).
        # set_num_threads sets this thread's OpenMP/MKL counts (the consumer keeps its own) and
        # the process default for threads started later; close() puts that back.
        torch.set_num_threads(1)
        try:
            for k in range(start, len(chunks)):
                self._slots.acquire()
                if self._stop.is_set():
                    return
                seed = None if seed_prefix is None else seed_prefix + [k]
                self._q.put(load_chunk(fs, chunks[k], transform, k, seed))
            self._q.put(None)
        except BaseException as e:  # noqa: BLE001 - handed to the consumer, re-raised there
            self._q.put(e)

    def __iter__(self) -> Iterator[Chunk]:
        while True:
            item = self._q.get()
            if item is None:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
            del item
            self._slots.release()  # the consumer is done with the previous buffer

    def close(self) -> None:
        self._stop.set()
        self._slots.release()
        self._slots.release()
        # (after the thread is gone, so its set_num_threads(1) cannot land after this one; it
        # finishes at most the chunk it is reading)
        self._thread.join(timeout=30)
        torch.set_num_threads(self._threads)
