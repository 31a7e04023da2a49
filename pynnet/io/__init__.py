"""Kaldi file formats: tables (text key-value files), data dirs, ark/scp, atomic writes, errors."""
from pynnet.io.errors import PynnetError, fail
from pynnet.io.atomic import atomic_write, atomic_path
from pynnet.io.tables import read_table, read_table_lines, write_table

__all__ = ["PynnetError", "fail", "atomic_write", "atomic_path", "read_table", "read_table_lines", "write_table"]
