"""Model sizes for a recipe, scaled to the amount of training data (egs/custom).

Fixed sizes fail at both ends: egs/synth's trees (sized for its 1 h) overfit 15 minutes of real
speech (the triphones came out worse than the monophone), and Kaldi's Switchboard sizes would be
absurd for either.  The rule here is a power law in hours anchored at two known-good points:

* 1 h: egs/synth's tuned sizes (tri1 300 leaves / 2000 Gaussians, tri2 500 / 3000, DNN 4 x 512,
  3 RBM epochs: egs/synth/RESULTS);
* 110 h: Kaldi's egs/swbd/s5c on train_100k_nodup (tri1 3200 / 30000, tri2 4000 / 70000; nnet1's
  6 x 2048 DNN, 1 RBM epoch).

The LDA+MLLT and SAT systems are anchored at 1 h on egs/synth's sizes (tri3 500 / 3000, tri4
500 / 3000) and at 286 h on s5c's, trained on train_nodup (tri3 6000 / 140000, tri4 11500 / 200000).
tri2's and tri3's trees have at least tri1's leaves and tri4's at least tri3's (its law alone gives
fewer below 1 h).  Above 1 h tri3's law runs just below tri2's (6000 vs 6100 leaves at 286 h):
about the same tree, with more Gaussians.

Below 1 h the law is extrapolated, with at least ``MIN_FRAMES_PER_GAUSSIAN`` frames of
training data per Gaussian (a Gaussian needs data to estimate 2 x 39 parameters), except that a
tree never has fewer than 3 leaves per phone (+20) nor fewer than 2 Gaussians per leaf: below
about 5 minutes the tree floor wins.  Measured on subsets of egs/synth: docs/notes/gmm.md.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from pynnet.io.errors import fail

FRAMES_PER_HOUR = 360000          # 10 ms frames
MIN_FRAMES_PER_GAUSSIAN = 100
MIN_GAUSSIANS_PER_LEAF = 2        # below this a triphone system is a monophone with more pdfs
S5C_TRI_HOURS = 110.0             # s5c's train_100k_nodup (tri1, tri2)
S5C_NODUP_HOURS = 286.0           # s5c's train_nodup (tri3, tri4)


@dataclass(frozen=True)
class RecipeSizes:
    mono_gauss: int
    tri1_leaves: int
    tri1_gauss: int
    tri2_leaves: int
    tri2_gauss: int
    tri3_leaves: int
    tri3_gauss: int
    tri4_leaves: int
    tri4_gauss: int
    dnn_depth: int
    dnn_hid_dim: int
    rbm_iter: int
    nj: int

    def shell(self) -> str:
        """``name=value`` lines for a recipe to ``eval``."""
        return "".join(f"{k}={v}\n" for k, v in asdict(self).items())


def _power(anchor_1h: float, anchor_big: float, hours: float, big_hours: float = S5C_TRI_HOURS) -> float:
    """The power law through (1 h, anchor_1h) and (big_hours, anchor_big), evaluated at ``hours``."""
    exponent = math.log(anchor_big / anchor_1h) / math.log(big_hours)
    return anchor_1h * hours ** exponent


def _gaussians(anchor_1h: float, anchor_big: float, hours: float, leaves: int,
               big_hours: float = S5C_TRI_HOURS) -> int:
    by_data = hours * FRAMES_PER_HOUR / MIN_FRAMES_PER_GAUSSIAN
    g = min(_power(anchor_1h, anchor_big, hours, big_hours), by_data)
    return max(int(round(g, -1 if g < 10000 else -2)), MIN_GAUSSIANS_PER_LEAF * leaves)


def _leaves(anchor_1h: float, anchor_big: float, hours: float, floor: int,
            big_hours: float = S5C_TRI_HOURS) -> int:
    return max(int(round(_power(anchor_1h, anchor_big, hours, big_hours), -1)), floor)


def recipe_sizes(hours: float, speakers: int, max_jobs: int, num_phones: int = 40) -> RecipeSizes:
    """Sizes for ``hours`` of training audio from ``speakers`` speakers; ``max_jobs`` caps the
    number of parallel jobs, which cannot exceed the speakers (Kaldi splits data dirs by speaker).
    ``num_phones`` (non-silence phones) sets the smallest tree worth building: a few leaves per
    phone, else the triphone system has fewer pdfs than the monophone's 3 per phone."""
    if not hours > 0:
        fail(f"the training data must have a positive duration, not {hours} h")
    if speakers < 1 or max_jobs < 1:
        fail("speakers and the number of jobs must be at least 1")
    floor1 = 3 * num_phones + 20
    tri1_leaves = _leaves(300, 3200, hours, floor1)
    tri2_leaves = _leaves(500, 4000, hours, max(floor1, tri1_leaves))
    tri3_leaves = _leaves(500, 6000, hours, max(floor1, tri1_leaves), S5C_NODUP_HOURS)   # LDA+MLLT
    tri4_leaves = _leaves(500, 11500, hours, tri3_leaves, S5C_NODUP_HOURS)              # SAT
    mono_gauss = int(round(min(1000.0, hours * FRAMES_PER_HOUR / MIN_FRAMES_PER_GAUSSIAN / 1.5), -1))
    mono_gauss = max(mono_gauss, 3 * num_phones + 10)
    # DNN: width ~ hours^0.3 (512 at 1 h, 2048 at 110 h) in multiples of 128; deeper with data
    hid = _power(512, 2048, hours)
    hid_dim = int(min(2048, max(128, 128 * round(hid / 128))))
    depth = 4 if hours < 10 else 5 if hours < 50 else 6
    # RBM epochs: nnet1's 1 is for hundreds of hours; on 1 h 3 were better (docs/notes/nnet.md)
    rbm_iter = 3 if hours < 10 else 2 if hours < 50 else 1
    return RecipeSizes(mono_gauss=mono_gauss,
                       tri1_leaves=tri1_leaves, tri1_gauss=_gaussians(2000, 30000, hours, tri1_leaves),
                       tri2_leaves=tri2_leaves, tri2_gauss=_gaussians(3000, 70000, hours, tri2_leaves),
                       tri3_leaves=tri3_leaves,
                       tri3_gauss=_gaussians(3000, 140000, hours, tri3_leaves, S5C_NODUP_HOURS),
                       tri4_leaves=tri4_leaves,
                       tri4_gauss=_gaussians(3000, 200000, hours, tri4_leaves, S5C_NODUP_HOURS),
                       dnn_depth=depth, dnn_hid_dim=hid_dim, rbm_iter=rbm_iter,
                       nj=max(1, min(max_jobs, speakers)))
