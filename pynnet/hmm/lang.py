"""Kaldi lang directories: utils/prepare_lang.sh in Python, and ``Lang.load`` for the other stages.

``prepare_lang`` turns a dict dir (data/local/dict: lexicon.txt or lexiconp.txt, silence_phones.txt,
nonsilence_phones.txt, optional_silence.txt, extra_questions.txt) into a lang dir laid out exactly as
Kaldi's egs/wsj/s5/utils/prepare_lang.sh does (phones.txt, words.txt, topo, oov.{txt,int}, L.fst,
L_disambig.fst, phones/*.{txt,int,csl}), so Kaldi's own tools can read it and vice versa.
"""
from __future__ import annotations

import math
import os
import random
import re
import shutil
import sys
from dataclasses import dataclass, field

from pynnet.io.atomic import atomic_path, atomic_write, make_temp_dir
from pynnet.io.errors import PynnetError, fail
from pynnet.io.tables import ascii_float, ascii_int, split_fields, split_lines

POS_SUFFIXES = ("_B", "_E", "_I", "_S")
# Words Kaldi reserves in words.txt / the LM; a lexicon must not contain them.
RESERVED_WORDS = ("<eps>", "#0", "<s>", "</s>")


# ----------------------------------------------------------------------------------------------
# Reading and validating a dict dir (what Kaldi's utils/validate_dict_dir.pl checks)
# ----------------------------------------------------------------------------------------------

@dataclass
class LexEntry:
    word: str
    prob: float
    phones: list[str]


@dataclass
class DictDir:
    silence_lines: list[list[str]]       # silence_phones.txt, one root (shared phones) per line
    nonsilence_lines: list[list[str]]    # nonsilence_phones.txt
    optional_silence: str
    extra_questions: list[list[str]]
    lexicon: list[LexEntry]
    has_pron_probs: bool = False


def _read_lines(path: str) -> list[tuple[int, list[str]]]:
    """(line_number, fields) of a UTF-8 text file; undecodable bytes are an error naming file:line."""
    if not os.path.isfile(path):
        fail("no such file", path)
    lines = []
    with open(path, "rb") as f:
        for n, raw in enumerate(f, 1):
            try:
                lines.append(raw.decode("utf-8"))
            except UnicodeDecodeError:
                fail("not valid UTF-8", path, n)
    return list(enumerate(split_lines(lines), 1))


def _read_phone_lines(path: str, *, allow_empty_file: bool = False) -> list[list[str]]:
    lines = []
    for n, fields in _read_lines(path):
        if not fields:
            fail("empty line", path, n)
        for p in fields:
            if p.startswith("#"):
                fail(f"phone '{p}' starts with '#' (reserved for disambiguation symbols)", path, n)
            if p == "<eps>":
                fail("'<eps>' is not a valid phone", path, n)
        lines.append(fields)
    if not lines and not allow_empty_file:
        fail("file is empty", path)
    return lines


def read_dict_dir(dict_dir: str, position_dependent: bool = True) -> DictDir:
    """Read and validate a Kaldi dict dir; every problem is a one-line error naming file:line."""
    if not os.path.isdir(dict_dir):
        fail("no such dict directory", dict_dir)
    j = lambda name: os.path.join(dict_dir, name)  # noqa: E731
    # Kaldi builds a lexicon FST with pronunciation-dependent silence probabilities from these
    # (steps/get_prons.sh + utils/dict_dir_add_pronprobs.sh); we do not, and must not silently
    # build the plain L.fst instead
    for name in ("lexiconp_silprob.txt", "silprob.txt"):
        if os.path.exists(j(name)):
            fail("pronunciation-dependent silence probabilities (Kaldi's dict_dir_add_pronprobs.sh) "
                 "are not supported", j(name))
    if os.path.exists(j("nonterminals.txt")):
        # Kaldi's prepare_lang.sh adds #nonterm symbols for grammar-FST decoding from it; we do not
        fail("nonterminal symbols (Kaldi's grammar-FST decoding) are not supported", j("nonterminals.txt"))
    sil = _read_phone_lines(j("silence_phones.txt"))
    nonsil = _read_phone_lines(j("nonsilence_phones.txt"))
    seen: dict[str, str] = {}
    for fname, lines in (("silence_phones.txt", sil), ("nonsilence_phones.txt", nonsil)):
        for idx, fields in enumerate(lines, 1):
            for p in fields:
                if p in seen:
                    fail(f"phone '{p}' is listed twice (also in {seen[p]})", j(fname), idx)
                if position_dependent and p.endswith(POS_SUFFIXES):
                    fail(f"phone '{p}' ends in _B/_E/_I/_S, which position-dependent phones reserve "
                         "(use --position-dependent-phones false or rename it)", j(fname), idx)
                seen[p] = fname
    opt_lines = _read_phone_lines(j("optional_silence.txt"))
    if len(opt_lines) != 1 or len(opt_lines[0]) != 1:
        fail("must contain exactly one phone", j("optional_silence.txt"), 1)
    opt = opt_lines[0][0]
    if seen.get(opt) != "silence_phones.txt":
        fail(f"optional silence '{opt}' is not in silence_phones.txt", j("optional_silence.txt"), 1)

    extra: list[list[str]] = []
    if os.path.exists(j("extra_questions.txt")):
        for n, fields in _read_lines(j("extra_questions.txt")):
            if not fields:
                fail("empty line", j("extra_questions.txt"), n)
            for p in fields:
                if p not in seen:
                    fail(f"phone '{p}' is not in silence_phones.txt or nonsilence_phones.txt",
                         j("extra_questions.txt"), n)
            extra.append(fields)

    if os.path.exists(j("lexiconp.txt")):
        lex_path, probs = j("lexiconp.txt"), True
    elif os.path.exists(j("lexicon.txt")):
        lex_path, probs = j("lexicon.txt"), False
    else:
        fail("neither lexicon.txt nor lexiconp.txt exists", dict_dir)
    lexicon = _read_lexicon(lex_path, probs, seen)
    if not lexicon:
        fail("lexicon is empty", lex_path)
    if probs and os.path.exists(j("lexicon.txt")):
        _check_same_pronunciations(j("lexicon.txt"), lex_path, [(e.word, tuple(e.phones)) for e in lexicon])
    return DictDir(sil, nonsil, opt, extra, lexicon, probs)


def _read_lexicon(lex_path: str, probs: bool, phones: dict[str, str] | set[str]) -> list[LexEntry]:
    """The entries of lexicon.txt (``probs`` False) or lexiconp.txt; ``phones``: the dict dir's
    phones. Reserved words, bad probabilities, empty pronunciations, unknown phones and repeated
    entries are one-line errors naming file:line."""
    lexicon: list[LexEntry] = []
    seen_entries: set[tuple[str, tuple[str, ...]]] = set()
    for n, fields in _read_lines(lex_path):
        if not fields:
            fail("empty line", lex_path, n)
        word, rest = fields[0], fields[1:]
        if word in RESERVED_WORDS:
            fail(f"word '{word}' is reserved and must not be in the lexicon", lex_path, n)
        if word.startswith("#"):
            fail(f"word '{word}' starts with '#' (reserved for disambiguation symbols)", lex_path, n)
        prob = 1.0
        if probs:
            if not rest:
                fail(f"word '{word}' has no pronunciation probability", lex_path, n)
            prob = ascii_float(rest[0])
            if prob is None:
                fail(f"bad pronunciation probability '{rest[0]}' (lexiconp.txt is: word prob phones)",
                     lex_path, n)
            if not (0.0 < prob <= 1.0):
                fail(f"pronunciation probability {rest[0]} is not in (0, 1]", lex_path, n)
            rest = rest[1:]
        if not rest:
            fail(f"word '{word}' has an empty pronunciation", lex_path, n)
        for p in rest:
            if p not in phones:
                fail(f"phone '{p}' of word '{word}' is not in silence_phones.txt or nonsilence_phones.txt",
                     lex_path, n)
        key = (word, tuple(rest))
        if key in seen_entries:
            fail(f"duplicate entry for word '{word}' with pronunciation '{' '.join(rest)}'", lex_path, n)
        seen_entries.add(key)
        lexicon.append(LexEntry(word, prob, rest))
    return lexicon


