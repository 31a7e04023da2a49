"""Lattice-generating decoding over HCLG for GMM and matrix (DNN) log-likelihoods.

Both paths end in one place, :func:`decode_loglikes`: a [frames, num_pdfs] matrix of log-likelihoods
is expanded to transition-ids (column tid-1 = pdf of tid, the layout kaldi_decoder's DecodableCtc
reads: index i -> column i-1), scaled by the acoustic scale and decoded by kaldi_decoder's
LatticeSimpleDecoder, the one decoder whose Python binding returns the raw (state-level) lattice.
The lattice is returned with the acoustic scale removed, as latgen-faster writes it, so
LM-weight x insertion-penalty scoring can run on it afterwards (pynnet.decode.lattice.best_paths).

GMM log-likelihoods are computed for all pdfs at once with one matrix product
(:class:`GmmScorer`), the same values DecodableAmDiagGmmScaled computes pdf by pdf.
"""
from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass, field
from typing import Iterable, Iterator

import numpy as np

from pynnet.io.errors import fail


@dataclass
class DecodeConfig:
    """Options of latgen-faster(-mapped).  LatticeSimpleDecoder prunes by beam only;
    ``max_active``/``min_active`` act through ``adaptive_beam`` (see docs/notes/decode.md)."""
    beam: float = 13.0
    lattice_beam: float = 6.0
    max_active: int = 7000
    min_active: int = 200
    prune_interval: int = 25
    allow_partial: bool = True
    # LatticeSimpleDecoder has no max-active.  With adaptive_beam, a max-active best-path search
    # (kaldi_decoder.FasterDecoder, beam + max_active as Kaldi's) runs first, then the lattice
    # search uses the smallest beam in lattice_beam+2, +4, ..., beam whose best path is at least
    # as good as that one's: no worse 1-best than Kaldi's max-active search, at a fraction of the
    # cost of a full-beam search.  False: one lattice search with the full beam.
    adaptive_beam: bool = True


@dataclass
class DecodeResult:
    ok: bool                      # a path was found
    partial: bool                 # no final state was reached (best partial path, allow_partial)
    words: list[int] = field(default_factory=list)
    alignment: list[int] = field(default_factory=list)   # transition-ids per frame
    likelihood: float = 0.0       # -(graph + acwt*acoustic) of the best path, as Kaldi logs it
    lattice_text: str = ""        # the raw lattice, AT&T text, acoustic costs unscaled
    num_frames: int = 0
    beam: float = 0.0             # the beam of the lattice search whose result this is (adaptive_beam)
    _lattice: object = None

    @property
    def lattice(self):
        """The raw lattice as a pynnet.decode.lattice.Lattice (parsed on first use)."""
        if self._lattice is None and self.lattice_text:
            from pynnet.decode.lattice import from_fst_text
            self._lattice = from_fst_text(self.lattice_text)
        return self._lattice

    def kaldi_lattice_entry(self, key: str) -> str:
        """This utterance's lattice as a Kaldi text-ark entry (what lat.JOB.gz holds)."""
        from pynnet.decode.lattice import kaldi_text_entry
        return kaldi_text_entry(key, self.lattice_text)


def _import_khg():
    # kaldi_hmm_gmm must be imported before kaldifst (the other order hangs).
    import kaldi_hmm_gmm  # noqa: F401
    import kaldifst
    import kaldi_decoder
    return kaldifst, kaldi_decoder


def read_hclg(path: str | os.PathLike):
    """Read HCLG.fst (OpenFst binary, vector or const type)."""
    kaldifst, _ = _import_khg()
    path = os.fspath(path)
    if not os.path.isfile(path):
        fail("no such file", path)
    errors = []
    for cls in (kaldifst.StdVectorFst, kaldifst.StdConstFst):
        try:
            fst = cls.read(path)
            if fst is not None and fst.num_states > 0:
                return fst
            errors.append("empty FST")
        except Exception as e:  # kaldifst raises RuntimeError with OpenFst's message
            errors.append(str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__)
    fail(f"cannot read as an OpenFst graph ({'; '.join(errors)})", path)


