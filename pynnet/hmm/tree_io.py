"""Kaldi phonetic-context trees (``tree`` files): a Python EventMap and Kaldi's serialisation.

A Kaldi tree file holds a ``ContextDependency``: context width N, central position P and an
EventMap ``ToPdf`` from an *event* (a sorted set of ``key: value`` pairs; key -1 is the
pdf-class, keys 0..N-1 the phones of the context window, 0 meaning "no phone": utterance
edge) to a pdf-id.  EventMaps are trees of three node types:

  ``CE answer``                       ConstantEventMap: a leaf (pdf-id)
  ``TE key size ( m_0 ... m_size-1 )``  TableEventMap: child chosen by the key's value (``NULL`` = none)
  ``SE key [ yes-set ] { yes no }``   SplitEventMap: yes-child if the key's value is in the set

Binary files start with ``\\0B``; tokens are followed by a space, int32 values are written as a
size byte (4; -4 for the unsigned table size) then little-endian bytes, and an integer vector as
the size byte 4, a raw little-endian int32 count and the raw values.  Text files have no header
and use Kaldi's text layout (``[ 1 2 3 ]``, newlines after tables and splits), reproduced here
byte for byte so that ``write_tree -> read_tree -> write_tree`` is an identity in both modes.

kaldi-hmm-gmm's ``ContextDependency`` has no constructor for a custom tree, but its pickle
state is the Kaldi binary serialisation (without the ``\\0B`` header), so we build it with
``__new__`` + ``__setstate__``.
"""
from __future__ import annotations

import abc

import contextlib
import os
import struct
import sys
from typing import Iterable, Mapping, Sequence

import numpy as np

from pynnet.io.atomic import atomic_write
from pynnet.io.errors import PynnetError, fail

PDF_CLASS_KEY = -1  # Kaldi's kPdfClass