def _check_same_pronunciations(lexicon_txt: str, lexiconp_txt: str, entries: list[tuple[str, tuple[str, ...]]]) -> None:
    """With both files present lexiconp.txt is used; they must list the same pronunciations (as
    Kaldi's validate_dict_dir.pl requires), or the one the user edited is silently ignored."""
    plain = {(f[0], tuple(f[1:])): n for n, f in _read_lines(lexicon_txt) if f}
    withp = dict.fromkeys(entries)
    for (word, pron), n in plain.items():
        if (word, pron) not in withp:
            fail(f"word '{word}' ({' '.join(pron)}) is not in {lexiconp_txt}, which is the one used: "
                 "the two lexicons must agree", lexicon_txt, n)
    for word, pron in entries:
        if (word, pron) not in plain:
            fail(f"word '{word}' ({' '.join(pron)}) of lexiconp.txt is not in {lexicon_txt}: the two "
                 "lexicons must agree", lexiconp_txt)


# ----------------------------------------------------------------------------------------------
# prepare_lang
# ----------------------------------------------------------------------------------------------

def _phone_variants(phone: str, silence: bool, position_dependent: bool) -> list[str]:
    """Kaldi's phone_map: SIL -> SIL SIL_B SIL_E SIL_I SIL_S; AA -> AA_B AA_E AA_I AA_S."""
    if not position_dependent:
        return [phone]
    return ([phone] if silence else []) + [phone + s for s in POS_SUFFIXES]


def _position_phones(phones: list[str]) -> list[str]:
    if len(phones) == 1:
        return [phones[0] + "_S"]
    return [phones[0] + "_B"] + [p + "_I" for p in phones[1:-1]] + [phones[-1] + "_E"]


def add_lex_disambig(prons: list[list[str]], first: int = 1) -> tuple[list[list[str]], int]:
    """Append #1, #2 ... to pronunciations that are a prefix of another or are repeated
    (Kaldi's utils/add_lex_disambig.pl). Returns the new pronunciations and the largest symbol used."""
    count: dict[tuple[str, ...], int] = {}
    prefixes: set[tuple[str, ...]] = set()
    for p in prons:
        t = tuple(p)
        count[t] = count.get(t, 0) + 1
        for n in range(1, len(t)):
            prefixes.add(t[:n])
    last_used: dict[tuple[str, ...], int] = {}
    max_disambig = 0
    out = []
    for p in prons:
        t = tuple(p)
        if t in prefixes or count[t] > 1:
            d = last_used.get(t, first - 1) + 1
            last_used[t] = d
            max_disambig = max(max_disambig, d)
            out.append(list(p) + [f"#{d}"])
        else:
            out.append(list(p))
    return out, max_disambig


def make_topo(nonsil_ids: list[int], sil_ids: list[int], num_nonsil_states: int = 3,
              num_sil_states: int = 5) -> str:
    """The HMM topology Kaldi's utils/gen_topo.pl writes (text form of HmmTopology)."""
    lines = ["<Topology>"]
    if nonsil_ids:
        lines += ["<TopologyEntry>", "<ForPhones>", " ".join(map(str, nonsil_ids)), "</ForPhones>"]
        for s in range(num_nonsil_states):
            lines.append(f"<State> {s} <PdfClass> {s} <Transition> {s} 0.75 <Transition> {s + 1} 0.25 </State>")
        lines += [f"<State> {num_nonsil_states} </State>", "</TopologyEntry>"]
    if sil_ids:
        lines += ["<TopologyEntry>", "<ForPhones>", " ".join(map(str, sil_ids)), "</ForPhones>"]
        n = num_sil_states
        if n > 1:
            tp = 1.0 / (n - 1)
            lines.append("<State> 0 <PdfClass> 0 " + "".join(f"<Transition> {t} {tp:g} " for t in range(n - 1))
                         + "</State>")
            for s in range(1, n - 1):
                lines.append(f"<State> {s} <PdfClass> {s} " + "".join(f"<Transition> {t} {tp:g} " for t in range(1, n))
                             + "</State>")
            lines.append(f"<State> {n - 1} <PdfClass> {n - 1} <Transition> {n - 1} 0.75 <Transition> {n} 0.25 </State>")
            lines.append(f"<State> {n} </State>")
        else:
            lines += ["<State> 0 <PdfClass> 0 <Transition> 0 0.75 <Transition> 1 0.25 </State>", "<State> 1 </State>"]
        lines.append("</TopologyEntry>")
    lines.append("</Topology>")
    return "\n".join(lines) + "\n"


def lexicon_fst_text(entries: list[tuple[str, float, list[str]]], sil_prob: float, sil_phone: str | None,
                     sil_disambig: str | None = None, isyms: dict[str, int] | None = None,
                     osyms: dict[str, int] | None = None) -> str:
    """OpenFst text of the lexicon FST (phones in, words out), as Kaldi's make_lexicon_fst.pl:
    optional silence (cost -log sil_prob) at the start and after each word; pronunciation
    probabilities become a cost on each word's first arc. With ``isyms``/``osyms`` the labels are
    written as integers (ready for ``kaldifst.compile``), else as symbols."""
    ip = isyms.__getitem__ if isyms is not None else str
    op = osyms.__getitem__ if osyms is not None else str
    eps_i, eps_o = ip("<eps>"), op("<eps>")
    arcs: list[str] = []
    if sil_prob > 0.0:
        if not (0.0 < sil_prob < 1.0):
            raise PynnetError(f"--sil-prob must be in [0, 1), got {sil_prob}")
        silcost, nosilcost = -math.log(sil_prob), -math.log(1.0 - sil_prob)
        sil = ip(sil_phone)
        start, loop, silstate = 0, 1, 2
        arcs.append(f"{start} {loop} {eps_i} {eps_o} {nosilcost:.6g}")
        if sil_disambig is None:
            arcs.append(f"{start} {loop} {sil} {eps_o} {silcost:.6g}")
            arcs.append(f"{silstate} {loop} {sil} {eps_o}")
            next_state = 3
        else:
            # The silence disambiguation symbol keeps L_disambig determinizable after silence.
            dstate = 3
            arcs.append(f"{start} {dstate} {sil} {eps_o} {silcost:.6g}")
            arcs.append(f"{silstate} {dstate} {sil} {eps_o}")
            arcs.append(f"{dstate} {loop} {ip(sil_disambig)} {eps_o}")
            next_state = 4
    else:
        start = loop = 0
        silstate = None
        next_state = 1
        silcost = nosilcost = 0.0
        sil = None
    for word, prob, phones in entries:
        pron_cost = -math.log(prob) if prob != 1.0 else 0.0
        s = loop
        out = op(word)
        labels = [ip(p) for p in phones]
        last = len(labels) - 1
        for i, p in enumerate(labels):
            cost = pron_cost if i == 0 else 0.0
            if i < last:
                ns = next_state
                next_state += 1
                arcs.append(f"{s} {ns} {p} {out} {cost:.6g}" if cost else f"{s} {ns} {p} {out}")
                s = ns
            elif silstate is not None and p != sil:
                # Word end: either no silence, or go to the silence state (non-deterministic, compact).
                arcs.append(f"{s} {loop} {p} {out} {cost + nosilcost:.6g}")
                arcs.append(f"{s} {silstate} {p} {out} {cost + silcost:.6g}")
            else:
                arcs.append(f"{s} {loop} {p} {out} {cost:.6g}" if cost else f"{s} {loop} {p} {out}")
            out = eps_o
    arcs.append(f"{loop} 0")
    return "\n".join(arcs) + "\n"


def compile_fst(text: str):
    """Compile OpenFst text with integer labels (fstcompile)."""
    import kaldi_hmm_gmm  # noqa: F401  (must be imported before kaldifst)
    import kaldifst

    return kaldifst.compile(text, acceptor=False)


def write_fst(fst, path: str) -> None:
    """Write an FST in OpenFst binary form, atomically."""
    with atomic_path(path) as tmp:
        fst.write(tmp)


def _write_lines(path: str, lines) -> None:
    with atomic_write(path) as f:
        for line in lines:
            f.write(line + "\n")


