"""pynnet: Kaldi-style speech recognition recipes in Python.

Layers (each imports only those below it):
io -> feat -> hmm -> nnet -> parallel -> decode -> score; bin/ holds the thin CLIs.
"""
__version__ = "0.1.0"
