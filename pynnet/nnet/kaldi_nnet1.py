"""Kaldi nnet1 feature transforms (``final.feature_transform``): <Splice>, <AddShift>, <Rescale>.

Kaldi's nnet1 recipes pass a DBN directory's ``final.feature_transform`` to steps/nnet/train.sh
(``--feature-transform``); pynnet's models hold the same transform (splice +-N, then (x + shift)
* scale per spliced dimension: :class:`pynnet.nnet.model.FeatureTransform`).  This module writes
it in nnet1's format (text, which Kaldi's nnet-forward / nnet-info read) and reads nnet1
transforms of that shape, text or binary, whoever wrote them.  Other nnet1 components (a DCT, an
LDA <LinearTransform>, ...) are refused in one line naming the file: pynnet has no such input layer.
"""
from __future__ import annotations

import os

import numpy as np
import torch

from pynnet.hmm.model_io import KaldiInput, KaldiOutput
from pynnet.io.atomic import atomic_path
from pynnet.io.errors import fail
from pynnet.nnet.model import FeatureTransform


def feature_transform_bytes(transform: FeatureTransform, binary: bool = False) -> bytes:
    """The nnet1 form of ``transform``: <Splice> -c..c, <AddShift>, <Rescale> (as Kaldi's
    train.sh builds it from a splice prototype and cmvn-to-nnet)."""
    c, d = transform.context, transform.input_dim
    out_dim = transform.output_dim
    w = KaldiOutput(binary)
    w.token("<Nnet>")
    w.nl()
    for marker, write_data in (
            ("<Splice>", lambda: w.int_vector(range(-c, c + 1))),
            ("<AddShift>", lambda: (w.token("<LearnRateCoef>"), w.float32(0.0), w.float_vector(transform.shift.cpu().numpy()))),
            ("<Rescale>", lambda: (w.token("<LearnRateCoef>"), w.float32(0.0), w.float_vector(transform.scale.cpu().numpy())))):
        w.token(marker)
        w.int32(out_dim)
        w.int32(d if marker == "<Splice>" else out_dim)
        w.nl()
        write_data()
        w.token("<!EndOfComponent>")
        w.nl()
    w.token("</Nnet>")
    w.nl()
    return w.getvalue()


def write_feature_transform(path: str | os.PathLike, transform: FeatureTransform) -> None:
    """Write ``transform`` as a Kaldi nnet1 text file, atomically."""
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        f.write(feature_transform_bytes(transform, binary=False))


def read_feature_transform(path: str | os.PathLike) -> FeatureTransform:
    """A Kaldi nnet1 feature transform made of <Splice> with offsets -c..c, then optionally
    <AddShift> and <Rescale> (in that order), as a FeatureTransform."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        fail("no such file", path)
    with open(path, "rb") as f:
        r = KaldiInput(f.read(), path, what="a Kaldi nnet1 feature transform")
    comps: list[tuple[str, int, int, object]] = []
    tok = r.token()
    if tok == "<Nnet>":
        tok = r.token()
    while tok != "</Nnet>":
        out_dim, in_dim = r.int32(), r.int32()
        if tok == "<Splice>":
            data = r.int_vector()
        elif tok in ("<AddShift>", "<Rescale>"):
            if r.peek_token() == "<LearnRateCoef>":
                r.token()
                r.float32()
            data = r.float_vector()
        else:
            fail(f"component {ascii(tok)[1:-1]} in the feature transform: pynnet's models take <Splice> -N..N, "
                 "then <AddShift> and <Rescale> only", path)
        comps.append((tok, out_dim, in_dim, data))
        if r.eof():
            break
        tok = r.token()
        if tok == "<!EndOfComponent>":
            if r.eof():
                break
            tok = r.token()
    names = [c[0] for c in comps]
    if not names or names[0] != "<Splice>" or names[1:] not in ([], ["<AddShift>"], ["<Rescale>"],
                                                                 ["<AddShift>", "<Rescale>"]):
        fail(f"feature transform made of {' '.join(names) or 'nothing'}: pynnet's models take "
             "<Splice>, then <AddShift> and <Rescale>", path)
    _, out_dim, in_dim, offsets = comps[0]
    c = (len(offsets) - 1) // 2
    if list(offsets) != list(range(-c, c + 1)):
        fail(f"splice offsets {list(offsets)}: pynnet's models splice -N..N frame by frame", path)
    if in_dim <= 0 or out_dim != in_dim * len(offsets):
        fail(f"<Splice> of {in_dim} inputs and {len(offsets)} offsets cannot have {out_dim} outputs", path)
    t = FeatureTransform(in_dim, c)
    for name, o, i, v in comps[1:]:
        v = np.asarray(v, np.float32)
        if not (o == i == out_dim == v.size):
            fail(f"{name} of dimension {o}x{i} with {v.size} values after a splice to {out_dim}", path)
        if not np.isfinite(v).all():
            fail(f"{name} has NaN or inf values", path)
        (t.shift if name == "<AddShift>" else t.scale).copy_(torch.from_numpy(v))
    return t


def same_transform(a: FeatureTransform, b: FeatureTransform, rtol: float = 1e-5) -> bool:
    """Equal splicing and (to float precision of a text file) equal shift and scale."""
    return (a.input_dim, a.context) == (b.input_dim, b.context) and all(
        np.allclose(x.cpu().numpy(), y.cpu().numpy(), rtol=rtol, atol=1e-6)
        for x, y in ((a.shift, b.shift), (a.scale, b.scale)))


__all__ = ["feature_transform_bytes", "read_feature_transform", "same_transform", "write_feature_transform"]