def prepare_lang(dict_dir: str, oov_word: str, tmp_dir: str, lang_dir: str, *,
                 position_dependent: bool = True, num_sil_states: int = 5, num_nonsil_states: int = 3,
                 sil_prob: float = 0.5, phone_symbol_table: str | None = None,
                 share_silence_phones: bool = False) -> "Lang":
    """Build a Kaldi lang dir from a dict dir (utils/prepare_lang.sh). The lang dir is assembled in
    a temporary directory next to ``lang_dir`` and renamed into place, so a failure leaves nothing
    half-written. ``tmp_dir`` receives the intermediate lexicons as Kaldi's does.
    ``phone_symbol_table`` (Kaldi's --phone-symbol-table, e.g. an existing lang dir's phones.txt):
    the phones keep that table's ids, so models trained with it fit the new lang dir.
    ``share_silence_phones`` (Kaldi's --share-silence-phones): all silence phones share their pdfs."""
    import kaldi_hmm_gmm  # noqa: F401
    import kaldifst

    if num_sil_states < 1 or num_nonsil_states < 1:
        raise PynnetError("--num-sil-states and --num-nonsil-states must be >= 1")
    d = read_dict_dir(dict_dir, position_dependent)
    pd = position_dependent

    # Phone inventory: <eps>, silence phones (with variants), nonsilence phones, disambig symbols.
    sil_phones = [v for line in d.silence_lines for p in line for v in _phone_variants(p, True, pd)]
    nonsil_phones = [v for line in d.nonsilence_lines for p in line for v in _phone_variants(p, False, pd)]
    variants = {p: _phone_variants(p, True, pd) for line in d.silence_lines for p in line}
    variants.update({p: _phone_variants(p, False, pd) for line in d.nonsilence_lines for p in line})
    sets = [[v for p in line for v in variants[p]] for line in d.silence_lines + d.nonsilence_lines]
    if share_silence_phones:
        # one tree root for every silence phone: 'not-shared not-split', so each HMM state keeps
        # its own pdf, shared by all silence phones, which differ only in transitions (Kaldi's)
        sets = [[v for line in d.silence_lines for p in line for v in variants[p]]] + sets[len(d.silence_lines):]
    root_kinds = ["not-shared not-split " if share_silence_phones and i == 0 else "shared split "
                  for i in range(len(sets))]
    extra_q = [[v for p in q for v in variants[p]] for q in d.extra_questions]
    if pd:
        for suf in POS_SUFFIXES:
            extra_q.append([p + suf for line in d.nonsilence_lines for p in line])
        for suf in ("",) + POS_SUFFIXES:
            extra_q.append([p + suf for line in d.silence_lines for p in line])

    # Lexicon with position-dependent phones, then disambiguation symbols.
    lex = [(e.word, e.prob, _position_phones(e.phones) if pd else list(e.phones)) for e in d.lexicon]
    prons_disambig, max_disambig = add_lex_disambig([p for _, _, p in lex])
    ndisambig = max_disambig + 1  # one more for silence in L_disambig (Kaldi's num_extra_disambig=1)
    disambig = [f"#{i}" for i in range(ndisambig + 1)]

    phone_list = ["<eps>"] + sil_phones + nonsil_phones + disambig
    phones = {p: i for i, p in enumerate(phone_list)}
    if phone_symbol_table:
        phones = _phone_ids_from_table(phone_symbol_table, sil_phones + nonsil_phones, disambig, pd)
        phone_list.sort(key=phones.__getitem__)
    words_sorted = sorted({w for w, _, _ in lex}, key=lambda w: w.encode())
    word_list = ["<eps>"] + words_sorted + ["#0", "<s>", "</s>"]
    words = {w: i for i, w in enumerate(word_list)}
    if oov_word not in words or oov_word in RESERVED_WORDS:
        fail(f"OOV word '{oov_word}' is not in the lexicon (add e.g. '{oov_word} SPN' to lexicon.txt)",
             os.path.join(dict_dir, "lexiconp.txt" if d.has_pron_probs else "lexicon.txt"))

    # Intermediate lexicons, as Kaldi leaves them in <tmp-dir>.
    os.makedirs(tmp_dir, exist_ok=True)
    _write_lines(os.path.join(tmp_dir, "lexiconp.txt"), (f"{w} {pr:g} {' '.join(p)}" for w, pr, p in lex))
    _write_lines(os.path.join(tmp_dir, "lexiconp_disambig.txt"),
                 (f"{w} {pr:g} {' '.join(p)}" for (w, pr, _), p in zip(lex, prons_disambig)))

    parent = os.path.dirname(os.path.abspath(lang_dir))
    os.makedirs(parent, exist_ok=True)
    stage = make_temp_dir(parent, "." + os.path.basename(os.path.abspath(lang_dir)) + ".")
    try:
        P = lambda *n: os.path.join(stage, *n)  # noqa: E731
        os.makedirs(P("phones"))
        _write_lines(P("phones.txt"), (f"{p} {phones[p]}" for p in phone_list))
        _write_lines(P("words.txt"), (f"{w} {i}" for i, w in enumerate(word_list)))
        _write_lines(P("oov.txt"), [oov_word])
        _write_lines(P("oov.int"), [str(words[oov_word])])

        def phone_set_files(name: str, plist: list[str]) -> None:
            _write_lines(P("phones", name + ".txt"), plist)
            _write_lines(P("phones", name + ".int"), (str(phones[p]) for p in plist))
            with open(P("phones", name + ".csl"), "w") as f:
                f.write(":".join(str(phones[p]) for p in plist) + "\n")

        phone_set_files("silence", sil_phones)
        phone_set_files("nonsilence", nonsil_phones)
        phone_set_files("optional_silence", [d.optional_silence])
        phone_set_files("disambig", disambig)
        phone_set_files("context_indep", sil_phones)

        def multi_files(name: str, rows: list[list[str]], prefixes: list[str] | None = None) -> None:
            pre = prefixes or [""] * len(rows)
            _write_lines(P("phones", name + ".txt"), (x + " ".join(r) for x, r in zip(pre, rows)))
            _write_lines(P("phones", name + ".int"), (x + " ".join(str(phones[p]) for p in r) for x, r in zip(pre, rows)))

        multi_files("sets", sets)
        multi_files("roots", sets, root_kinds)
        multi_files("extra_questions", extra_q)
        if pd:
            def boundary(p: str) -> str:
                for suf, kind in (("_I", "internal"), ("_B", "begin"), ("_S", "singleton"), ("_E", "end")):
                    if p.endswith(suf):
                        return kind
                return "nonword"
            wb = [(p, boundary(p)) for p in sil_phones + nonsil_phones]
            _write_lines(P("phones", "word_boundary.txt"), (f"{p} {k}" for p, k in wb))
            _write_lines(P("phones", "word_boundary.int"), (f"{phones[p]} {k}" for p, k in wb))
        _write_lines(P("phones", "wdisambig.txt"), ["#0"])
        _write_lines(P("phones", "wdisambig_phones.int"), [str(phones["#0"])])
        _write_lines(P("phones", "wdisambig_words.int"), [str(words["#0"])])

        # align_lexicon: "<word> <word> <phones>", plus optional silence as <eps>; sorted, unique.
        al = {f"<eps> <eps> {d.optional_silence}"} | {f"{w} {w} {' '.join(p)}" for w, _, p in lex}
        al_sorted = sorted(al, key=lambda s: s.encode())
        _write_lines(P("phones", "align_lexicon.txt"), al_sorted)
        _write_lines(P("phones", "align_lexicon.int"),
                     (" ".join([str(words[f[0]]), str(words[f[1]])] + [str(phones[p]) for p in f[2:]])
                      for f in map(split_fields, al_sorted)))

        with open(P("topo"), "w") as f:
            f.write(make_topo([phones[p] for p in nonsil_phones], [phones[p] for p in sil_phones],
                              num_nonsil_states, num_sil_states))

        sil_phone = d.optional_silence
        L = compile_fst(lexicon_fst_text(lex, sil_prob, sil_phone, isyms=phones, osyms=words))
        kaldifst.arcsort(L, sort_type="olabel")
        L.write(P("L.fst"))
        lex_d = [(w, pr, p) for (w, pr, _), p in zip(lex, prons_disambig)]
        Ld = compile_fst(lexicon_fst_text(lex_d, sil_prob, sil_phone, sil_disambig=f"#{ndisambig}",
                                          isyms=phones, osyms=words))
        # #0 self-loops (word-level disambiguation from G's backoff arcs) pass through L_disambig.
        kaldifst.add_self_loops(Ld, [phones["#0"]], [words["#0"]])
        kaldifst.arcsort(Ld, sort_type="olabel")
        Ld.write(P("L_disambig.fst"))

        if os.path.isdir(lang_dir):
            old = lang_dir.rstrip("/") + ".old." + str(os.getpid())
            os.rename(lang_dir, old)
            os.rename(stage, lang_dir)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(stage, lang_dir)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    return Lang.load(lang_dir)


