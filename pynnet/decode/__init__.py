"""Decoding: lattice-generating decoders over HCLG (GMM and matrix/DNN log-likelihoods), lattices
in Kaldi's text format, and best paths over the LM-weight x word-insertion-penalty grid.

Import the submodules (pynnet.decode.decoder imports kaldi_hmm_gmm before kaldifst)."""
