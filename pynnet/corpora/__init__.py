"""Corpus preparation (uses pynnet.io only): the built-in synthesised corpus (``synth``)."""