def _phone_ids_from_table(path: str, phone_names: list[str], disambig: list[str], pd: bool) -> dict[str, int]:
    """Phone ids from an existing phones.txt (Kaldi's prepare_lang.sh --phone-symbol-table): every
    phone of the dict dir must be in it, with the same position dependency; the disambiguation
    symbols are numbered on from the table's #0."""
    table, _ = read_symbol_table(path)
    names = {s for s in table if not re.fullmatch(r"#[0-9]+", s)}
    has_positions = len(names) != len({re.sub(r"_[BEIS]$", "", s) for s in names})
    if pd and not has_positions:
        fail("position-dependent phones requested, but the table has none (--position-dependent-phones false?)", path)
    if not pd and has_positions:
        fail("the table has position-dependent phones, but --position-dependent-phones is false", path)
    for p in phone_names:
        if p not in table:
            fail(f"phone '{p}' of the dict dir is not in the phone symbol table", path)
    if "#0" not in table:
        fail("no disambiguation symbol #0 in the phone symbol table", path)
    ids = {"<eps>": table.get("<eps>", 0)} | {p: table[p] for p in phone_names}
    ids |= {sym: table["#0"] + k for k, sym in enumerate(disambig)}
    if len(set(ids.values())) != len(ids):
        fail("the disambiguation symbols numbered on from #0 would reuse a phone's id", path)
    return ids


# ----------------------------------------------------------------------------------------------
# Loading a lang dir
# ----------------------------------------------------------------------------------------------

def read_symbol_table(path: str) -> tuple[dict[str, int], list[str]]:
    """Read phones.txt / words.txt (``symbol id`` lines); ids need not be dense, gaps stay ''."""
    sym: dict[str, int] = {}
    by_id: dict[int, str] = {}
    top, top_line = -1, None
    for n, fields in _read_lines(path):
        if len(fields) != 2:
            fail(f"expected 'symbol id', got '{' '.join(fields)}'", path, n)
        i = ascii_int(fields[1])
        if i is None:
            fail(f"bad id '{fields[1]}'", path, n)
        if i < 0:
            fail(f"negative id {i}", path, n)
        if i >= 1 << 31:
            fail(f"id {i} is too large (Kaldi's symbol ids are 32-bit integers)", path, n)
        if fields[0] in sym:
            fail(f"duplicate symbol '{fields[0]}'", path, n)
        if i in by_id:
            fail(f"id {i} used twice ('{by_id[i]}' and '{fields[0]}')", path, n)
        sym[fields[0]] = i
        by_id[i] = fields[0]
        if i > top:
            top, top_line = i, n
    if not sym:
        fail("file is empty", path)
    if top >= 1 << 20 and top >= 2 * len(sym):
        # (the names are a list indexed by id: a stray huge id would take gigabytes)
        fail(f"id {top} of '{by_id[top]}' leaves most ids up to it unused ({len(sym)} symbols): "
             "ids should be consecutive", path, top_line)
    names = [""] * (top + 1)
    for s, i in sym.items():
        names[i] = s
    return sym, names


def _read_int_rows(path: str, skip: int = 0) -> list[list[int]]:
    """The integers of each line of ``path`` (a blank line is an empty row), after ``skip`` fields;
    anything but ASCII integers is an error naming file:line."""
    rows = []
    for n, fields in _read_lines(path):
        row = [ascii_int(x) for x in fields[skip:]]
        if None in row:
            fail(f"expected integers, got '{' '.join(fields)}'", path, n)
        rows.append(row)
    return rows


def _read_oov_word(lang_dir: str, words: dict[str, int]) -> str:
    """The one word of <lang_dir>/oov.txt, which must be in words.txt."""
    path = os.path.join(lang_dir, "oov.txt")
    rows = _read_lines(path)
    if len(rows) != 1 or len(rows[0][1]) != 1:
        fail("must contain exactly one word", path)
    word = rows[0][1][0]
    if word not in words:
        fail(f"OOV word '{word}' is not in words.txt", path, 1)
    return word


@dataclass
class Lang:
    """A Kaldi lang dir, read from disk (``Lang.load``)."""
    dir: str
    phones: dict[str, int]
    phone_names: list[str]
    words: dict[str, int]
    word_names: list[str]
    silence_phones: list[int]
    nonsilence_phones: list[int]
    optional_silence: int
    disambig_phones: list[int]
    context_indep: list[int]
    roots: list[tuple[bool, bool, list[int]]]
    sets: list[list[int]]
    extra_questions: list[list[int]]
    oov_word: str
    oov_id: int
    position_dependent: bool
    word_boundary: dict[int, str] = field(default_factory=dict)

    @property
    def topo_path(self) -> str:
        return os.path.join(self.dir, "topo")

    @classmethod
    def load(cls, lang_dir: str) -> "Lang":
        if not os.path.isdir(lang_dir):
            fail("no such lang directory", lang_dir)
        j = lambda *n: os.path.join(lang_dir, *n)  # noqa: E731
        phones, phone_names = read_symbol_table(j("phones.txt"))
        words, word_names = read_symbol_table(j("words.txt"))
        flat = lambda name: [x for r in _read_int_rows(j("phones", name + ".int")) for x in r]  # noqa: E731
        roots = []
        for n, fields in _read_lines(j("phones", "roots.int")):
            if len(fields) < 3 or fields[0] not in ("shared", "not-shared") or fields[1] not in ("split", "not-split"):
                fail("expected '{shared|not-shared} {split|not-split} <phones>'", j("phones", "roots.int"), n)
            ids = [ascii_int(x) for x in fields[2:]]
            if None in ids:
                fail("expected integer phone ids", j("phones", "roots.int"), n)
            roots.append((fields[0] == "shared", fields[1] == "split", ids))
        oov_word = _read_oov_word(lang_dir, words)
        opt = flat("optional_silence")
        if len(opt) != 1:
            fail("must contain exactly one phone id", j("phones", "optional_silence.int"))
        wb: dict[int, str] = {}
        if os.path.exists(j("phones", "word_boundary.int")):
            for n, fields in _read_lines(j("phones", "word_boundary.int")):
                if len(fields) != 2 or ascii_int(fields[0]) is None:
                    fail("expected '<phone-id> <begin|end|internal|singleton|nonword>'",
                         j("phones", "word_boundary.int"), n)
                wb[ascii_int(fields[0])] = fields[1]
        eq = _read_int_rows(j("phones", "extra_questions.int")) if os.path.exists(
            j("phones", "extra_questions.int")) else []
        lang = cls(dir=lang_dir, phones=phones, phone_names=phone_names, words=words, word_names=word_names,
                   silence_phones=flat("silence"), nonsilence_phones=flat("nonsilence"),
                   optional_silence=opt[0], disambig_phones=flat("disambig"),
                   context_indep=flat("context_indep"), roots=roots, sets=_read_int_rows(j("phones", "sets.int")),
                   extra_questions=eq, oov_word=oov_word, oov_id=words[oov_word],
                   position_dependent=bool(wb) and any(p.endswith("_B") for p in phones),
                   word_boundary=wb)
        for pid in lang.silence_phones + lang.nonsilence_phones + lang.disambig_phones:
            if pid >= len(phone_names) or not phone_names[pid]:
                fail(f"phone id {pid} is not in phones.txt", lang_dir)
        return lang

    @property
    def real_phones(self) -> list[int]:
        """Silence + nonsilence phone ids, sorted (what the topology and trees cover)."""
        return sorted(self.silence_phones + self.nonsilence_phones)

    def topo(self):
        """The HMM topology as a ``kaldi_hmm_gmm.HmmTopology``."""
        import kaldi_hmm_gmm

        t = kaldi_hmm_gmm.HmmTopology()
        with open(self.topo_path) as f:
            text = f.read()
        try:
            t.read(text)
        except Exception as e:  # the C++ reader raises a generic error
            fail(f"cannot read HMM topology: {e}", self.topo_path)
        return t

    def _read_fst(self, name: str):
        import kaldi_hmm_gmm  # noqa: F401
        import kaldifst

        path = os.path.join(self.dir, name)
        if not os.path.exists(path):
            fail("no such file", path)
        return kaldifst.StdVectorFst.read(path)

    def L_fst(self):
        return self._read_fst("L.fst")

    def L_disambig_fst(self):
        return self._read_fst("L_disambig.fst")

    def words_to_ids(self, words: list[str]) -> list[int]:
        """Word ids; words not in words.txt map to the OOV word's id."""
        w, oov = self.words, self.oov_id
        return [w.get(x, oov) for x in words]


