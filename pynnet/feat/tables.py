"""Kaldi r/wspecifiers for matrices (through kaldiio), written atomically.

wspecifiers: ``ark,scp:x.ark,x.scp`` (binary ark + scp with absolute-or-given ark path),
``ark:x.ark``, ``ark,t:x.txt``, ``ark:-`` (stdout). rspecifiers: ``scp:x.scp``, ``ark:x.ark``,
``ark:-``, ``ark:cmd |``, ``scp:cmd |``, or a bare path ending in .scp/.ark. Integer/real tables (utt2num_frames, utt2dur):
``ark,t:path`` or a bare path.
"""
from __future__ import annotations

import contextlib
import os
import signal
import struct
import sys
from typing import IO, Iterator

import numpy as np

from pynnet.io.atomic import atomic_path, naming_errors, naming_target
from pynnet.io.errors import fail
from pynnet.io.tables import split_key

# What kaldiio raises on a corrupt or truncated ark (struct.error from a short header read,
# RuntimeError from a text matrix with a non-number, AssertionError from its own checks,
# MemoryError or OverflowError from a header whose sizes ask for terabytes, ...): readers turn
# these into one-line errors naming the file.
KALDIIO_ERRORS = (ValueError, OSError, EOFError, KeyError, IndexError, AssertionError, RuntimeError,
                  MemoryError, OverflowError, struct.error)


def kaldiio_error(e: BaseException) -> str:
    """One line saying what went wrong in kaldiio (its messages may span lines, or be empty)."""
    if isinstance(e, (MemoryError, OverflowError)):
        return "a matrix header gives sizes larger than memory (a corrupt file?)"
    return " ".join(str(e).split()) or type(e).__name__