def tid2pdf(trans_model) -> np.ndarray:
    """Array indexed by transition-id (0 unused) giving its pdf id."""
    arr = np.asarray(trans_model.transition_id_to_pdf_array(), dtype=np.int64)
    if arr.size != trans_model.num_transition_ids + 1:
        fail("transition model has an unexpected transition-id table")
    return arr


def decode_loglikes(hclg, trans_model, loglikes: np.ndarray, acoustic_scale: float = 0.1,
                    config: DecodeConfig | None = None, *, utt: str = "",
                    tid2pdf_map: np.ndarray | None = None) -> DecodeResult:
    """Decode a [frames, num_pdfs] matrix of (pseudo) log-likelihoods over ``hclg``.

    ``loglikes[t, p]`` is log p(x_t | pdf p) (GMM) or log posterior - log prior (DNN).
    Returns words, the per-frame transition-id alignment, the likelihood and the raw lattice.
    """
    kaldifst, kd = _import_khg()

    cfg = config or DecodeConfig()
    m = tid2pdf(trans_model) if tid2pdf_map is None else tid2pdf_map
    num_pdfs = int(trans_model.num_pdfs)
    loglikes = np.asarray(loglikes)
    if loglikes.ndim != 2:
        fail(f"utterance '{utt}': log-likelihoods must be a matrix, got shape {loglikes.shape}")
    if loglikes.shape[1] != num_pdfs:
        fail(f"utterance '{utt}': log-likelihood matrix has {loglikes.shape[1]} columns but the "
             f"model has {num_pdfs} pdfs (wrong model or wrong network output?)")
    T = loglikes.shape[0]
    if T == 0:
        return DecodeResult(False, False)
    if not np.all(np.isfinite(loglikes)):
        fail(f"utterance '{utt}': log-likelihoods contain NaN or infinity")
    mat = np.ascontiguousarray(acoustic_scale * loglikes[:, m[1:]], dtype=np.float32)
    decodable = kd.DecodableCtc(mat)
    beams = [cfg.beam]
    target = None
    if cfg.adaptive_beam and 0 < cfg.max_active < 2**31 - 1 and cfg.beam > cfg.lattice_beam + 2:
        fast = kd.FasterDecoder(hclg, kd.FasterDecoderOptions(beam=cfg.beam, max_active=cfg.max_active,
                                                               min_active=cfg.min_active))
        fast.decode(decodable)
        # Only a complete path is a target: with no final state reached, FasterDecoder's best
        # path is a partial one (final costs ignored) that is cheaper than any complete path, and
        # a narrow-beam lattice search that also lost the final states would match it.
        ok_fast, fbest = fast.get_best_path(True)
        if ok_fast and fbest.num_states > 0 and fast.reached_final():
            target = _path_cost(kaldifst, fbest)
            beams = [b for b in np.arange(cfg.lattice_beam + 2.0, cfg.beam, 2.0)] + [cfg.beam]
    for beam in beams:
        dcfg = kd.LatticeSimpleDecoderConfig(beam=float(beam), lattice_beam=cfg.lattice_beam,
                                              prune_interval=cfg.prune_interval)
        decoder = kd.LatticeSimpleDecoder(hclg, dcfg)
        decoder.decode(decodable)
        if beam == beams[-1] or decoder.num_frames_decoded() != T:
            break
        if not np.isfinite(decoder.final_relative_cost()):
            continue  # this beam lost every final state: widen it
        ok_b, b_best = decoder.get_best_path(True)
        if ok_b and b_best.num_states > 0 and _path_cost(kaldifst, b_best) <= target + 1e-4 * (1 + abs(target)):
            break
    if decoder.num_frames_decoded() != T:
        return DecodeResult(False, False, num_frames=T)
    # As Kaldi's DecodeUtteranceLatticeFaster: no final state reached -> partial output (from all
    # active tokens; the decoder treats them all as final) only if allowed.
    reached_final = np.isfinite(decoder.final_relative_cost())
    if not reached_final and not cfg.allow_partial:
        return DecodeResult(False, True, num_frames=T)
    ok, best = decoder.get_best_path(True)
    if not ok or best.num_states == 0:
        return DecodeResult(False, not reached_final, num_frames=T)
    ali, words, weight = _linear(kaldifst, best)
    ok_lat, raw = decoder.get_raw_lattice(True)
    text = ""
    if ok_lat and raw.num_states > 0:
        # Undo the acoustic scale in C++ (latgen-faster writes unscaled lattices), print in C++.
        kaldifst.scale_lattice(kaldifst.lattice_scale(1.0, 1.0 / acoustic_scale), raw)
        text = raw.to_str()
    like = -(weight[0] + weight[1])
    return DecodeResult(True, not reached_final, words, ali, like, text, T, float(beam))