def map_text_to_ids(text_file: str, lang: Lang, quiet: bool = False) -> dict[str, list[int]]:
    """Read a Kaldi ``text`` file (utt-id word...) into word ids, mapping words missing from the
    lexicon to the OOV word and reporting ``N words (M tokens) mapped to <oov>`` on stderr."""
    out: dict[str, list[int]] = {}
    oov_types: dict[str, int] = {}
    for n, fields in _read_lines(text_file):
        if not fields:
            fail("empty line", text_file, n)
        utt = fields[0]
        if utt in out:
            fail(f"duplicate utterance id '{utt}'", text_file, n)
        ids = []
        for w in fields[1:]:
            i = lang.words.get(w)
            if i is None or w in ("<eps>", "#0", "<s>", "</s>"):
                if w in ("<eps>", "#0", "<s>", "</s>"):
                    fail(f"reserved symbol '{w}' in transcript", text_file, n)
                oov_types[w] = oov_types.get(w, 0) + 1
                i = lang.oov_id
            ids.append(i)
        out[utt] = ids
    if oov_types and not quiet:
        top = sorted(oov_types.items(), key=lambda kv: -kv[1])[:10]
        print(f"{text_file}: {len(oov_types)} words ({sum(oov_types.values())} tokens) mapped to "
              f"{lang.oov_word}; most frequent: " + " ".join(f"{w}({c})" for w, c in top), file=sys.stderr)
    return out


# ----------------------------------------------------------------------------------------------
# Validating dict and lang dirs (Kaldi's utils/validate_dict_dir.pl and utils/validate_lang.pl)
# ----------------------------------------------------------------------------------------------

# What perl's \s takes for whitespace besides space, tab, newline and CR: Kaldi's validation
# scripts refuse these (its programs split fields at spaces and tabs only, so one would end up
# inside a word or phone)
_OTHER_WHITESPACE = re.compile("[\v\f\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]")


def check_kaldi_text(path: str) -> None:
    """What Kaldi's validate_dict_dir.pl / validate_lang.pl check of a text file's bytes: UTF-8,
    no carriage return (DOS line ends), no whitespace but spaces and tabs within lines, and a
    newline at the end of the last line; the first problem is an error naming file:line."""
    if not os.path.isfile(path):
        fail("no such file", path)
    with open(path, "rb") as f:
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        fail("not valid UTF-8", path, data.count(b"\n", 0, e.start) + 1)
    line = lambda pos: text.count("\n", 0, pos) + 1  # noqa: E731
    cr = text.find("\r")
    if cr >= 0:
        fail("carriage return (^M): DOS line ends? (remove them with: sed -i 's/\\r$//' FILE)", path, line(cr))
    m = _OTHER_WHITESPACE.search(text)
    if m:
        fail(f"whitespace character U+{ord(m.group()):04X} (fields are separated by spaces and tabs only)",
             path, line(m.start()))
    if text and not text.endswith("\n"):
        fail("the last line does not end in a newline", path, line(len(text)))


def validate_dict_dir(dict_dir: str, say=None) -> list[str]:
    """Kaldi's utils/validate_dict_dir.pl: everything prepare_lang refuses (``read_dict_dir``), and
    what Kaldi's script refuses besides though prepare_lang copes with it: carriage returns, other
    whitespace than spaces and tabs, a last line without its newline, phone names ending in
    _B/_E/_I/_S (whatever --position-dependent-phones), a lexicon.txt next to the lexiconp.txt that
    is used with errors of its own, and phones that share a line of nonsilence_phones.txt (one tree
    root) with no line of extra_questions.txt telling them apart.  ``say`` gets progress lines.
    Returns warnings (nonsilence phones that no word uses); the first error raises PynnetError."""
    say = say or (lambda s: None)
    if not os.path.isdir(dict_dir):
        fail("no such dict directory", dict_dir)
    j = lambda name: os.path.join(dict_dir, name)  # noqa: E731
    for name in ("silence_phones.txt", "optional_silence.txt", "nonsilence_phones.txt", "lexicon.txt",
                 "lexiconp.txt", "extra_questions.txt"):
        if os.path.exists(j(name)):
            say(f"Checking {j(name)} ...")
            check_kaldi_text(j(name))
    say("Checking the phone lists, the lexicon and extra_questions.txt as prepare_lang reads them ...")
    for name in ("silence_phones.txt", "nonsilence_phones.txt"):
        if os.path.exists(j(name)):
            for n, line in enumerate(_read_phone_lines(j(name)), 1):   # it refuses empty lines
                for p in line:
                    if p.endswith(POS_SUFFIXES):
                        fail(f"phone '{p}' ends in _B/_E/_I/_S, which Kaldi reserves for position-dependent "
                             "phones (whatever --position-dependent-phones)", j(name), n)
    d = read_dict_dir(dict_dir, position_dependent=False)
    phones = {p for line in d.silence_lines + d.nonsilence_lines for p in line}
    if d.has_pron_probs and os.path.exists(j("lexicon.txt")):
        _read_lexicon(j("lexicon.txt"), False, phones)  # read_dict_dir compared its entries only
    say("Checking that extra_questions.txt tells apart the phones of each line of nonsilence_phones.txt ...")
    questions = [set(q) for q in d.extra_questions]
    for n, line in enumerate(d.nonsilence_lines, 1):   # read_dict_dir refused empty lines
        for i, a in enumerate(line):
            for b in line[i + 1:]:
                if not any((a in q) != (b in q) for q in questions):
                    fail(f"phones '{a}' and '{b}' share a tree root (a line) but no line of extra_questions.txt "
                         "has one without the other: they could never be told apart", j("nonsilence_phones.txt"), n)
    used = {p for e in d.lexicon for p in e.phones}
    unused = [p for line in d.nonsilence_lines for p in line if p not in used]
    warnings = []
    if unused:
        lex = "lexiconp.txt" if d.has_pron_probs else "lexicon.txt"
        warnings.append(f"{j('nonsilence_phones.txt')}: {len(unused)} phone(s) used by no word of {lex} "
                        f"(their models get no data): {' '.join(unused[:20])}{' ...' if len(unused) > 20 else ''}")
    return warnings


WORD_BOUNDARY_KINDS = ("nonword", "begin", "end", "internal", "singleton")
_SUFFIX_KIND = {"_B": "begin", "_E": "end", "_I": "internal", "_S": "singleton"}
# Kaldi's validate_lang.pl: (kind of a phone, kind of the next) -> words begun; others are errors
_WB_STEPS = {(a, b): int(b in ("begin", "singleton"))
             for a in ("bos", "nonword", "end", "singleton") for b in ("nonword", "begin", "singleton", "eos")}
_WB_STEPS |= {(a, b): 0 for a, b in (("begin", "end"), ("begin", "internal"), ("internal", "internal"),
                                     ("internal", "end"))}
MAX_WORDS_THROUGH_L = 5000  # words in the sequence sent through L.fst / L_disambig.fst


class _CapturedStderr:
    """Redirects file descriptor 2 (where OpenFst and Kaldi's C++ code print their own ERROR
    lines) into ``.text`` for the duration of a ``with`` block."""

    def __enter__(self):
        import tempfile
        self._file = tempfile.TemporaryFile()
        sys.stderr.flush()
        self._saved = os.dup(2)
        os.dup2(self._file.fileno(), 2)
        self.text = ""
        return self

    def __exit__(self, *exc):
        os.dup2(self._saved, 2)
        os.close(self._saved)
        self._file.seek(0)
        self.text = self._file.read().decode("utf-8", errors="replace")
        self._file.close()
        return False


def _read_fst_quietly(path: str):
    """A StdVectorFst read from ``path``; what OpenFst would print about a bad file (on stderr, then
    returning None) becomes one error naming it. (kaldifst reads no const FSTs, nor do our graph
    builders.)"""
    from pynnet.io.kaldi_libs import import_kaldi
    _, kf, _ = import_kaldi()
    if not os.path.isfile(path):
        fail("no such file", path)
    raised = ""
    with _CapturedStderr() as err:
        try:
            fst = kf.StdVectorFst.read(path)
        except Exception as e:  # kaldifst raises RuntimeError on some bad files, returns None on others
            fst, raised = None, (str(e).strip().splitlines() or [""])[-1]
    if fst is None:
        why = next((ln.replace("ERROR: ", "").replace(f": {path}", "") for ln in err.text.splitlines() if ln.strip()),
                   raised or "unreadable")
        fail(f"cannot read as an OpenFst FST ({why})", path)
    return fst


