"""Time-marked words (CTM) from lattices, as Kaldi's ``lattice-1best --lm-scale=LMWT |
lattice-align-words word_boundary.int final.mdl | nbest-to-ctm | int2sym.pl -f 5 words.txt |
utils/convert_ctm.pl segments reco2file_and_channel`` (steps/get_ctm.sh) gives them.

1. The best path of a state-level lattice at (lm_scale, acoustic_scale, word_ins_penalty):
   lattice-1best minimises ``lm_scale*graph + acoustic_scale*acoustic + wip*#words`` (the
   penalty only when positive, as Kaldi adds it); ``best_path_arcs`` divides that by lm_scale,
   so at acoustic scale 1 and no penalty it is ``best_paths`` at LMWT=lm_scale, WIP 0 (the path
   of score_kaldi.sh's penalty_0.0/LMWT.txt), and any number of LM scales take one pass.
   ``grid_path_arcs``: score_kaldi.sh's whole LMWT x WIP grid (WIP per word after the division,
   i.e. lattice-1best's penalty LMWT*WIP) from one lattice, one pass per penalty.
2. Word alignment of that path (``align_words``), the rules of Kaldi's word-align-lattice.cc on
   a linear lattice: the transition-ids are cut, from the start, into silence (a ``nonword``
   phone), one-phone words (``singleton``) and words (a ``begin`` phone, ``internal`` phones, an
   ``end`` phone), each piece ending at its phone's final transition (and, with reordered
   self-loops, the self-loops after it); word pieces take the path's word labels in order.
   Silence pieces are word 0 (``<eps>``, printed only with --print-silence true).  What is left at
   the end (a word whose end is the end of the path, the usual case) goes out as one piece; an
   unfinished word, words without phones or phones without words are errors (Kaldi warns and
   still outputs the partial alignment, as here).
3. CTM lines ``<utt> 1 <start> <dur> <word>`` in seconds, printed as nbest-to-ctm prints them
   (float frame shift times the frame count, fixed precision 2, or 3/4 for frame shifts under
   10/1 ms); ``convert_to_recording`` makes them relative to recordings as convert_ctm.pl does.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import Sequence

import numpy as np

from pynnet.decode.lattice import Lattice, best_paths
from pynnet.hmm.ali_io import TransitionTables
from pynnet.io.errors import fail
from pynnet.io.tables import ascii_int, split_fields

# word_boundary.int phone kinds (Kaldi's WordBoundaryInfo::PhoneType); 0: phone not listed
NONWORD, BEGIN, END, SINGLETON, INTERNAL = 1, 2, 3, 4, 5
_KINDS = {"nonword": NONWORD, "begin": BEGIN, "end": END, "singleton": SINGLETON, "internal": INTERNAL}


def read_word_boundary(path: str | os.PathLike) -> np.ndarray:
    """phones/word_boundary.int (``<phone-id> begin|end|singleton|internal|nonword`` lines) as
    an array of kinds indexed by phone id (0 for phones it does not list)."""
    kinds: dict[int, int] = {}
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        fail(f"cannot read: {e.strerror}", path)
    for n, raw in enumerate(data.split(b"\n"), 1):
        fields = split_fields(raw.decode("utf-8", "replace").rstrip("\r"))
        if not fields:
            continue
        phone = ascii_int(fields[0]) if len(fields) == 2 else None
        if phone is None or phone <= 0 or fields[1] not in _KINDS:
            fail("expected '<phone-id> begin|end|singleton|internal|nonword', got "
                 f"'{' '.join(fields)}'", path, n)
        if phone >= 1 << 20 and phone >= 2 * (len(kinds) + 1):
            # (the kinds are an array indexed by phone id: a stray huge id would take gigabytes)
            fail(f"phone id {phone} is far past the {len(kinds) + 1} phones listed: ids should be "
                 "those of phones.txt", path, n)
        kinds[phone] = _KINDS[fields[1]]
    if not kinds:
        fail("no phones in the word-boundary file", path)
    out = np.zeros(max(kinds) + 1, np.int8)
    out[list(kinds)] = list(kinds.values())
    return out


def best_path_arcs(lat: Lattice, lm_scales: Sequence[float], acoustic_scale: float = 1.0,
                   word_ins_penalty: float = 0.0) -> list[np.ndarray | None]:
    """For each LM scale, the arcs (indices, in path order) of the best path as lattice-1best
    with these options picks it; None when the lattice has no complete path.  lattice-1best adds
    a (positive) penalty to the LM cost after scaling: at scale s that is the grid point
    (s, word_ins_penalty/s) of ``grid_path_arcs``, one pass per scale; without one, all scales
    take one pass."""
    if word_ins_penalty > 0:
        return [grid_path_arcs(lat, [s], [word_ins_penalty / s], acoustic_scale)[0] for s in lm_scales]
    return grid_path_arcs(lat, lm_scales, [0.0], acoustic_scale)


def grid_path_arcs(lat: Lattice, lm_scales: Sequence[float], word_ins_penalties: Sequence[float],
                   acoustic_scale: float = 1.0) -> list[np.ndarray | None]:
    """The best path's arcs (as ``best_path_arcs``) at every grid point (LM scale s, penalty p)
    of steps/score_kaldi.sh's grid, i.e. minimising ``graph + acoustic*acoustic_scale/s +
    p*words`` (lattice-1best at scale s with penalty s*p), scale-major (the penalties of the
    first scale first).  ``best_paths`` on the lattice with every arc labelled by its index,
    whose "words" are then the whole path (with the same costs and ties as scoring's): one call
    per penalty for all scales, the penalty on the word arcs' graph costs (best_paths would put
    its own on every arc of the indexed lattice)."""
    if acoustic_scale <= 0 or any(s <= 0 for s in lm_scales):
        fail(f"the LM and acoustic scales must be positive (got {list(lm_scales)}, {acoustic_scale})")
    indexed = replace(lat, olabel=np.arange(1, lat.num_arcs + 1, dtype=np.int32))
    lmwts = [float(s) / acoustic_scale for s in lm_scales]
    is_word = lat.olabel != 0
    by_pen = {}
    for p in dict.fromkeys(float(x) for x in word_ins_penalties):
        pl = replace(indexed, graph=lat.graph + is_word * p) if p else indexed
        by_pen[p] = best_paths(pl, lmwts, [0.0])
    start_is_final = bool(np.any(lat.final_state == lat.start))   # (the one complete empty path)
    out = []
    for w in lmwts:
        for p in word_ins_penalties:
            path = by_pen[float(p)][(w, 0.0)]
            out.append(np.asarray(path, np.int64) - 1 if path or start_is_final else None)
    return out


@dataclass
class WordAlignment:
    """A word-aligned path: (word, first frame, number of frames) per piece, word 0 for silence
    and partial words.  ``error``: the first of Kaldi's warnings that make lattice-align-words
    count the lattice as an error (it is still output); ``warnings``: the others."""
    pieces: list[tuple[int, int, int]]
    error: str | None = None
    warnings: list[str] = field(default_factory=list)


_PHONE_CHANGED = ("phone changed before final transition-id found "
                  "[broken lattice or mismatched model or wrong --reorder option?]")
_PHONE_CHANGED_END = "phone changed unexpectedly in lattice [broken lattice or mismatched model?]"


class _Aligner:
    """Kaldi's word-alignment rules (word-align-lattice.cc) on one linear path.  Which of its
    checks are errors and which only warnings follow Kaldi's code, piece kind by piece kind."""

    def __init__(self, tables: TransitionTables, kinds: np.ndarray, tids: np.ndarray, reorder: bool):
        self.phone = tables.phone[tids]
        self.final = tables.final[tids]
        self.loop = tables.self_loop[tids]
        ph = self.phone
        self.kind = np.where(ph < kinds.size, kinds[np.minimum(ph, kinds.size - 1)], 0)
        self.n = tids.size
        self.reorder = reorder
        self.error: str | None = None
        self.warnings: list[str] = []

    def problem(self, msg: str, is_error: bool) -> None:
        if self.error is not None:
            return  # (Kaldi checks no more once a path has an error)
        if is_error:
            self.error = msg
        elif msg not in self.warnings:
            self.warnings.append(msg)

    def phone_end(self, i: int, body_check: bool | None, end_check: bool) -> int | None:
        """The end of the phone starting at ``i``: after its final transition-id (and the
        reordered self-loops following it); None if the path ends first or right there (more
        self-loops could follow: Kaldi does not know yet).  ``body_check``: another phone before
        the final transition-id is an error (True), a warning (False) or not checked (None);
        ``end_check``: ending in another phone is an error (else a warning)."""
        phone = self.phone[i]
        while i < self.n and not self.final[i]:
            if body_check is not None and self.phone[i] != phone:
                self.problem(_PHONE_CHANGED, body_check)
            i += 1
        if i == self.n:
            return None
        i += 1
        if self.reorder:
            while i < self.n and self.loop[i]:
                i += 1
        if i == self.n:
            return None
        if self.phone[i - 1] != phone:
            self.problem(_PHONE_CHANGED_END, end_check)
        return i

    def word_end(self, i: int) -> int | None:
        """The end of a word starting with a begin phone at ``i`` (internal phones, then an
        end phone)."""
        i = self.phone_end(i, None, True)
        if i is None:
            return None
        while i < self.n and self.kind[i] != END:
            if self.kind[i] != INTERNAL:
                self.problem(f"unexpected phone {self.phone[i]} found inside a word", True)
            i += 1
        return None if i == self.n else self.phone_end(i, True, True)

    def plausible_word(self, i: int) -> bool:
        """Kaldi's IsPlausibleWord for the transition-ids from ``i`` to the end."""
        first, last = self.kind[i], self.kind[self.n - 1]
        if not ((first == SINGLETON and self.phone[i] == self.phone[self.n - 1])
                or (first == BEGIN and last == END)):
            return False
        return bool(self.final[self.last_non_loop(i)])

    def last_non_loop(self, i: int) -> int:
        j = self.n - 1
        if self.reorder:
            while j > i and self.loop[j]:
                j -= 1
        return j


