"""Session set-up shared by all tests."""
from pynnet.io.kaldi_libs import import_kaldilm

# All test modules run in one process: import the Kaldi bindings once, in the order that works
# (kaldilm last; see pynnet/io/kaldi_libs.py), so no module's import order can hang another's.
import_kaldilm()