@contextlib.contextmanager
def deep_recursion(limit: int = 50000):
    """EventMaps are walked recursively; greedy trees can be deeper than Python's default limit."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, limit))
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


# ----------------------------------------------------------------------------------------------
# EventMap
class EventMap(abc.ABC):
    """Base class: ``lookup(event)`` returns the answer (pdf-id) or None when undefined."""

    __slots__ = ()

    def lookup(self, event: Mapping[int, int] | Iterable[tuple[int, int]]) -> int | None:
        ev = event if isinstance(event, Mapping) else dict(event)
        node: EventMap | None = self
        while node is not None:
            if isinstance(node, ConstantEventMap):
                return node.answer
            if isinstance(node, TableEventMap):
                v = ev.get(node.key)
                if v is None or v < 0 or v >= len(node.table):
                    return None
                node = node.table[v]
            else:
                assert isinstance(node, SplitEventMap)
                v = ev.get(node.key)
                if v is None:
                    return None
                node = node.yes if v in node.yes_lookup else node.no
        return None

    def leaves(self) -> list[int]:
        """All answers reachable in the map (with repeats), in depth-first order."""
        out: list[int] = []
        stack: list[EventMap] = [self]
        while stack:
            n = stack.pop()
            if isinstance(n, ConstantEventMap):
                out.append(n.answer)
            else:
                stack.extend(reversed(n.children()))
        return out

    def max_result(self) -> int:
        lv = self.leaves()
        return max(lv) if lv else -1

    def children(self) -> list["EventMap"]:
        return []

    def map_leaves(self, mapping: Mapping[int, int] | Sequence[int]) -> "EventMap":
        """A copy with every answer a replaced by mapping[a] (Kaldi's MapEventMapLeaves)."""
        if isinstance(self, ConstantEventMap):
            return ConstantEventMap(int(mapping[self.answer]))
        if isinstance(self, TableEventMap):
            return TableEventMap(self.key, [None if m is None else m.map_leaves(mapping) for m in self.table])
        assert isinstance(self, SplitEventMap)
        return SplitEventMap(self.key, self.yes_set, self.yes.map_leaves(mapping), self.no.map_leaves(mapping))

    def map_events(self, keys: Sequence[int], values: np.ndarray) -> np.ndarray:
        """Vectorised lookup: ``values`` is (E, len(keys)) with column j holding the value of key
        ``keys[j]`` (negative = key absent).  Returns (E,) answers, -1 where undefined."""
        values = np.asarray(values)
        col = {int(k): j for j, k in enumerate(keys)}
        out = np.full(values.shape[0], -1, dtype=np.int64)
        stack: list[tuple[EventMap, np.ndarray]] = [(self, np.arange(values.shape[0]))]
        while stack:
            node, idx = stack.pop()
            if idx.size == 0:
                continue
            if isinstance(node, ConstantEventMap):
                out[idx] = node.answer
                continue
            j = col.get(node.key)
            if j is None:
                continue  # key never defined -> undefined
            v = values[idx, j]
            defined = v >= 0
            if isinstance(node, TableEventMap):
                ok = defined & (v < len(node.table))
                idx, v = idx[ok], v[ok]
                for val in np.unique(v):
                    child = node.table[int(val)]
                    if child is not None:
                        stack.append((child, idx[v == val]))
            else:
                assert isinstance(node, SplitEventMap)
                idx, v = idx[defined], v[defined]
                is_yes = np.isin(v, node.yes_array)
                stack.append((node.yes, idx[is_yes]))
                stack.append((node.no, idx[~is_yes]))
        return out

    def __eq__(self, other: object) -> bool:  # structural equality (used by tests)
        return type(self) is type(other) and self._state() == other._state()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(self._state())

    @abc.abstractmethod
    def _state(self) -> tuple:
        """A hashable description of the node; each EventMap kind defines its own."""


class ConstantEventMap(EventMap):
    __slots__ = ("answer",)

    def __init__(self, answer: int):
        self.answer = int(answer)

    def _state(self):
        return ("CE", self.answer)

    def __repr__(self) -> str:
        return f"CE({self.answer})"


class TableEventMap(EventMap):
    __slots__ = ("key", "table")

    def __init__(self, key: int, table: Sequence[EventMap | None]):
        self.key = int(key)
        self.table = list(table)

    def children(self) -> list[EventMap]:
        return [m for m in self.table if m is not None]

    def _state(self):
        return ("TE", self.key, tuple(None if m is None else m._state() for m in self.table))

    def __repr__(self) -> str:
        return f"TE({self.key}, {self.table})"


class SplitEventMap(EventMap):
    __slots__ = ("key", "yes_set", "yes", "no", "yes_lookup", "yes_array")

    def __init__(self, key: int, yes_set: Iterable[int], yes: EventMap, no: EventMap):
        if yes is None or no is None:
            raise ValueError("SplitEventMap needs both children")
        self.key = int(key)
        self.yes_set = tuple(sorted(set(int(v) for v in yes_set)))
        self.yes, self.no = yes, no
        self.yes_lookup = frozenset(self.yes_set)
        self.yes_array = np.array(self.yes_set, dtype=np.int64)

    def children(self) -> list[EventMap]:
        return [self.yes, self.no]

    def _state(self):
        return ("SE", self.key, self.yes_set, self.yes._state(), self.no._state())

    def __repr__(self) -> str:
        return f"SE({self.key}, {list(self.yes_set)}, {self.yes!r}, {self.no!r})"


class ContextDependencyTree:
    """Python twin of Kaldi's ContextDependency: (N, P, to_pdf EventMap)."""

    def __init__(self, context_width: int, central_position: int, to_pdf: EventMap):
        if not 0 <= central_position < context_width:
            raise PynnetError(f"bad context: width {context_width}, central position {central_position}")
        self.context_width = int(context_width)
        self.central_position = int(central_position)
        self.to_pdf = to_pdf

    @property
    def num_pdfs(self) -> int:
        return self.to_pdf.max_result() + 1

    def compute(self, phone_window: Sequence[int], pdf_class: int) -> int | None:
        """pdf-id for a phone window of length N and a pdf-class (None if the tree has none)."""
        if len(phone_window) != self.context_width:
            raise ValueError(f"phone window must have {self.context_width} phones")
        ev = {PDF_CLASS_KEY: int(pdf_class)}
        ev.update({i: int(p) for i, p in enumerate(phone_window)})
        return self.to_pdf.lookup(ev)

    def to_kaldi(self):
        """A kaldi_hmm_gmm.ContextDependency with this tree."""
        return to_kaldi_context_dependency(self)

    def serialize(self, binary: bool = True) -> bytes:
        w = _Writer(binary)
        w.token("ContextDependency")
        w.int32(self.context_width)
        w.int32(self.central_position)
        w.token("ToPdf")
        with deep_recursion():
            _write_event_map(w, self.to_pdf)
        w.token("EndContextDependency")
        return w.getvalue()

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, ContextDependencyTree) and self.context_width == other.context_width
                and self.central_position == other.central_position and self.to_pdf == other.to_pdf)

    def __repr__(self) -> str:
        return f"ContextDependencyTree(N={self.context_width}, P={self.central_position}, num_pdfs={self.num_pdfs})"