def _check_tids(tables: TransitionTables, tids: np.ndarray) -> None:
    if tids.size and (tids.min() < 1 or tids.max() >= tables.pdf.size):
        bad = int(tids.max()) if tids.max() >= tables.pdf.size else int(tids.min())
        fail(f"transition-id {bad} is not in the model (1..{tables.pdf.size - 1}): lattice of another model?")


def align_words(tables: TransitionTables, kinds: np.ndarray, tids: Sequence[int],
                words: Sequence[int], reorder: bool = True) -> WordAlignment:
    """Word-align a linear path: its transition-ids (in order, epsilons removed) and its word
    labels (in order) -> pieces (see the module's doc)."""
    tids = np.asarray(tids, np.int64)
    _check_tids(tables, tids[tids != 0] if tids.size else tids)
    al = _Aligner(tables, kinds, tids, reorder)
    pieces: list[tuple[int, int, int]] = []
    pos, wi, n = 0, 0, tids.size
    while pos < n:
        k = al.kind[pos]
        if k == NONWORD:
            end, word = al.phone_end(pos, True, False), 0
        elif k == SINGLETON and wi < len(words):
            end, word = al.phone_end(pos, False, True), words[wi]
        elif k == BEGIN and wi < len(words):
            end, word = al.word_end(pos), words[wi]
        else:  # no label left for a word, or a phone that cannot start a piece: Kaldi's
            break  # aligner is stuck till the end of the path
        if end is None:
            break
        wi += word != 0
        pieces.append((int(word), pos, end - pos))
        pos = end
    # what is left goes out as one piece (Kaldi's OutputArcForce)
    if pos < n and wi < len(words):
        if not al.plausible_word(pos):
            al.problem("invalid word at end of lattice [partial lattice, forced out?]", True)
        pieces.append((int(words[wi]), pos, n - pos))
        wi += 1
    elif pos < n:
        if al.kind[pos] != NONWORD:
            al.problem("partial word detected at end of utterance", True)
        elif al.phone[pos] != al.phone[n - 1] or not al.final[al.last_non_loop(pos)]:
            al.problem("broken silence arc at end of utterance (does not reach end of silence)", True)
        pieces.append((0, pos, n - pos))
    if wi < len(words):
        al.problem("discarding word-ids at the end of a sentence, that don't have alignments", True)
    return WordAlignment(pieces, al.error, al.warnings)


