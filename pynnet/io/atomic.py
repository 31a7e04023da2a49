"""Write to a temporary file beside the target, then rename: nothing is ever half-written."""
from __future__ import annotations

import contextlib
import errno
import gzip
import os
import tempfile
from typing import IO, Iterator


def _read_umask() -> int:
    # Linux reports it without changing it (no window in which another thread's files get 0666).
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _read_umask()


def apply_umask(path: str | os.PathLike) -> None:
    """Give a file or directory made by ``tempfile.mkstemp`` / ``mkdtemp`` (always 0600 / 0700)
    the mode ``open()`` / ``os.mkdir()`` would have given it (0666 / 0777 less the umask read at
    import), so that what is renamed into place is as readable as shell-redirected output.

    Best effort: a file system that refuses mode changes (vfat/exFAT without ``quiet``, some
    FUSE mounts: EPERM/ENOTSUP) keeps mkstemp's mode rather than failing the write."""
    base = 0o777 if os.path.isdir(path) else 0o666
    with contextlib.suppress(OSError):
        os.chmod(path, base & ~_UMASK)


def make_temp_dir(dir: str, prefix: str) -> str:
    """``tempfile.mkdtemp`` with the umask's mode, for a directory to be renamed into place."""
    tmp = tempfile.mkdtemp(dir=dir, prefix=prefix)
    apply_umask(tmp)
    return tmp


def make_temp_file(dir: str, prefix: str) -> tuple[int, str]:
    """``tempfile.mkstemp`` (fd, path) with the umask's mode, for a file to be renamed into place."""
    fd, tmp = tempfile.mkstemp(dir=dir, prefix=prefix, suffix=".tmp")
    try:
        apply_umask(tmp)
    except BaseException:  # KeyboardInterrupt: leave no temp behind
        os.close(fd)
        os.unlink(tmp)
        raise
    return fd, tmp


_WRITE_ERRNOS = {errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EIO, errno.EROFS}


def naming_target(e: BaseException, path: str, tmp: str | None = None) -> BaseException:
    """The error to report for a failed write of ``path``: the machine's write errors (disk full,
    quota, file size limit, read-only file system, I/O error) name ``path``, which the user knows,
    rather than nothing (a failed write() names no file) or the temp file (gone by then)."""
    if isinstance(e, OSError) and e.errno in _WRITE_ERRNOS and e.filename in (None, tmp):
        return OSError(e.errno, e.strerror, path)
    return e


@contextlib.contextmanager
def naming_errors(path: str) -> Iterator[None]:
    """Writes to ``path`` (its temp) inside the block: their write errors name ``path``."""
    try:
        yield
    except OSError as e:
        named = naming_target(e, path)
        if named is e:
            raise
        raise named from e


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[str]:
    """Yield a temp path in the target's directory; rename it onto ``path`` only on success.
    On failure the temp is removed and a write error names ``path`` (``naming_target``)."""
    path = os.fspath(path)
    d = os.path.dirname(path) or "."
    os.makedirs(d, exist_ok=True)
    try:
        fd, tmp = make_temp_file(d, "." + os.path.basename(path) + ".")
    except OSError as e:     # a read-only file system, a full inode table: not the temp's name
        named = naming_target(e, path, e.filename)
        if named is e:
            raise
        raise named from e
    os.close(fd)
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        named = naming_target(e, path, tmp)
        if named is not e:
            raise named from e
        raise


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO]:
    """Open a temp file for writing; on success fsync and rename it onto ``path``."""
    with atomic_path(path) as tmp:
        kw = {} if "b" in mode else {"encoding": encoding}
        with open(tmp, mode, **kw) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())


class DeterministicGzip(gzip.GzipFile):
    """A gzip writer of ``path`` whose bytes depend on the content only: no file name (the temp
    file's random one) and no time stamp in the header, so identical outputs are identical files
    (md5 comparisons of reruns)."""

    def __init__(self, path: str | os.PathLike, compresslevel: int = 6):
        self._raw = open(path, "wb")
        super().__init__(filename="", mode="wb", compresslevel=compresslevel, fileobj=self._raw, mtime=0)

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._raw.close()
