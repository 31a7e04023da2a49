#!/usr/bin/env python3
# Kaldi's slurm.pl calling convention in Python (named .pl so that Kaldi cmd.sh files keep working):
#   slurm.pl [options] [JOB=1:N] <log-file> <command...>      (slurm.pl --help for the options)
# The implementation is pynnet/bin/jobs.py (standard library only, so any python3 will do).
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), ".."))
from pynnet.bin.jobs import slurm_pl_main  # noqa: E402

sys.exit(slurm_pl_main(sys.argv[1:]))