def align_lattice_words(lat: Lattice, tables: TransitionTables, kinds: np.ndarray,
                        lm_scales: Sequence[float], acoustic_scale: float = 1.0,
                        word_ins_penalty: float = 0.0, reorder: bool = True) -> list[WordAlignment | None]:
    """The word alignment of a lattice's best path at each LM scale (lattice-1best |
    lattice-align-words); None where it has no complete path."""
    _check_tids(tables, lat.ilabel[lat.ilabel != 0])
    return _align_paths(lat, tables, kinds, best_path_arcs(lat, lm_scales, acoustic_scale, word_ins_penalty),
                        reorder)


def align_lattice_words_grid(lat: Lattice, tables: TransitionTables, kinds: np.ndarray,
                             lm_scales: Sequence[float], word_ins_penalties: Sequence[float],
                             acoustic_scale: float = 1.0, reorder: bool = True) -> list[WordAlignment | None]:
    """The word alignment of the best path at each grid point of ``grid_path_arcs`` (same order)."""
    _check_tids(tables, lat.ilabel[lat.ilabel != 0])
    return _align_paths(lat, tables, kinds, grid_path_arcs(lat, lm_scales, word_ins_penalties, acoustic_scale),
                        reorder)


def _align_paths(lat: Lattice, tables: TransitionTables, kinds: np.ndarray,
                 paths: Sequence[np.ndarray | None], reorder: bool) -> list[WordAlignment | None]:
    # Grid points mostly share their path: each distinct one is aligned once (the same object
    # for all of them).
    done: dict[bytes, WordAlignment] = {}
    out: list[WordAlignment | None] = []
    for arcs in paths:
        if arcs is None:
            out.append(None)
            continue
        key = arcs.tobytes()
        if key not in done:
            il, ol = lat.ilabel[arcs], lat.olabel[arcs]
            done[key] = align_words(tables, kinds, il[il != 0], ol[ol != 0], reorder)
        out.append(done[key])
    return out