# ----------------------------------------------------------------------------------------------
# Kaldi token-level serialisation
class _Writer:
    def __init__(self, binary: bool):
        self.binary = binary
        self.parts: list[bytes] = []

    def token(self, tok: str) -> None:
        self.parts.append(tok.encode() + b" ")

    def int32(self, v: int) -> None:
        if self.binary:
            self.parts.append(b"\x04" + struct.pack("<i", int(v)))
        else:
            self.parts.append(f"{int(v)} ".encode())

    def uint32(self, v: int) -> None:
        if self.binary:
            self.parts.append(b"\xfc" + struct.pack("<I", int(v)))
        else:
            self.parts.append(f"{int(v)} ".encode())

    def int_vector(self, vals: Sequence[int]) -> None:
        if self.binary:
            self.parts.append(b"\x04" + struct.pack("<i", len(vals)) + struct.pack(f"<{len(vals)}i", *vals))
        else:
            self.parts.append(("[ " + "".join(f"{int(v)} " for v in vals) + "]\n").encode())

    def newline(self) -> None:
        if not self.binary:
            self.parts.append(b"\n")

    def getvalue(self) -> bytes:
        return b"".join(self.parts)


def _write_event_map(w: _Writer, m: EventMap | None) -> None:
    # Iterative would be safer for pathological depth; trees are at most a few hundred deep.
    if m is None:
        w.token("NULL")
    elif isinstance(m, ConstantEventMap):
        w.token("CE")
        w.int32(m.answer)
    elif isinstance(m, TableEventMap):
        w.token("TE")
        w.int32(m.key)
        w.uint32(len(m.table))
        w.token("(")
        for child in m.table:
            _write_event_map(w, child)
        w.token(")")
        w.newline()
    elif isinstance(m, SplitEventMap):
        w.token("SE")
        w.int32(m.key)
        w.int_vector(m.yes_set)
        w.token("{")
        _write_event_map(w, m.yes)
        _write_event_map(w, m.no)
        w.token("}")
        w.newline()
    else:
        raise TypeError(f"not an EventMap: {m!r}")


