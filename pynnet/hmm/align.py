"""Viterbi alignment of utterances to their training graphs (Kaldi's gmm-align-compiled and
align-compiled-mapped).

The search is kaldi-hmm-gmm's AlignUtteranceWrapper (beam, then the retry beam) over a decodable:
GMM log-likelihoods from its DecodableAmDiagGmmScaled (:meth:`Aligner.align`), or a matrix of
log-likelihoods per pdf -- a DNN's log posterior - log prior -- mapped to transition-ids and read by
its DecodableCtc (:meth:`Aligner.align_loglikes`, Kaldi's DecodableMatrixScaledMapped).
Utterances that fail even with the retry beam are reported, counted and left out -- never silently.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pynnet.io.errors import PynnetError

__all__ = ["AlignOptions", "AlignStats", "Aligner"]


@dataclass
class AlignOptions:
    beam: float = 10.0
    retry_beam: float = 40.0
    careful: bool = False
    acoustic_scale: float = 0.1
    transition_scale: float = 1.0
    self_loop_scale: float = 0.1


@dataclass
class AlignStats:
    done: int = 0
    retried: int = 0
    failed: list[str] = field(default_factory=list)
    tot_like: float = 0.0
    frames: int = 0

    def summary(self) -> str:
        per = self.tot_like / self.frames if self.frames else float("nan")
        return (f"Done {self.done}, errors on {len(self.failed)} (retried {self.retried}); "
                f"overall log-likelihood per frame is {per:.4f} over {self.frames} frames")


class Aligner:
    """Align utterances with one model: ``trans_model`` and, for :meth:`align` (features), a
    kaldi-hmm-gmm ``AmDiagGmm``; :meth:`align_loglikes` needs only the transition model."""

    def __init__(self, trans_model, am_khg=None, opts: AlignOptions | None = None):
        self.tm = trans_model
        self.am = am_khg
        self.opts = opts or AlignOptions()
        self.stats = AlignStats()
        self.dim = am_khg.dim if am_khg is not None else None
        self._tid2pdf = None

    def align(self, utt: str, graph, feats: np.ndarray) -> np.ndarray | None:
        """Transition ids per frame, or None (logged in ``stats.failed``) if alignment failed.
        ``graph`` is modified (transition probabilities added): pass a copy to reuse it."""
        import kaldi_hmm_gmm as khg

        if self.am is None:
            raise PynnetError("Aligner.align needs a GMM (am_khg); use align_loglikes for log-likelihoods")
        if feats.shape[1] != self.dim:
            raise PynnetError(f"utterance '{utt}': feature dimension {feats.shape[1]} does not match "
                              f"the model's {self.dim} (different --cmvn-opts/--delta-order, or features?)")
        dec = khg.DecodableAmDiagGmmScaled(am=self.am, tm=self.tm,
                                           feats=np.ascontiguousarray(feats, dtype=np.float32),
                                           scale=self.opts.acoustic_scale)
        return self._align(utt, graph, dec, feats.shape[0])

    def align_loglikes(self, utt: str, graph, loglikes: np.ndarray) -> np.ndarray | None:
        """As :meth:`align`, from a [frames, num_pdfs] matrix of log-likelihoods (a DNN's
        pseudo-log-likelihoods), scaled by the acoustic scale (Kaldi's align-compiled-mapped)."""
        import kaldi_hmm_gmm as khg

        x = np.asarray(loglikes)
        if x.size == 0:     # (Kaldi writes an empty matrix as 0 x 0: no columns to check)
            self.stats.failed.append(utt)
            return None
        num_pdfs = int(self.tm.num_pdfs)
        if x.ndim != 2 or x.shape[1] != num_pdfs:
            raise PynnetError(f"utterance '{utt}': log-likelihoods have {x.shape[-1] if x.ndim else '?'} "
                              f"columns but the model has {num_pdfs} pdfs (wrong model or wrong network?)")
        if not np.all(np.isfinite(x)):
            raise PynnetError(f"utterance '{utt}': log-likelihoods contain NaN or infinity")
        if self._tid2pdf is None:
            self._tid2pdf = np.asarray(self.tm.transition_id_to_pdf_array(), dtype=np.int64)
        # DecodableCtc reads transition-id i from column i-1: expand pdfs to transition-ids
        mat = np.ascontiguousarray(self.opts.acoustic_scale * x[:, self._tid2pdf[1:]], dtype=np.float32)
        return self._align(utt, graph, khg.DecodableCtc(mat), x.shape[0])

    def _align(self, utt: str, graph, decodable, num_frames: int) -> np.ndarray | None:
        import kaldi_hmm_gmm as khg

        o = self.opts
        s = self.stats
        if num_frames == 0:
            s.failed.append(utt)
            return None
        khg.add_transition_probs(trans_model=self.tm, transition_scale=o.transition_scale,
                                 self_loop_scale=o.self_loop_scale, fst=graph)
        cfg = khg.AlignConfig(beam=o.beam, retry_beam=o.retry_beam, careful=o.careful)
        done, err, retried, tot, frames, ali, _words = khg.align_utterance_wrapper(
            config=cfg, utt=utt, acoustic_scale=o.acoustic_scale, fst=graph, decodable=decodable,
            num_done=0, num_error=0, num_retried=0, tot_like=0.0, frame_count=0)
        s.retried += retried
        if done and len(ali) == num_frames:
            s.done += 1
            s.tot_like += tot  # the wrapper already divides by the acoustic scale
            s.frames += frames
            return np.asarray(ali, dtype=np.int32)
        s.failed.append(utt)
        return None