def ctm_precision(frame_shift: float, precision: int = 2) -> int:
    """nbest-to-ctm's decimals: more than asked when the frame shift needs them."""
    if frame_shift < 0.01 and precision <= 2:
        precision = 3
    if frame_shift < 0.001 and precision <= 3:
        precision = 4
    return precision


def ctm_lines(utt: str, alignment: WordAlignment, word_names: Sequence[str] | None,
              frame_shift: float = 0.01, precision: int = 2, print_silence: bool = False) -> list[str]:
    """nbest-to-ctm's lines ``<utt> 1 <start> <dur> <word>`` for one utterance (times in float
    arithmetic, as Kaldi's BaseFloat); words as symbols when ``word_names`` (index = id) is given."""
    prec = ctm_precision(frame_shift, precision)
    shift = np.float32(frame_shift)
    out = []
    for word, start, length in alignment.pieces:
        if word == 0 and not print_silence:
            continue
        if word_names is not None:
            name = word_names[word] if 0 <= word < len(word_names) else ""
            if not name:
                fail(f"word id {word} of utterance '{utt}' is not in the word symbol table")
        else:
            name = str(word)
        out.append(f"{utt} 1 {float(shift * np.float32(start)):.{prec}f} "
                   f"{float(shift * np.float32(length)):.{prec}f} {name}")
    return out


def convert_to_recording(line: str, segments: dict[str, tuple[str, float, float]],
                         reco2file_and_channel: dict[str, tuple[str, str]]) -> tuple[str, bool]:
    """A CTM line relative to its utterance -> relative to the recording, as Kaldi's
    utils/convert_ctm.pl: ``<file> <channel> <start+segment start> <dur> <word> [<conf>]`` with
    both times printed to 2 decimals.  Also says whether the word ends more than 10 ms past the
    segment's end (convert_ctm.pl's warning)."""
    f = split_fields(line)
    if len(f) not in (5, 6):
        fail(f"unexpected ctm format: '{line}'")
    seg = segments.get(f[0])
    if seg is None:
        fail(f"utterance-id {f[0]} not defined in the segments file")
    reco, begin, end = seg
    fc = reco2file_and_channel.get(reco)
    if fc is None:
        fail(f"recording-id {reco} not defined in the reco2file_and_channel file")
    start = f"{float(f[2]) + begin:.2f}"
    dur = f"{float(f[3]):.2f}"
    past_end = float(start) + float(dur) > end + 0.01
    return " ".join([fc[0], fc[1], start, dur] + f[4:]), past_end


__all__ = ["read_word_boundary", "best_path_arcs", "grid_path_arcs", "align_lattice_words_grid", "WordAlignment", "align_words", "align_lattice_words",
           "ctm_precision", "ctm_lines", "convert_to_recording", "NONWORD", "BEGIN", "END", "SINGLETON",
           "INTERNAL"]