def _arc_table(fst):
    """(src, ilabel, olabel, dst) int64 arrays of every arc, each state's arcs together in their
    order, and the final states: read from fstprint's text (C++), much faster than Python's arc
    iterators on a big G."""
    import numpy as np

    lines = fst.to_str(show_weight_one=True, fst_field_separator="\t").split("\n")
    fields = "\t".join(ln for ln in lines if ln.count("\t") == 4).split("\t") if lines else []
    if fields == [""]:
        fields = []
    src, dst, il, ol = (np.array(list(map(int, fields[k::5])), dtype=np.int64) for k in range(4))
    finals = {int(ln.split("\t")[0]) for ln in lines if ln and ln.count("\t") < 4}
    return src, il, ol, dst, finals


def _read_checked_fst(path: str, inames: list[str], itable: str, onames: list[str], sort_on: str):
    """(the FST, its ``_arc_table``) of a non-empty FST whose arcs' labels are ids of the symbol
    tables (``onames``: words.txt's), each state's arcs sorted on ``sort_on`` ('ilabel' or
    'olabel'), as Kaldi's tools expect of L.fst (olabel) and G.fst (ilabel)."""
    import numpy as np

    fst = _read_fst_quietly(path)
    if fst.num_states == 0 or fst.start < 0:
        fail("the FST is empty", path)
    arcs = _arc_table(fst)
    src, il, ol, _, _ = arcs
    for lab, names, table, side in ((il, inames, itable, "input"), (ol, onames, "words.txt", "output")):
        known = np.array([bool(n) for n in names] + [False])   # the last: every label out of range
        bad = np.flatnonzero(~known[np.where((lab < 0) | (lab >= len(names)), len(names), lab)])
        if len(bad):
            fail(f"an arc of state {src[bad[0]]} has {side} label {lab[bad[0]]}, which is not in {table}", path)
    key = il if sort_on == "ilabel" else ol
    bad = np.flatnonzero((src[1:] == src[:-1]) & (key[1:] < key[:-1]))
    if len(bad):
        fail(f"the arcs of state {src[bad[0]]} are not sorted on their {sort_on}s (fstarcsort --sort_type={sort_on})", path)
    return fst, arcs


def _has_cycle(src, dst) -> bool:
    """Whether the arcs src -> dst (numpy arrays) make a cycle: arcs into states with no arc out
    are dropped until none is left (no cycle) or none can be (a cycle)."""
    import numpy as np

    while len(src):
        has_out = np.zeros(int(max(src.max(), dst.max())) + 1, dtype=bool)
        has_out[src] = True
        keep = has_out[dst]
        if keep.all():
            return True
        src, dst = src[keep], dst[keep]
    return False


def _check_topo(path: str, phone_names: list[str], real: dict[int, str]) -> None:
    """Every silence and nonsilence phone is in exactly one <ForPhones> list of ``path``, and no other
    phone is; then Kaldi's HmmTopology reader must accept the file."""
    from pynnet.hmm.tree import load_topology

    if not os.path.isfile(path):
        fail("no such file", path)
    seen: dict[int, int] = {}
    inside = False
    for n, fields in _read_lines(path):
        for tok in fields:
            if tok in ("<ForPhones>", "</ForPhones>"):
                inside = tok == "<ForPhones>"
            elif inside:
                i = ascii_int(tok)
                if i is None:
                    fail(f"expected a phone id in <ForPhones>, got '{tok}'", path, n)
                if i in seen:
                    fail(f"phone {i} is listed twice (also on line {seen[i]})", path, n)
                if not 0 <= i < len(phone_names) or not phone_names[i]:
                    fail(f"phone {i} is not in phones.txt", path, n)
                if i not in real:
                    fail(f"phone {i} ('{phone_names[i]}') is not a silence or nonsilence phone", path, n)
                seen[i] = n
    missing = [i for i in real if i not in seen]
    if missing:
        more = f" (and {len(missing) - 1} other phones)" if len(missing) > 1 else ""
        fail(f"no <TopologyEntry> for phone '{real[missing[0]]}' (id {missing[0]}){more}", path)
    load_topology(path)


def _check_txt_int_csl(base: str, phones: dict[str, int], warn) -> list[str]:
    """phones/<name>.{txt,int,csl}: one phone of phones.txt per line, no phone twice, the .int file
    its ids line by line, the .csl file the ids on one line joined by ':'. Returns the phones."""
    txt, intf, csl = base + ".txt", base + ".int", base + ".csl"
    for f in (txt, intf, csl):
        if not os.path.isfile(f):
            fail("no such file", f)
    check_kaldi_text(txt)
    syms: list[str] = []
    line_of: dict[str, int] = {}
    for n, fields in _read_lines(txt):
        if len(fields) != 1:
            fail(f"expected one phone per line, got '{' '.join(fields)}'", txt, n)
        p = fields[0]
        if p not in phones:
            fail(f"phone '{p}' is not in phones.txt", txt, n)
        if p in line_of:
            fail(f"phone '{p}' is listed twice (also on line {line_of[p]})", txt, n)
        line_of[p] = n
        syms.append(p)
    if not syms:
        warn(f"{txt} is empty")
    tname = os.path.basename(txt)
    rows = _read_int_rows(intf)
    for n, row in enumerate(rows, 1):
        if n > len(syms):
            fail(f"more lines than {tname} ({len(syms)})", intf, n)
        if row != [phones[syms[n - 1]]]:
            fail(f"expected {phones[syms[n - 1]]} (the id of '{syms[n - 1]}' on line {n} of {tname}), "
                 f"got '{' '.join(map(str, row))}'", intf, n)
    if len(rows) < len(syms):
        fail(f"{len(rows)} lines, but {tname} has {len(syms)}", intf)
    with open(csl, encoding="utf-8", errors="replace") as f:
        lines = f.read().splitlines()
    want = ":".join(str(phones[p]) for p in syms)
    if (lines != [want]) if syms else lines not in ([], [""]):
        got = "\\n".join(lines)
        fail(f"expected the line '{want[:80]}' (the ids of {tname} joined by ':'), got '{got[:80]}'", csl)
    return syms


def _check_txt_int(base: str, phones: dict[str, int], kind: str) -> list[tuple[list[str], list[str]]]:
    """phones/{roots,sets,extra_questions,word_boundary}.{txt,int}: each line (its tags: roots'
    'shared split', word_boundary's kind; then phones of phones.txt) and the .int file the same
    line with the phones' ids. Returns (tags, phones) per line."""
    txt, intf = base + ".txt", base + ".int"
    for f in (txt, intf):
        if not os.path.isfile(f):
            fail("no such file", f)
    check_kaldi_text(txt)

    def split(fields: list[str], path: str, n: int) -> tuple[list[str], list[str]]:
        if kind == "roots":
            if len(fields) < 3 or fields[0] not in ("shared", "not-shared") or fields[1] not in ("split", "not-split"):
                fail("expected '{shared|not-shared} {split|not-split} <phones>'", path, n)
            return fields[:2], fields[2:]
        if kind == "word_boundary":
            if len(fields) != 2 or fields[1] not in WORD_BOUNDARY_KINDS:
                fail(f"expected '<phone> {{{'|'.join(WORD_BOUNDARY_KINDS)}}}'", path, n)
            return fields[1:], fields[:1]
        if not fields:
            fail("empty line", path, n)
        return [], fields

    rows = []
    for n, fields in _read_lines(txt):
        tags, syms = split(fields, txt, n)
        for p in syms:
            if p not in phones:
                fail(f"phone '{p}' is not in phones.txt", txt, n)
        rows.append((tags, syms))
    if not rows and kind in ("roots", "sets"):
        fail("file is empty", txt)
    irows = [split(fields, intf, n) for n, fields in _read_lines(intf)]
    for n, ((tags, syms), (itags, ids)) in enumerate(zip(rows, irows), 1):
        want = [str(phones[p]) for p in syms]
        if itags != tags or ids != want:
            line = " ".join(want + tags) if kind == "word_boundary" else " ".join(tags + want)
            fail(f"expected '{line[:80]}' (line {n} of {os.path.basename(txt)} in ids)", intf, n)
    if len(irows) != len(rows):
        fail(f"{len(irows)} lines, but {os.path.basename(txt)} has {len(rows)}", intf)
    return rows


