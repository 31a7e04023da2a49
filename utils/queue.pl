#!/usr/bin/env python3
# Kaldi's queue.pl calling convention in Python (named .pl so that Kaldi cmd.sh files keep working):
#   queue.pl [options] [JOB=1:N] <log-file> <command...>      (queue.pl --help for the options)
# The implementation is pynnet/bin/jobs.py (standard library only, so any python3 will do).
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), ".."))
from pynnet.bin.jobs import queue_pl_main  # noqa: E402

sys.exit(queue_pl_main(sys.argv[1:]))