class _Reader:
    """Reads Kaldi tokens/ints from bytes in binary or text mode; errors name the file."""

    _WS = b" \t\n\r\f\v"

    def __init__(self, data: bytes, binary: bool, path: str = "<bytes>", pos: int = 0):
        self.data, self.binary, self.path, self.pos = data, binary, path, pos

    def fail(self, msg: str) -> "NoReturn":  # noqa: F821
        line = self.data.count(b"\n", 0, self.pos) + 1 if not self.binary else None
        where = f" (byte {self.pos})" if self.binary else ""
        fail(f"bad tree: {msg}{where}", self.path, line)

    def _skip_ws(self) -> None:
        d, n = self.data, len(self.data)
        while self.pos < n and d[self.pos] in self._WS:
            self.pos += 1

    def peek(self) -> str:
        if not self.binary:
            self._skip_ws()
        if self.pos >= len(self.data):
            self.fail("unexpected end of file")
        return chr(self.data[self.pos])

    def token(self) -> str:
        if not self.binary:
            self._skip_ws()
        start = self.pos
        d, n = self.data, len(self.data)
        while self.pos < n and d[self.pos] not in self._WS:
            self.pos += 1
        if self.pos == start:
            self.fail("expected a token, got end of file")
        tok = d[start:self.pos].decode("latin-1")
        if self.binary:
            if self.pos >= n or d[self.pos] != 0x20:
                self.fail(f"token '{tok}' not followed by a space")
            self.pos += 1
        return tok

    def expect(self, tok: str) -> None:
        got = self.token()
        if got != tok:
            self.fail(f"expected '{tok}', got '{got}'")

    def _int(self, signed: bool) -> int:
        if self.binary:
            if self.pos + 5 > len(self.data):
                self.fail("unexpected end of file reading an integer")
            size = struct.unpack("b", self.data[self.pos:self.pos + 1])[0]
            want = 4 if signed else -4
            if size != want:
                self.fail(f"expected integer size byte {want}, got {size}")
            v = struct.unpack("<i" if signed else "<I", self.data[self.pos + 1:self.pos + 5])[0]
            self.pos += 5
            return v
        tok = self.token()
        try:
            v = int(tok)
        except ValueError:
            self.fail(f"expected an integer, got '{tok}'")
        if not (-2**31 <= v < 2**31 if signed else 0 <= v < 2**32):
            self.fail(f"integer out of range: {v}")
        return v

    def int32(self) -> int:
        return self._int(True)

    def uint32(self) -> int:
        return self._int(False)

    def int_vector(self) -> list[int]:
        if self.binary:
            if self.pos + 5 > len(self.data) or self.data[self.pos] != 4:
                self.fail("expected an int32 vector")
            n = struct.unpack("<i", self.data[self.pos + 1:self.pos + 5])[0]
            self.pos += 5
            if n < 0 or self.pos + 4 * n > len(self.data):
                self.fail(f"bad vector size {n}")
            vals = list(struct.unpack(f"<{n}i", self.data[self.pos:self.pos + 4 * n]))
            self.pos += 4 * n
            return vals
        self.expect("[")
        vals = []
        while True:
            tok = self.token()
            if tok == "]":
                return vals
            try:
                vals.append(int(tok))
            except ValueError:
                self.fail(f"expected an integer or ']', got '{tok}'")


def _read_event_map(r: _Reader) -> EventMap | None:
    # Explicit stack: Kaldi trees can be deep; avoid Python's recursion limit.
    c = r.peek()
    if c == "N":
        r.expect("NULL")
        return None
    if c == "C":
        r.expect("CE")
        return ConstantEventMap(r.int32())
    if c == "T":
        r.expect("TE")
        key = r.int32()
        size = r.uint32()
        r.expect("(")
        table = [_read_event_map(r) for _ in range(size)]
        r.expect(")")
        return TableEventMap(key, table)
    if c == "S":
        r.expect("SE")
        key = r.int32()
        yes_set = r.int_vector()
        r.expect("{")
        yes = _read_event_map(r)
        no = _read_event_map(r)
        r.expect("}")
        if yes is None or no is None:
            r.fail("SplitEventMap with a NULL child")
        return SplitEventMap(key, yes_set, yes, no)
    r.fail(f"unexpected character '{c}' where an EventMap was expected")