class _KaldiScpLines:
    """An scp file as kaldiio's scp readers take a text file (``with f: for line in f``), one
    line at a time: kaldiio splits a line at the first run of any Unicode space (str.split()),
    which cuts a key 'u\u00a01' that Kaldi keeps whole, so each line is handed over as
    'key rxfilename' split by Kaldi's rule (give kaldiio ``separator=' '``).  Nothing is read
    before kaldiio asks for it: memory stays kaldiio's own (a sequential reader holds one line)
    and a bad line is an error only when it is reached, as with kaldiio alone.  Lines end at
    '\n' only (and lose a '\r' before it), as in the other Kaldi text readers."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._f: IO[str] | None = None

    def __enter__(self) -> "_KaldiScpLines":
        self._f = open(self.path, encoding="utf-8", newline="\n")
        return self

    def __exit__(self, *exc) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None

    def __iter__(self) -> Iterator[str]:
        assert self._f is not None, "use in a with block"
        try:
            for n, line in enumerate(self._f, 1):
                key, rx = split_key(line.rstrip("\r\n"))
                if not rx:
                    fail(f"expected 'key rxfilename', got '{line.rstrip(chr(13) + chr(10))}'", self.path, n)
                yield f"{key} {rx}\n"
        except UnicodeDecodeError:
            fail("not valid UTF-8", self.path)  # decoded a block at a time: no line number


def _scp_source(path: str) -> tuple[str | _KaldiScpLines, str | None]:
    """(what to give kaldiio's scp readers for ``path``, their ``separator``)."""
    if not os.path.isfile(path):
        return path, None  # stdin, a pipe: as kaldiio reads them
    return _KaldiScpLines(path), " "


def load_scp(path: str):
    """kaldiio.load_scp (a lazy {key: matrix}) with keys split from rxfilenames as Kaldi does."""
    import kaldiio

    src, sep = _scp_source(path)
    return kaldiio.load_scp(src, separator=sep)


def load_scp_sequential(path: str) -> Iterator[tuple[str, np.ndarray]]:
    """kaldiio.load_scp_sequential with keys split from rxfilenames as Kaldi does."""
    import kaldiio

    src, sep = _scp_source(path)
    return kaldiio.load_scp_sequential(src, separator=sep)


def _split_spec(spec: str) -> tuple[set[str], str]:
    head, colon, rest = spec.partition(":")
    if not colon or not head or not set(head.split(",")) <= {"ark", "scp", "t", "b", "f", "nf", "p",
                                                             "o", "s", "cs", "ns", "no", "b", "e"}:
        return set(), spec
    return set(head.split(",")), rest


class MatrixWriter:
    """``with MatrixWriter('ark,scp:a.ark,a.scp') as w: w.write(key, mat)`` — files appear (by
    rename) only when the block ends without an exception."""

    def __init__(self, wspecifier: str, compress: bool = False) -> None:
        opts, rest = _split_spec(wspecifier)
        if "ark" not in opts:
            fail(f"bad wspecifier '{wspecifier}' (expected ark:FILE or ark,scp:ARK,SCP)")
        self.text = "t" in opts
        # Kaldi copy-feats --compress=true: kAutomaticMethod (CM for > 8 rows, else CM2)
        self.compression = 1 if compress else None
        if "scp" in opts:
            parts = rest.split(",")
            if len(parts) != 2 or not all(parts):
                fail(f"bad wspecifier '{wspecifier}' (ark,scp:ARK,SCP)")
            self.ark_path, self.scp_path = parts
        else:
            self.ark_path, self.scp_path = rest, None
        if any(x.strip().startswith("|") or x.strip().endswith("|") for x in (self.ark_path, self.scp_path or "")):
            fail(f"bad wspecifier '{wspecifier}': pipes are not supported here; write ark:- and pipe that")
        if self.scp_path is not None and self.ark_path == "-":
            fail(f"bad wspecifier '{wspecifier}': an scp needs the ark in a file")
        self._ctx: list = []
        self._ark: IO[bytes] | None = None
        self._scp: IO[str] | None = None

    def __enter__(self) -> "MatrixWriter":
        if self.ark_path == "-":
            self._ark = sys.stdout.buffer
        else:
            c = atomic_path(self.ark_path)
            self._ctx.append(c)
            self._ark = open(c.__enter__(), "wb")
        if self.scp_path is not None:
            c = atomic_path(self.scp_path)
            self._ctx.append(c)
            self._scp = open(c.__enter__(), "w", encoding="utf-8")
        return self

    def write(self, key: str, mat: np.ndarray) -> None:
        import kaldiio.matio as km

        assert self._ark is not None
        # Kaldi's IsToken: non-ASCII characters (U+00A0 too) may be part of a key
        if not key or any(c <= " " or c == "\x7f" for c in key):
            fail(f"bad key '{key}' (keys must be non-empty with no space or ASCII control character)")
        with naming_errors(self.ark_path):
            self._ark.write((key + " ").encode("utf-8"))
            offset = self._ark.tell() if self.scp_path is not None else 0
            mat = np.asarray(mat)
            if self.text:
                km.write_array_ascii(self._ark, mat)
            else:
                # (kaldiio cannot compress an empty matrix: it is written as it is)
                km.write_array(self._ark, mat, compression_method=self.compression if mat.size else None)
        if self._scp is not None:
            with naming_errors(self.scp_path):
                self._scp.write(f"{key} {self.ark_path}:{offset}\n")

    def __exit__(self, exc_type, exc, tb) -> bool:
        # Every file is closed and every temp removed, whatever fails first (a full disk fails the
        # flush of the ark's last buffer): the first error is the one raised, naming its file.
        error = exc
        for f, path in ((self._ark, self.ark_path), (self._scp, self.scp_path)):
            if f is None or f is sys.stdout.buffer:
                continue
            try:
                if error is None:
                    f.flush()
                    os.fsync(f.fileno())
                f.close()
            except OSError as e:
                with contextlib.suppress(OSError):
                    f.close()       # (a close whose flush failed has closed the file already)
                if error is None:
                    error = naming_target(e, path)
        if self._ark is sys.stdout.buffer and error is None:
            try:
                self._ark.flush()
            except OSError as e:
                error = e
        # Rename the ark before the scp, so an scp never points at a missing ark.
        for c in self._ctx:
            try:
                if error is None:
                    c.__exit__(None, None, None)
                else:
                    c.__exit__(type(error), error, error.__traceback__)
            except BaseException as e:  # noqa: BLE001 - kept, raised below
                error = e
        if error is not None and error is not exc:
            raise error
        return False


def read_matrices(rspecifier: str) -> Iterator[tuple[str, np.ndarray]]:
    """Iterate (key, matrix) over ``scp:x.scp`` / ``ark:x.ark`` / ``ark:-`` / ``ark:cmd |`` /
    ``scp:cmd |`` / bare x.scp or x.ark."""
    import kaldiio

    opts, rest = _split_spec(rspecifier)
    if "ark" in opts and "scp" not in opts and rest.rstrip().endswith("|"):
        yield from _read_ark_pipe(rest.rstrip()[:-1].strip())
        return
    if "scp" in opts and rest.rstrip().endswith("|"):
        yield from _read_scp_pipe(rest.rstrip()[:-1].strip())
        return
    if not opts:
        if rspecifier.endswith(".scp"):
            opts, rest = {"scp"}, rspecifier
        elif rspecifier.endswith(".ark"):
            opts, rest = {"ark"}, rspecifier
        else:
            fail(f"bad rspecifier '{rspecifier}' (expected scp:FILE or ark:FILE)")
    kind = "scp" if "scp" in opts else "ark"
    if rest != "-" and not os.path.exists(rest):
        fail("no such file", rest)
    try:
        if kind == "scp":
            for key, mat in load_scp_sequential(rest):
                yield key, mat
        else:
            with kaldiio.ReadHelper(f"ark:{rest}") as reader:
                for key, mat in reader:
                    yield key, mat
    except KALDIIO_ERRORS as e:  # kaldiio's on corrupt input
        fail(f"cannot read matrices: {kaldiio_error(e)}", rest)


def _read_scp_pipe(cmd: str) -> Iterator[tuple[str, np.ndarray]]:
    """Matrices of the scp listing a command prints (Kaldi's ``scp:cmd |``, e.g.
    ``scp:utils/filter_scp.pl list feats.scp |``). The listing is read whole first (a few lines
    per utterance), so a failing command is an error before any matrix is returned."""
    import subprocess
    import tempfile

    r = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if r.returncode != 0:
        why = r.stderr.decode(errors="replace").strip().splitlines()
        fail(f"command failed (exit status {r.returncode}){': ' + why[-1] if why else ''}", f"scp:{cmd} |")
    with tempfile.TemporaryDirectory(prefix="pynnet-scp-") as tmp:
        listing = os.path.join(tmp, "listing.scp")
        with open(listing, "wb") as f:
            f.write(r.stdout)
        try:
            yield from load_scp_sequential(listing)
        except KALDIIO_ERRORS as e:
            fail(f"cannot read matrices: {kaldiio_error(e)}", f"scp:{cmd} |")


def _read_ark_pipe(cmd: str) -> Iterator[tuple[str, np.ndarray]]:
    """Matrices from a command's stdout (Kaldi's ``ark:cmd |``). Unlike kaldiio's own pipe reader,
    a command that fails (pipefail: any stage) is an error, not a silently short table."""
    import subprocess

    import kaldiio

    # its own process group, so that stopping early stops every stage of the command's pipeline
    proc = subprocess.Popen(["bash", "-o", "pipefail", "-c", cmd], stdout=subprocess.PIPE,
                            start_new_session=True)
    finished = False
    try:
        for key, mat in kaldiio.load_ark(proc.stdout):
            yield key, mat
        finished = True
    except KALDIIO_ERRORS as e:  # kaldiio's on corrupt input
        fail(f"cannot read matrices from '{cmd} |': {kaldiio_error(e)}")
    finally:
        proc.stdout.close()
        if not finished:     # the reader stopped early or failed: do not wait for the command
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        rc = proc.wait()
    # 141 (SIGPIPE) after a complete table: a later stage stopped reading on purpose (| head)
    if rc not in (0, 141):
        fail(f"'{cmd} |' failed (exit code {rc})")


def table_path(spec: str) -> str:
    """``ark,t:path`` (or ``t,ark:path``, or a bare path) -> path, for text tables."""
    opts, rest = _split_spec(spec)
    if opts and not ({"ark", "t"} <= opts):
        fail(f"bad wspecifier for a text table '{spec}' (expected ark,t:FILE)")
    return rest


def read_rspecifier_table(spec: str) -> str:
    """``ark:path`` / ``ark,t:path`` / bare path of a text table -> path."""
    opts, rest = _split_spec(spec)
    if opts and "ark" not in opts:
        fail(f"bad rspecifier for a text table '{spec}' (expected ark:FILE)")
    return rest