def _path_cost(kaldifst, best) -> float:
    _, _, w = _linear(kaldifst, best)
    return w[0] + w[1]


def _linear(kaldifst, best) -> tuple[list[int], list[int], tuple[float, float]]:
    r = kaldifst.get_linear_symbol_sequence(best)
    # (ok, isymbols, osymbols, LatticeWeight) in kaldifst's binding
    if len(r) == 4:
        _, ali, words, w = r
    else:  # pragma: no cover - older binding shape
        ali, words, w = r
    return list(ali), list(words), (float(w.value1), float(w.value2))


class GmmScorer:
    """Log-likelihoods of all pdfs of an AmDiagGmm for a feature matrix, vectorised:
    log sum_m exp(gconst_m + x.(mu_m/var_m) - 0.5 x^2.(1/var_m))."""

    def __init__(self, am_gmm):
        gconsts, mi, iv, owner = [], [], [], []
        self.num_pdfs = int(am_gmm.num_pdfs)
        self.dim = int(am_gmm.dim)
        for p in range(self.num_pdfs):
            g = am_gmm.get_pdf(p)
            gconsts.append(np.asarray(g.gconsts, np.float64).reshape(-1))
            mi.append(np.asarray(g.means_invvars, np.float64).reshape(-1, self.dim))
            iv.append(np.asarray(g.inv_vars, np.float64).reshape(-1, self.dim))
            owner.append(np.full(gconsts[-1].size, p))
        gc = np.concatenate(gconsts)
        # [1 | x | x^2] @ W gives every Gaussian's log-likelihood (weight included in gconst).
        self.W = np.concatenate([gc[None, :], np.concatenate(mi).T, -0.5 * np.concatenate(iv).T])
        self.owner = np.concatenate(owner)
        self.starts = np.flatnonzero(np.diff(np.concatenate(([-1], self.owner)))).astype(np.int64)
        if not np.all(np.isfinite(gc)):
            fail("acoustic model has invalid Gaussians (non-finite gconsts)")

    def loglikes(self, feats: np.ndarray) -> np.ndarray:
        x = np.asarray(feats, np.float64)
        if x.ndim != 2 or x.shape[1] != self.dim:
            fail(f"feature dimension {x.shape[-1] if x.ndim else '?'} does not match the model "
                 f"dimension {self.dim} (check cmvn_opts/delta_opts/splicing)")
        X = np.concatenate([np.ones((x.shape[0], 1)), x, x * x], axis=1)
        comp = X @ self.W                                    # [T, total Gaussians]
        mx = np.maximum.reduceat(comp, self.starts, axis=1)  # [T, pdfs]
        s = np.add.reduceat(np.exp(comp - np.repeat(mx, np.diff(np.append(self.starts, comp.shape[1])), axis=1)),
                            self.starts, axis=1)
        return (mx + np.log(s)).astype(np.float32)


