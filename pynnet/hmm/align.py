"""Viterbi alignment of utterances to their training graphs (Kaldi's gmm-align-compiled).

The GMM log-likelihoods come from kaldi-hmm-gmm's DecodableAmDiagGmmScaled and the search from
its AlignUtteranceWrapper (beam, then the retry beam); utterances that fail even with the retry
beam are reported, counted and left out -- never silently.
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
    """Align utterances with one model (``trans_model`` + kaldi-hmm-gmm ``AmDiagGmm``)."""

    def __init__(self, trans_model, am_khg, opts: AlignOptions | None = None):
        self.tm = trans_model
        self.am = am_khg
        self.opts = opts or AlignOptions()
        self.stats = AlignStats()
        self.dim = am_khg.dim

    def align(self, utt: str, graph, feats: np.ndarray) -> np.ndarray | None:
        """Transition ids per frame, or None (logged in ``stats.failed``) if alignment failed.
        ``graph`` is modified (transition probabilities added): pass a copy to reuse it."""
        import kaldi_hmm_gmm as khg

        o = self.opts
        if feats.shape[1] != self.dim:
            raise PynnetError(f"utterance '{utt}': feature dimension {feats.shape[1]} does not match "
                              f"the model's {self.dim} (different --cmvn-opts/--delta-order, or features?)")
        khg.add_transition_probs(trans_model=self.tm, transition_scale=o.transition_scale,
                                 self_loop_scale=o.self_loop_scale, fst=graph)
        dec = khg.DecodableAmDiagGmmScaled(am=self.am, tm=self.tm,
                                           feats=np.ascontiguousarray(feats, dtype=np.float32),
                                           scale=o.acoustic_scale)
        cfg = khg.AlignConfig(beam=o.beam, retry_beam=o.retry_beam, careful=o.careful)
        s = self.stats
        done, err, retried, tot, frames, ali, _words = khg.align_utterance_wrapper(
            config=cfg, utt=utt, acoustic_scale=o.acoustic_scale, fst=graph, decodable=dec,
            num_done=0, num_error=0, num_retried=0, tot_like=0.0, frame_count=0)
        s.retried += retried
        if done and len(ali) == feats.shape[0]:
            s.done += 1
            s.tot_like += tot  # the wrapper already divides by the acoustic scale
            s.frames += frames
            return np.asarray(ali, dtype=np.int32)
        s.failed.append(utt)
        return None