def validate_lang_dir(lang_dir: str, *, skip_determinization_check: bool = False,
                      skip_disambig_check: bool = False, skip_generate_words_check: bool = False,
                      say=None) -> list[str]:
    """Kaldi's utils/validate_lang.pl on a lang dir (with G.fst if it has one). ``say`` gets
    progress lines. Returns warnings; the first error raises PynnetError naming file (and line).
    Not checked: subword lang dirs (subword_separator.txt, refused), grammar (#nonterm) lang dirs
    beyond letting their symbols through; L.fst and L_disambig.fst are checked on the best path for
    one sequence of up to MAX_WORDS_THROUGH_L words (Kaldi's: random paths for up to 100 random
    words); determinizability is tried up to a state limit (2 x the states + 100000)."""
    import numpy as np

    from pynnet.io.kaldi_libs import import_kaldi
    _, kf, _ = import_kaldi()

    say = say or (lambda s: None)
    warnings: list[str] = []
    warn = warnings.append
    if not os.path.isdir(lang_dir):
        fail("no such lang directory", lang_dir)
    j = lambda *n: os.path.join(lang_dir, *n)  # noqa: E731
    if os.path.exists(j("subword_separator.txt")):
        fail("subword lang dirs (Kaldi's prepare_lang_subword.sh) are not supported", j("subword_separator.txt"))
    has_g = os.path.exists(j("G.fst"))

    tables = {}
    for name in ("phones.txt", "words.txt"):
        say(f"Checking {j(name)} ...")
        check_kaldi_text(j(name))
        sym, names = read_symbol_table(j(name))
        if sym.get("<eps>") != 0:
            fail(f"id 0 must be '<eps>' (it is {repr(names[0]) if names[0] else 'unused'})", j(name))
        tables[name] = sym, names
        say(f"--> {j(name)} is OK")
    phones, phone_names = tables["phones.txt"]
    words, word_names = tables["words.txt"]
    if has_g:
        for w in ("<s>", "</s>"):
            if w not in words:
                fail(f"no '{w}', which a G.fst made from an ARPA LM needs", j("words.txt"))

    lists = {}
    for name in ("context_indep", "nonsilence", "silence", "optional_silence", "disambig"):
        if name == "disambig" and skip_disambig_check:
            if os.path.exists(j("phones", "disambig.txt")):
                lists[name] = [f[0] for _, f in _read_lines(j("phones", "disambig.txt")) if f]
            continue
        say(f"Checking {j('phones', name)}.{{txt, int, csl}} ...")
        lists[name] = _check_txt_int_csl(j("phones", name), phones, warn)
    sil, nonsil, dis = lists["silence"], lists["nonsilence"], lists.get("disambig", [])

    say("Checking disjoint and summation: silence.txt, nonsilence.txt, disambig.txt ...")
    named = (("silence.txt", sil), ("nonsilence.txt", nonsil), ("disambig.txt", dis))
    for i, (an, a) in enumerate(named):
        in_a = set(a)
        for bn, b in named[i + 1:]:
            for n, p in enumerate(b, 1):
                if p in in_a:
                    fail(f"phone '{p}' is also in phones/{an}", j("phones", bn), n)
    for fname, plist in named[:2]:
        if not plist:
            fail("file is empty: a lang dir needs silence and nonsilence phones", j("phones", fname))
        for n, p in enumerate(plist, 1):
            if p.startswith("#"):
                fail(f"'{p}' is a disambiguation symbol ('#...'), not a phone", j("phones", fname), n)
    for n, p in enumerate(dis, 1):
        if not p.startswith("#"):
            fail(f"'{p}' is not a disambiguation symbol (they start with '#')", j("phones", "disambig.txt"), n)
    explained = set(sil) | set(nonsil) | set(dis) | {"<eps>"}
    for i, p in enumerate(phone_names):
        if p and p not in explained and not p.startswith("#nonterm"):
            fail(f"phone '{p}' (id {i}) is in none of phones/silence.txt, nonsilence.txt and disambig.txt",
                 j("phones.txt"))
    real = {phones[p]: p for p in sil + nonsil}
    for n, p in enumerate(lists["context_indep"], 1):
        if phones[p] not in real:
            fail(f"'{p}' is not a silence or nonsilence phone", j("phones", "context_indep.txt"), n)
    opt = lists["optional_silence"]
    if len(opt) != 1:
        fail("must contain exactly one phone", j("phones", "optional_silence.txt"))
    if opt[0] not in sil:
        fail(f"optional silence '{opt[0]}' is not in phones/silence.txt", j("phones", "optional_silence.txt"), 1)
    if not skip_disambig_check and not ("#0" in dis and "#1" in dis):
        warn(f"{j('phones', 'disambig.txt')} lacks '#0' or '#1', which a conventional ARPA language model "
             "or lexicon (L.fst) needs")
    say("--> the phone lists are OK")

    for name in ("roots", "sets"):
        say(f"Checking {j('phones', name)}.{{txt, int}} ...")
        txt = j("phones", name + ".txt")
        line_of: dict[str, int] = {}
        for n, (_, syms) in enumerate(_check_txt_int(j("phones", name), phones, name), 1):
            for p in syms:
                if phones[p] not in real:
                    fail(f"'{p}' is not a silence or nonsilence phone", txt, n)
                if p in line_of:
                    fail(f"phone '{p}' is also on line {line_of[p]}", txt, n)
                line_of[p] = n
        missing = [p for p in sil + nonsil if p not in line_of]
        if missing:
            fail(f"phone '{missing[0]}' is on no line (every silence and nonsilence phone must be)", txt)
    say(f"Checking {j('phones', 'extra_questions')}.{{txt, int}} ...")
    eq = j("phones", "extra_questions")
    if any(os.path.isfile(eq + e) and os.path.getsize(eq + e) for e in (".txt", ".int")):
        for n, (_, syms) in enumerate(_check_txt_int(eq, phones, "extra_questions"), 1):
            for p in syms:
                if phones[p] not in real:
                    fail(f"'{p}' is not a silence or nonsilence phone", eq + ".txt", n)
    else:
        for e in (".txt", ".int"):
            if not os.path.isfile(eq + e):
                fail("no such file (it may be empty, but must exist)", eq + e)

    position_dependent = all(p.endswith(POS_SUFFIXES) for p in nonsil)
    wb: dict[int, str] = {}
    wbt = j("phones", "word_boundary.txt")
    if os.path.exists(wbt):
        say(f"Checking {j('phones', 'word_boundary')}.{{txt, int}} ...")
        for n, (tags, (p,)) in enumerate(_check_txt_int(j("phones", "word_boundary"), phones, "word_boundary"), 1):
            if phones[p] not in real:
                fail(f"'{p}' is not a silence or nonsilence phone", wbt, n)
            if phones[p] in wb:
                fail(f"phone '{p}' is listed twice", wbt, n)
            expect = _SUFFIX_KIND.get(p[-2:], "nonword") if position_dependent else None
            if expect and tags[0] != expect:
                fail(f"phone '{p}' is '{tags[0]}', but its name says '{expect}'", wbt, n)
            wb[phones[p]] = tags[0]
        missing = [p for i, p in real.items() if i not in wb]
        if missing:
            fail(f"phone '{missing[0]}' is not in it (every silence and nonsilence phone must be)", wbt)
    elif position_dependent:
        warn(f"{wbt}: no such file, but the phones are position-dependent (_B/_E/_I/_S); Kaldi's "
             "lattice-align-words and steps/get_ctm.sh need it")

    say("Checking word-level disambiguation symbols ...")
    wdt = j("phones", "wdisambig.txt")
    if os.path.exists(wdt):
        check_kaldi_text(wdt)
        wsyms = []
        for n, fields in _read_lines(wdt):
            if len(fields) != 1:
                fail(f"expected one symbol per line, got '{' '.join(fields)}'", wdt, n)
            wsyms.append(fields[0])
        for fname, table, tname in (("wdisambig_words.int", words, "words.txt"),
                                    ("wdisambig_phones.int", phones, "phones.txt")):
            path = j("phones", fname)
            if not os.path.isfile(path):
                fail("no such file", path)
            rows = _read_int_rows(path)
            if len(rows) != len(wsyms):
                fail(f"{len(rows)} lines, but phones/wdisambig.txt has {len(wsyms)}", path)
            for n, (s, row) in enumerate(zip(wsyms, rows), 1):
                if s not in table:
                    fail(f"'{s}' is not in {tname}", wdt, n)
                if row != [table[s]]:
                    fail(f"expected {table[s]} (the id of '{s}' in {tname}), got '{' '.join(map(str, row))}'", path, n)
    else:
        wsyms = ["#0"] if "#0" in words else []
        if not wsyms:
            warn(f"{j('words.txt')} has no '#0' (an ARPA language model needs it for determinizability)")
    wdis_words = {words[s] for s in wsyms}
    wdis_pairs = [(phones[s], words[s]) for s in wsyms if s in phones]

    say(f"Checking {j('topo')} ...")
    _check_topo(j("topo"), phone_names, real)

    say(f"Checking {j('oov')}.{{txt, int}} ...")
    check_kaldi_text(j("oov.txt"))
    oov = _read_oov_word(lang_dir, words)
    if oov in RESERVED_WORDS or oov.startswith("#"):
        fail(f"OOV word '{oov}' is a reserved symbol", j("oov.txt"), 1)
    if not os.path.isfile(j("oov.int")):
        fail("no such file", j("oov.int"))
    got = _read_int_rows(j("oov.int"))
    if got != [[words[oov]]]:
        fail(f"expected {words[oov]} (the id of '{oov}' in words.txt), got "
             f"'{' '.join(' '.join(map(str, r)) for r in got)}'", j("oov.int"))

    skip = wdis_words | {words.get("<s>"), words.get("</s>"), 0}
    seq = [i for i, w in enumerate(word_names) if w and i not in skip and not w.startswith("#nonterm")]
    rnd = random.Random(0)
    seq = rnd.sample(seq, MAX_WORDS_THROUGH_L) if len(seq) > MAX_WORDS_THROUGH_L else rnd.sample(seq, len(seq))
    disambig_ids = {phones[p] for p in dis} | {i for i, p in enumerate(phone_names) if p.startswith("#")}
    Ld = None
    for name in ("L.fst", "L_disambig.fst"):
        path = j(name)
        say(f"Checking {path} ...")
        L, arcs = _read_checked_fst(path, phone_names, "phones.txt", word_names, "olabel")
        if name == "L_disambig.fst":
            Ld = L
            src, il, ol, dst, finals = arcs
            loops = {(s, i, o) for s, i, o, d in zip(src.tolist(), il.tolist(), ol.tolist(), dst.tolist()) if s == d}
            for s in sorted(finals):
                for pi, wi in wdis_pairs:
                    if (s, pi, wi) not in loops:
                        fail(f"final state {s} has no {phone_names[pi]}:{word_names[wi]} self-loop (Kaldi's "
                             "fstaddselfloops): G's back-off arcs could not pass through it", path)
        if not skip_generate_words_check and seq:
            _check_words_through_lexicon(kf, L, path, seq, word_names, phone_names, wb, disambig_ids)
            say(f"--> the best path for {len(seq)} words through {name} spells them"
                + (" with the word boundaries of phones/word_boundary.txt" if wb else ""))

    if has_g:
        path = j("G.fst")
        say(f"Checking {path} ...")
        G, arcs = _read_checked_fst(path, word_names, "words.txt", word_names, "ilabel")
        src, il, ol, dst, _ = arcs
        forbidden = np.isin(il, [words["<s>"], words["</s>"]]) | np.isin(ol, [words["<s>"], words["</s>"]])
        dis_in = np.isin(il, sorted(wdis_words))
        nonterm = [i for i, w in enumerate(word_names) if w.startswith("#nonterm")]
        for what, mask in (
                ("'{w}' on it: <s> and </s> belong to no arc (they are G's start state and final weights)", forbidden),
                ("the disambiguation symbol '{i}' on its input but '{o}' on its output (must be <eps>)", dis_in & (ol != 0)),
                ("'{i}' on its input but '{o}' on its output (G is an acceptor but for disambiguation symbols)",
                 ~dis_in & (il != 0) & (il != ol) & ~np.isin(il, nonterm))):
            bad = np.flatnonzero(mask)
            if len(bad):
                k = bad[0]
                i, o = word_names[il[k]], word_names[ol[k]]
                fail(f"the arc {src[k]} -> {dst[k]} has " + what.format(i=i, o=o, w=i if i in ("<s>", "</s>") else o),
                     path)
        eps_arcs = int(np.count_nonzero(il == 0))
        if eps_arcs:
            warn(f"{path}: {eps_arcs} arcs with <eps> on their input (not expected in most setups)")
        empty_in = dis_in | (il == 0)
        if _has_cycle(src[empty_in], dst[empty_in]):
            fail("has a cycle of arcs with only disambiguation symbols or <eps> on their input: "
                 "it could not be determinized", path)
        say(f"--> {path} has {G.num_states} states, is ilabel-sorted, has no <s>/</s> on its arcs")
        if not skip_determinization_check:
            _check_determinizable(kf, G, "G.fst", path)
            say(f"--> {path} is determinizable")
            LG = kf.StdVectorFst(kf.compose(Ld, G))
            if LG.num_states == 0:
                fail("L_disambig.fst o G.fst is empty: G accepts no word sequence the lexicon spells", path)
            _check_determinizable(kf, LG, "L_disambig.fst o G.fst", path)
            say("--> L_disambig.fst o G.fst is determinizable")
    return warnings