def decode_gmm(hclg, trans_model, am_gmm, feats: np.ndarray, acoustic_scale: float = 0.083333,
               config: DecodeConfig | None = None, *, utt: str = "", scorer: GmmScorer | None = None,
               tid2pdf_map: np.ndarray | None = None) -> DecodeResult:
    """GMM decode (gmm-latgen-faster): GMM log-likelihoods for all pdfs, then decode_loglikes."""
    scorer = scorer or GmmScorer(am_gmm)
    return decode_loglikes(hclg, trans_model, scorer.loglikes(feats), acoustic_scale, config,
                           utt=utt, tid2pdf_map=tid2pdf_map)


_WORKER_DECODE = None   # the decode function forked worker processes call (set before the fork)


def _init_worker() -> None:
    # SIGTERM (the pool's terminate() when the job is stopped) kills a worker at once, even inside
    # a decode: a Python-level handler inherited from the parent would run only after it.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _decode_in_worker(utt: str, x: np.ndarray):
    c0 = time.process_time()
    res = _WORKER_DECODE(utt, x)
    return res, time.process_time() - c0


def _stop_pool(pool) -> None:
    """Stop a ProcessPoolExecutor now (an exception is unwinding: SIGTERM, an error): queued
    decodes cancelled, running ones killed, the workers joined (no processes left behind)."""
    procs = list((getattr(pool, "_processes", None) or {}).values())   # (shutdown forgets them)
    pool.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        p.terminate()
    for p in procs:
        p.join(5.0)
        if p.is_alive():
            p.kill()
            p.join()


def decode_utterances(items: Iterable[tuple[str, np.ndarray]], decode_one, num_workers: int = 1,
                      worker_cpu: list[float] | None = None) -> Iterator[tuple[str, "DecodeResult"]]:
    """``(utt, decode_one(utt, x))`` for each ``(utt, x)``, in input order (Kaldi's
    latgen-faster-parallel --num-threads).  With ``num_workers`` > 1 the utterances are decoded by
    that many forked processes (kaldi-hmm-gmm holds the GIL, so threads would not run in
    parallel); the graph and model are shared with them copy-on-write, and at most two
    utterances per worker are in flight, so memory stays bounded for any input.  An error in a
    worker (a PynnetError from ``decode_one``) is raised here.  When the caller stops early or an
    exception (SIGTERM's Terminated among them) unwinds through here, running decodes are
    killed, not waited for.  ``worker_cpu``: the CPU seconds of each decode done in a worker
    process are appended to it (this process's own CPU time does not include them)."""
    if num_workers <= 1:
        for utt, x in items:
            yield utt, decode_one(utt, x)
        return
    import multiprocessing
    from collections import deque
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    global _WORKER_DECODE
    _WORKER_DECODE = decode_one
    pool = ProcessPoolExecutor(num_workers, mp_context=multiprocessing.get_context("fork"),
                               initializer=_init_worker)
    pending: deque = deque()

    def result(fut):
        res, cpu = fut.result()
        if worker_cpu is not None:
            worker_cpu.append(cpu)
        return res

    finished = False
    try:
        for utt, x in items:
            pending.append((utt, pool.submit(_decode_in_worker, utt, x)))
            if len(pending) >= 2 * num_workers:
                done, fut = pending.popleft()
                yield done, result(fut)
        while pending:
            done, fut = pending.popleft()
            yield done, result(fut)
        finished = True
    except BrokenProcessPool:
        fail(f"a decoding process died (killed, or out of memory?) at or after utterance "
             f"'{pending[0][0] if pending else '?'}'")
    finally:
        if finished:
            pool.shutdown(wait=True)
        else:
            _stop_pool(pool)
        _WORKER_DECODE = None


__all__ = ["DecodeConfig", "DecodeResult", "GmmScorer", "decode_gmm", "decode_loglikes", "decode_utterances",
           "read_hclg", "tid2pdf"]
