"""Kaldi lang directories: utils/prepare_lang.sh in Python, and ``Lang.load`` for the other stages.

``prepare_lang`` turns a dict dir (data/local/dict: lexicon.txt or lexiconp.txt, silence_phones.txt,
nonsilence_phones.txt, optional_silence.txt, extra_questions.txt) into a lang dir laid out exactly as
Kaldi's egs/wsj/s5/utils/prepare_lang.sh does (phones.txt, words.txt, topo, oov.{txt,int}, L.fst,
L_disambig.fst, phones/*.{txt,int,csl}), so Kaldi's own tools can read it and vice versa.
"""
from __future__ import annotations

import math
import os
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
            if p not in seen:
                fail(f"phone '{p}' of word '{word}' is not in silence_phones.txt or nonsilence_phones.txt",
                     lex_path, n)
        key = (word, tuple(rest))
        if key in seen_entries:
            fail(f"duplicate entry for word '{word}' with pronunciation '{' '.join(rest)}'", lex_path, n)
        seen_entries.add(key)
        lexicon.append(LexEntry(word, prob, rest))
    if not lexicon:
        fail("lexicon is empty", lex_path)
    if probs and os.path.exists(j("lexicon.txt")):
        _check_same_pronunciations(j("lexicon.txt"), lex_path, [(e.word, tuple(e.phones)) for e in lexicon])
    return DictDir(sil, nonsil, opt, extra, lexicon, probs)


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
                 sil_prob: float = 0.5, phone_symbol_table: str | None = None) -> "Lang":
    """Build a Kaldi lang dir from a dict dir (utils/prepare_lang.sh). The lang dir is assembled in
    a temporary directory next to ``lang_dir`` and renamed into place, so a failure leaves nothing
    half-written. ``tmp_dir`` receives the intermediate lexicons as Kaldi's does.
    ``phone_symbol_table`` (Kaldi's --phone-symbol-table, e.g. an existing lang dir's phones.txt):
    the phones keep that table's ids, so models trained with it fit the new lang dir."""
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

        def multi_files(name: str, rows: list[list[str]], prefix: str = "") -> None:
            _write_lines(P("phones", name + ".txt"), (prefix + " ".join(r) for r in rows))
            _write_lines(P("phones", name + ".int"), (prefix + " ".join(str(phones[p]) for p in r) for r in rows))

        multi_files("sets", sets)
        multi_files("roots", sets, "shared split ")
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
    for n, fields in _read_lines(path):
        if len(fields) != 2:
            fail(f"expected 'symbol id', got '{' '.join(fields)}'", path, n)
        i = ascii_int(fields[1])
        if i is None:
            fail(f"bad id '{fields[1]}'", path, n)
        if i < 0:
            fail(f"negative id {i}", path, n)
        if fields[0] in sym:
            fail(f"duplicate symbol '{fields[0]}'", path, n)
        sym[fields[0]] = i
    if not sym:
        fail("file is empty", path)
    names = [""] * (max(sym.values()) + 1)
    for s, i in sym.items():
        if names[i]:
            fail(f"id {i} used twice ('{names[i]}' and '{s}')", path)
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
        oov_rows = _read_lines(j("oov.txt"))
        if len(oov_rows) != 1 or len(oov_rows[0][1]) != 1:
            fail("must contain exactly one word", j("oov.txt"))
        oov_word = oov_rows[0][1][0]
        if oov_word not in words:
            fail(f"OOV word '{oov_word}' is not in words.txt", j("oov.txt"), 1)
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
