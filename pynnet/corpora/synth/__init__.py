"""egs/synth: a telephone-dialogue corpus synthesised with espeak-ng (many voices and accents,
8 kHz channel, noise, reverberation), written as Kaldi data dirs, dict dir and LM text.

Entry point: :func:`pynnet.corpora.synth.corpus.build_corpus` (CLI ``pynnet-synth-corpus``,
recipe script ``egs/synth/local/prepare_data.sh``)."""
from pynnet.corpora.synth.corpus import SynthConfig, build_corpus, read_meta

__all__ = ["SynthConfig", "build_corpus", "read_meta"]