def _check_words_through_lexicon(kf, L, path: str, seq: list[int], word_names: list[str],
                                 phone_names: list[str], wb: dict[int, str], disambig: set[int]) -> None:
    """The best path of L composed with the word sequence ``seq`` spells those words, and (with
    word_boundary.int's kinds ``wb``) its phones begin as many words as there are, as Kaldi's
    validate_lang.pl checks on a random path."""
    def best_path(words: list[int]) -> list[tuple[int, int]]:
        p = kf.shortest_path(kf.StdVectorFst(kf.compose(L, kf.make_linear_acceptor(words))))
        arcs, s = [], p.start
        while s >= 0 and p.num_arcs(s):
            a = next(iter(kf.ArcIterator(p, s)))
            arcs.append((a.ilabel, a.olabel))
            s = a.nextstate
        return arcs

    arcs = best_path(seq)
    if [o for _, o in arcs if o] != seq:
        bad = next((w for w in seq if [o for _, o in best_path([w]) if o] != [w]), None)
        if bad is not None:
            fail(f"word '{word_names[bad]}' (id {bad}) of words.txt has no path through it", path)
        fail(f"the word sequence of {len(seq)} words has no path through it", path)
    if not wb:
        return
    state, count, word = "bos", 0, None
    for il, ol in arcs + [(None, 0)]:
        word = ol or word
        if il == 0 or il in disambig:
            continue
        kind = "eos" if il is None else wb.get(il)
        if kind is None:
            fail(f"phone '{phone_names[il]}' is not in phones/word_boundary.int", path)
        if (state, kind) not in _WB_STEPS:
            where = f"a '{phone_names[il]}' ({kind}) phone" if il is not None else "the end"
            fail(f"on the best path for the words, in or after word '{word_names[word]}', a {state} phone is "
                 f"followed by {where}: {os.path.basename(path)} and phones/word_boundary.txt disagree", path)
        count += _WB_STEPS[state, kind]
        state = kind
    if count != len(seq):
        fail(f"phones/word_boundary.txt finds {count} words on the best path for {len(seq)} words: it and "
             f"{os.path.basename(path)} disagree", path)


def _check_determinizable(kf, fst, what: str, path: str) -> None:
    """Kaldi's fstdeterminizestar (tropical) on a copy of ``fst``, stopped at 2 x its states + 100000."""
    copy = kf.StdVectorFst(fst)
    limit = 2 * fst.num_states + 100000
    with _CapturedStderr():
        try:
            stopped = kf.determinize_star(copy, max_states=limit)
            why = f"passed {limit} states" if stopped else ""
        except RuntimeError as e:
            why = (str(e).strip().splitlines() or ["failed"])[-1].replace("[E] ", "")
    if why:
        fail(f"{what} cannot be determinized ({why})", path)
