"""The one place that knows the import order of the Kaldi binding packages.

With the pinned kaldi-hmm-gmm 1.1.4 / kaldifst 1.7.17 / kaldi-decoder 0.2.11, importing kaldilm
before any of the other three makes the later import hang forever (measured: kaldilm then
kaldi_hmm_gmm, kaldifst or kaldi_decoder all hang). So kaldilm is always imported last.
"""
from __future__ import annotations


def import_kaldi():
    """Import kaldi_hmm_gmm, kaldifst and kaldi_decoder (an order that works); return them."""
    import kaldi_hmm_gmm
    import kaldifst
    import kaldi_decoder
    return kaldi_hmm_gmm, kaldifst, kaldi_decoder


def import_kaldilm():
    """Import kaldilm after the other bindings (the other order hangs)."""
    import_kaldi()
    import kaldilm
    return kaldilm