def parse_context_dependency(data: bytes, binary: bool, path: str = "<bytes>", pos: int = 0
                             ) -> ContextDependencyTree:
    """Parse a ContextDependency object (after the ``\\0B`` header if binary)."""
    r = _Reader(data, binary, path, pos)
    r.expect("ContextDependency")
    n = r.int32()
    p = r.int32()
    tok = r.token()
    if tok == "ToLength":  # very old Kaldi trees: skip the length map
        _read_event_map(r)
        tok = r.token()
    if tok != "ToPdf":
        r.fail(f"expected 'ToPdf', got '{tok}'")
    with deep_recursion():
        to_pdf = _read_event_map(r)
    if to_pdf is None:
        r.fail("ToPdf is NULL")
    r.expect("EndContextDependency")
    if not 0 <= p < n:
        r.fail(f"bad context width {n} / central position {p}")
    return ContextDependencyTree(n, p, to_pdf)


# ----------------------------------------------------------------------------------------------
# kaldi_hmm_gmm interop
def _khg():
    import kaldi_hmm_gmm  # noqa: F401  (must be imported before kaldifst)
    return kaldi_hmm_gmm


def to_kaldi_context_dependency(tree: ContextDependencyTree):
    """Construct kaldi_hmm_gmm.ContextDependency from our tree via its pickle state."""
    khg = _khg()
    data = tree.serialize(binary=True)
    ctx = khg.ContextDependency.__new__(khg.ContextDependency)
    ctx.__setstate__((list(np.frombuffer(data, dtype=np.int8).tolist()),))
    return ctx


def from_kaldi_context_dependency(ctx) -> ContextDependencyTree:
    state = ctx.__getstate__()
    data = np.asarray(state[0], dtype=np.int8).tobytes()
    return parse_context_dependency(data, binary=True, path="<ContextDependency>")


def as_tree(obj, context_width: int = 3, central_position: int = 1) -> ContextDependencyTree:
    """Accept our tree, a kaldi_hmm_gmm ContextDependency, or a bare EventMap (then N/P apply)."""
    if isinstance(obj, ContextDependencyTree):
        return obj
    if isinstance(obj, EventMap):
        return ContextDependencyTree(context_width, central_position, obj)
    if type(obj).__name__ == "ContextDependency":
        return from_kaldi_context_dependency(obj)
    raise TypeError(f"cannot write a tree from {type(obj).__name__}")


# ----------------------------------------------------------------------------------------------
# Files
def write_tree(path: str | os.PathLike, tree, binary: bool = True, *, context_width: int = 3,
               central_position: int = 1) -> None:
    """Write a Kaldi tree file atomically (binary: ``\\0B`` header, as Kaldi's WriteKaldiObject)."""
    t = as_tree(tree, context_width, central_position)
    body = t.serialize(binary)
    with atomic_write(path, "wb") as f:
        f.write((b"\0B" if binary else b"") + body)


def read_tree_py(path: str | os.PathLike) -> ContextDependencyTree:
    """Read a Kaldi tree file (binary or text) into our Python ContextDependencyTree."""
    path = os.fspath(path)
    if not os.path.exists(path):
        fail("no such file", path)
    with open(path, "rb") as f:
        data = f.read()
    if data.startswith(b"\0B"):
        return parse_context_dependency(data, True, path, 2)
    if not data.strip():
        fail("tree file is empty", path)
    return parse_context_dependency(data, False, path, 0)


def check_tree_matches_model(ctx, tm, tree_path: str | os.PathLike, model_path: str | os.PathLike) -> None:
    """A tree and a model (kaldi_hmm_gmm ContextDependency, TransitionModel) from one training:
    their pdf counts agree. A retraining killed after writing its tree leaves the old final.mdl
    beside the new tree; the graph builders would fail deep inside (TupleToTransitionState)."""
    if ctx.num_pdfs != tm.num_pdfs:
        fail(f"the tree has {ctx.num_pdfs} pdfs but {os.fspath(model_path)} has {tm.num_pdfs}: they are "
             "not from the same training (one interrupted after writing the tree? rerun it)", tree_path)


def read_tree(path: str | os.PathLike):
    """Read a Kaldi tree file (binary or text) as a kaldi_hmm_gmm.ContextDependency."""
    return read_tree_py(path).to_kaldi()
