"""Property tests (hypothesis) of the text parsers: whatever the bytes of a file, each reader
either returns a result or raises the documented one-line PynnetError naming the file, never
another exception; the programs that read such files and write outputs leave no output and no
temp file behind when they fail; and what our writers write reads back exactly.

Inputs are arbitrary bytes, arbitrary token soups and near-valid files (a valid file with one
mutation: a deleted or replaced field, a non-number, a bad UTF-8 byte, an empty line, a huge
number, NaN/inf, CRLF line ends, trailing spaces, a truncation, a repeated or dropped line).
Derandomized with no example database, so every run (and CI) tries the same inputs.

Regression tests for the crashes these properties found are at the end of the file."""
from __future__ import annotations

import contextlib
import io
import math
import os
import re
import shutil
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from pynnet.corpora.swbd import LETTER_PRONS
from pynnet.io.errors import PynnetError
from pynnet.nnet.kaldi_nnet1 import feature_transform_bytes

# PYNNET_PROPERTY_SCALE=20 tries 20 times as many examples; PYNNET_PROPERTY_RANDOM=1 new ones
# on every run (a search for bugs, not CI)
_SCALE = float(os.environ.get("PYNNET_PROPERTY_SCALE", "1"))
_SETTINGS = dict(deadline=None, derandomize=not os.environ.get("PYNNET_PROPERTY_RANDOM"), database=None,
                 print_blob=False, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                          HealthCheck.filter_too_much])


def fuzz(n: int):
    return settings(max_examples=max(1, int(n * _SCALE)), **_SETTINGS)


# ----------------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------------

@contextlib.contextmanager
def scratch():
    """A fresh directory per example (pytest's tmp_path is one per test, shared by examples)."""
    with tempfile.TemporaryDirectory(prefix="pynnet-prop-") as d:
        yield d


def put(d: str, name: str, data: bytes | str) -> str:
    path = os.path.join(d, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data.encode("utf-8") if isinstance(data, str) else data)
    return path


def put_all(d: str, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        put(d, name, data)


def reads_or_fails(fn, *args, names: str | tuple[str, ...], **kw):
    """``fn(*args)`` (a generator is run to its end): its result, or None after the documented
    error, a PynnetError of one line that names ``names`` (the file, or the directory it is in;
    or one of several)."""
    try:
        out = fn(*args, **kw)
        if hasattr(out, "__next__"):
            out = list(out)
        event(f"{getattr(fn, '__name__', 'parser')}: read")
        return out
    except PynnetError as e:
        event(f"{getattr(fn, '__name__', 'parser')}: error")
        msg = str(e)
        assert "\n" not in msg, f"error of more than one line: {msg!r}"
        assert any(n in msg for n in ((names,) if isinstance(names, str) else names)), \
            f"error does not name {names}: {msg!r}"
        return None


def run_cli(main, argv: list[str]) -> tuple[int, str]:
    """A program's ``main(argv)`` in this process: (exit status, stderr). A traceback fails the test."""
    err = io.StringIO()
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")    # (binary writers use sys.stdout.buffer)
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        rc = main(argv)
    text = err.getvalue()
    if rc != 0:
        errors = [line for line in text.splitlines() if line.startswith("ERROR (")]
        assert rc == 1, (rc, text)
        # Kaldi's convention (copy-feats of nothing): status 1 without an ERROR line is allowed
        assert len(errors) <= 1, text
    return rc, text


def run_cli_forked(main, argv: list[str], timeout: float = 120.0) -> tuple[int, str]:
    """run_cli in a forked child, for programs that call C++ code which may abort the process
    (kaldilm's arpa2fst on an LM our checker let through): the abort fails this test instead of
    ending the whole test run."""
    import time
    import traceback

    with tempfile.TemporaryFile() as out:
        pid = os.fork()
        if pid == 0:   # the child: no return from here
            code = 99
            try:
                rc, err = run_cli(main, argv)
                out.write(err.encode())
                code = rc
            except BaseException:
                out.write(traceback.format_exc().encode())
            finally:
                out.flush()
                os._exit(code)
        deadline = time.monotonic() + timeout
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
                pytest.fail(f"{argv}: no result after {timeout} s")
            time.sleep(0.01)
        out.seek(0)
        text = out.read().decode(errors="replace")
    if os.WIFSIGNALED(status):
        pytest.fail(f"{argv}: the process was killed by signal {os.WTERMSIG(status)} (a C++ abort?): {text[-500:]}")
    rc = os.WEXITSTATUS(status)
    assert rc in (0, 1), f"exit status {rc}: {text}"
    return rc, text


def has_error(stderr: str) -> bool:
    return any(line.startswith("ERROR (") for line in stderr.splitlines())


def temp_leftovers(d: str) -> list[str]:
    """Files atomic_path/make_temp_dir leave behind when they are not cleaned up."""
    out = []
    for root, dirs, files in os.walk(d):
        out += [os.path.join(root, n) for n in files + dirs if n.endswith(".tmp") or n.startswith(".tmp")]
    return out


# Tokens that break numbers and fields: what the near-valid files are mutated with.
BAD_NUMBERS = ["nan", "inf", "-inf", "1e999", "-1", "-5", "0", "9" * 25, "2147483648", "1_0", "\u0663", "0x10", "",
               "1e-999", "-0", "1.5"]
BAD_TOKENS = BAD_NUMBERS + ["", "x", "-1", "0", "-0", "1e999", "-1e999", "nan", "NaN", "inf", "-inf", "1_0", "\u0663",
              "\u00b2", "9" * 25, "-" + "9" * 25, "1e-999", "0x10", "+1", "1,5", "1.5", "#0", "<s>", "</s>",
              "<eps>", "~", "|", "\u00a0", "caf\u00e9", "[", "]", "\\data\\", ";;", "*", "(", ")", "{", "/"]


@st.composite
def mutated(draw, valid: bytes, binary: bool = False) -> bytes:
    """``valid`` with one random mutation."""
    lines = valid.split(b"\n")
    i = draw(st.integers(0, max(0, len(lines) - 1)))
    fields = lines[i].split() if lines else []
    kinds = ["truncate", "flip", "insert_bytes", "bad_utf8"]
    if not binary:
        kinds += ["delete_field", "replace_field", "replace_number", "replace_number", "replace_number",
                  "insert_field", "empty_line", "crlf", "trailing", "dup_line", "drop_line", "swap_lines", "tabs",
                  "nul"]
    kind = draw(st.sampled_from(kinds))
    if kind == "truncate":
        return valid[:draw(st.integers(0, max(0, len(valid) - 1)))]
    if kind in ("flip", "insert_bytes", "bad_utf8", "nul"):
        pos = draw(st.integers(0, len(valid)))
        ins = {"flip": None, "insert_bytes": draw(st.binary(min_size=1, max_size=8)), "bad_utf8": b"\xff",
               "nul": b"\0"}[kind]
        if ins is None:
            if not valid:
                return b"\x80"
            pos = min(pos, len(valid) - 1)
            return valid[:pos] + bytes([valid[pos] ^ draw(st.integers(1, 255))]) + valid[pos + 1:]
        return valid[:pos] + ins + valid[pos:]
    if kind == "delete_field" and fields:
        del fields[draw(st.integers(0, len(fields) - 1))]
    elif kind == "replace_field" and fields:
        fields[draw(st.integers(0, len(fields) - 1))] = draw(st.sampled_from(BAD_TOKENS)).encode()
    elif kind == "replace_number":
        # a field that is a number (of any line) becomes a bad one
        nums = [(j, k) for j, line in enumerate(lines) for k, f in enumerate(line.split())
                if re.fullmatch(rb"-?[0-9.]+(e-?[0-9]+)?,?[-0-9.,e]*", f)]
        if not nums:
            return valid
        j, k = draw(st.sampled_from(nums))
        fields = lines[j].split()
        fields[k] = draw(st.sampled_from(BAD_NUMBERS)).encode()
        lines[j] = b" ".join(fields)
        return b"\n".join(lines)
    elif kind == "insert_field":
        fields.insert(draw(st.integers(0, len(fields))), draw(st.sampled_from(BAD_TOKENS)).encode())
    elif kind == "empty_line":
        lines.insert(i, draw(st.sampled_from([b"", b" ", b"\t", b"\r"])))
        return b"\n".join(lines)
    elif kind == "crlf":
        return valid.replace(b"\n", b"\r\n")
    elif kind == "trailing":
        lines[i] += draw(st.sampled_from([b" ", b"\t", b"  \t", b"\xc2\xa0"]))
        return b"\n".join(lines)
    elif kind == "dup_line":
        lines.insert(i, lines[i])
        return b"\n".join(lines)
    elif kind == "drop_line":
        del lines[i]
        return b"\n".join(lines)
    elif kind == "swap_lines":
        j = draw(st.integers(0, len(lines) - 1))
        lines[i], lines[j] = lines[j], lines[i]
        return b"\n".join(lines)
    elif kind == "tabs":
        return valid.replace(b" ", b"\t")
    else:
        return valid
    lines[i] = b" ".join(fields)
    return b"\n".join(lines)


def token_soup(tokens: list[str]):
    """Lines of tokens (the format's own and BAD_TOKENS), any spacing, LF or CRLF."""
    tok = st.sampled_from(tokens + BAD_TOKENS)
    sep = st.sampled_from([" ", "\t", "  ", " \t"])
    line = st.builds(lambda ts, s: s.join(ts), st.lists(tok, max_size=7), sep)
    return st.builds(lambda ls, nl: nl.join(ls).encode("utf-8"), st.lists(line, max_size=8),
                     st.sampled_from(["\n", "\r\n"]))


def any_input(tokens: list[str], valid=None, binary: bool = False):
    """Given a strategy of valid files, mostly near-valid ones (one mutation, two, or none);
    else arbitrary bytes or a token soup."""
    options = []
    if valid is not None:
        once = valid.flatmap(lambda v: mutated(v, binary))
        options += [once, once, once.flatmap(lambda v: mutated(v, binary)), valid]
    return st.one_of(*options, token_soup(tokens), st.binary(max_size=200))


@st.composite
def one_file_changed(draw, files: dict[str, bytes], tokens: list[str]) -> dict[str, bytes]:
    """The files of a directory, one of them (near-valid or not) in place of its valid self."""
    name = draw(st.sampled_from(sorted(files)))
    return {**files, name: draw(any_input(tokens, st.just(files[name])))}


ID = st.text(alphabet="abcXY01_-.\u00e9", min_size=1, max_size=6)


# ----------------------------------------------------------------------------------------------
# Kaldi text tables (pynnet/io/tables.py)
# ----------------------------------------------------------------------------------------------

@fuzz(150)
@given(data=any_input(["utt1", "spk1", "a", "b"]), min_fields=st.integers(1, 4),
       max_fields=st.one_of(st.none(), st.integers(1, 5)), check_sorted=st.booleans())
def test_read_table_never_crashes(data, min_fields, max_fields, check_sorted):
    from pynnet.io.tables import read_table, read_text_lines

    with scratch() as d:
        path = put(d, "table", data)
        reads_or_fails(read_table, path, min_fields=min_fields, max_fields=max_fields,
                       check_sorted=check_sorted, names=path)
        reads_or_fails(read_text_lines, path, names=path)


# values: fields of any characters but the line ends and Kaldi's separators (space, tab)
_FIELD = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r \t"),
                 min_size=1, max_size=5)
_KEY = _FIELD


@fuzz(100)
@given(table=st.dictionaries(_KEY, st.lists(_FIELD, max_size=4).map(" ".join), max_size=8))
def test_write_table_read_table_round_trip(table):
    from pynnet.io.tables import read_table, write_table

    with scratch() as d:
        path = os.path.join(d, "t")
        write_table(path, table)
        back = read_table(path, min_fields=1, allow_empty=True, check_sorted=True)
        assert back == table
        assert list(back) == sorted(table, key=str.encode)


# ----------------------------------------------------------------------------------------------
# data directories (pynnet/io/datadir.py) and the programs that rewrite them
# ----------------------------------------------------------------------------------------------

@st.composite
def valid_data_dir(draw) -> dict[str, bytes]:
    """The files of a small valid data dir (segments and all), as bytes."""
    nspk = draw(st.integers(1, 3))
    spks = [f"s{k}" for k in range(nspk)]
    utts = {s: [f"{s}-u{j}" for j in range(draw(st.integers(1, 3)))] for s in spks}
    u2s = [(u, s) for s in spks for u in utts[s]]
    with_segments = draw(st.booleans())
    files = {
        "utt2spk": "".join(f"{u} {s}\n" for u, s in u2s),
        "spk2utt": "".join(f"{s} {' '.join(utts[s])}\n" for s in spks),
        "text": "".join(f"{u} hello world\n" for u, _ in u2s),
        "feats.scp": "".join(f"{u} raw.ark:{10 * k + 4}\n" for k, (u, _) in enumerate(u2s)),
        "utt2dur": "".join(f"{u} 1.{k}\n" for k, (u, _) in enumerate(u2s)),
        "utt2num_frames": "".join(f"{u} {100 + k}\n" for k, (u, _) in enumerate(u2s)),
        "spk2gender": "".join(f"{s} {'mf'[k % 2]}\n" for k, s in enumerate(spks)),
        "cmvn.scp": "".join(f"{s} cmvn.ark:{k + 3}\n" for k, s in enumerate(spks)),
    }
    if with_segments:
        files["wav.scp"] = "".join(f"{s} {s}.wav\n" for s in spks)
        files["segments"] = "".join(f"{u} {s} {j}.5 {j + 1}.25\n" for s in spks for j, u in enumerate(utts[s]))
        files["reco2file_and_channel"] = "".join(f"{s} {s} A\n" for s in spks)
        files["reco2dur"] = "".join(f"{s} 9.5\n" for s in spks)
    else:
        files["wav.scp"] = "".join(f"{u} sox {u}.wav -t wav - |\n" for u, _ in u2s)
    return {k: v.encode() for k, v in files.items()}


@st.composite
def data_dir_input(draw) -> dict[str, bytes]:
    return draw(one_file_changed(draw(valid_data_dir()), ["s0", "s0-u0", "s1-u1", "A", "B", "1.5", "m", "f"]))


@fuzz(120)
@given(files=data_dir_input(), strict=st.booleans())
def test_data_dir_load_validate_never_crash(files, strict):
    from pynnet.io import datadir as D

    with scratch() as d:
        put_all(d, files)
        dd = reads_or_fails(D.load_data_dir, d, strict=strict, names=d)
        if dd is not None and strict:
            reads_or_fails(D.validate, dd, names=d)
        if dd is not None:
            # the typed views the other programs use, after a successful load
            dd.segments, dd.utt2dur, dd.utt2num_frames, dd.recordings, dd.spk2utt  # noqa: B018
        for name in files:
            if name in D.FILES:
                reads_or_fails(D.read_data_file, d, name, check_sorted=strict, names=d)


def _snapshot(d: str) -> dict[str, bytes]:
    out = {}
    for root, _, names in os.walk(d):
        for n in names:
            p = os.path.join(root, n)
            with open(p, "rb") as f:
                out[os.path.relpath(p, d)] = f.read()
    return out


@fuzz(40)
@given(files=data_dir_input())
def test_data_dir_programs_leave_nothing_half_written(files):
    """fix_data_dir.sh rewrites a dir in place, copy_data_dir.sh writes a new one: a run that
    fails on its input leaves the source as it was, no destination and no temp file."""
    from pynnet.bin.datadir import copy_main, fix_main
    from pynnet.io import datadir as D

    with scratch() as top:
        src = os.path.join(top, "src")
        put_all(src, files)
        before = _snapshot(src)
        dest = os.path.join(top, "dest")
        try:
            D.load_data_dir(src, strict=True)
            loads = True
        except PynnetError:
            loads = False
        rc, err = run_cli(copy_main, [src, dest])
        if not loads:
            assert rc == 1 and has_error(err) and not os.path.exists(dest), err
        assert _snapshot(src) == before
        rc, err = run_cli(fix_main, [src])
        if rc != 0:
            assert has_error(err)
            assert {k: v for k, v in _snapshot(src).items() if not k.startswith(".backup")} == before
        assert not temp_leftovers(top), temp_leftovers(top)


# ----------------------------------------------------------------------------------------------
# dict dirs and lexicons (pynnet/hmm/lang.py, pynnet/corpora/custom.py), symbol tables
# ----------------------------------------------------------------------------------------------

_DICT = {
    "silence_phones.txt": b"SIL\nSPN\n",
    "nonsilence_phones.txt": b"AA\nB\nK AE\n",
    "optional_silence.txt": b"SIL\n",
    "extra_questions.txt": b"SIL SPN\nAA B\n",
    "lexicon.txt": b"<unk> SPN\ncab K AE B\nbaa B AA\nbaa B AA AA\nsil SIL\n",
    "lexiconp.txt": b"<unk> 1.0 SPN\ncab 1.0 K AE B\nbaa 0.5 B AA\nbaa 1.0 B AA AA\nsil 1.0 SIL\n",
}
_PHONE_TOKENS = ["SIL", "SPN", "AA", "B", "K", "AE", "AA_B", "cab", "baa", "<unk>", "0.5", "1.0", "#1"]


@st.composite
def dict_dir_input(draw) -> dict[str, bytes]:
    files = dict(_DICT)
    if draw(st.booleans()):
        del files["lexiconp.txt"]
    return draw(one_file_changed(files, _PHONE_TOKENS))


@fuzz(100)
@given(files=dict_dir_input(), position_dependent=st.booleans())
def test_dict_dir_and_lexicon_never_crash(files, position_dependent):
    from pynnet.corpora.custom import read_lexicon
    from pynnet.hmm.lang import read_dict_dir, validate_dict_dir

    with scratch() as d:
        put_all(d, files)
        reads_or_fails(read_dict_dir, d, position_dependent, names=d)
        reads_or_fails(validate_dict_dir, d, say=lambda *a: None, names=d)
        for name in ("lexicon.txt", "lexiconp.txt"):
            if name in files:
                reads_or_fails(read_lexicon, os.path.join(d, name), names=os.path.join(d, name))


@fuzz(25)
@given(files=dict_dir_input())
def test_prepare_lang_fails_without_a_lang_dir(files):
    """prepare_lang builds the lang dir in a temp dir renamed into place: a failing run leaves
    neither a lang dir nor a temp dir."""
    from pynnet.bin.lang import prepare_lang_main

    with scratch() as top:
        dict_dir = os.path.join(top, "dict")
        put_all(dict_dir, files)
        lang = os.path.join(top, "lang")
        rc, err = run_cli(prepare_lang_main, [dict_dir, "<unk>", os.path.join(top, "tmp"), lang])
        if rc != 0:
            assert has_error(err) and not os.path.exists(lang), err
        else:
            assert os.path.isfile(os.path.join(lang, "L.fst"))
        assert not [p for p in os.listdir(top) if p not in ("dict", "tmp", "lang")]
        assert not temp_leftovers(top)


_PLAIN_LEXICON = b"<unk> SPN\n!SIL SIL\ncab K AE1 B\nbaa B AA1\nbaa B AA1 AA0\nhello HH AH0 L OW1\n"


@fuzz(40)
@given(lexicon=any_input(_PHONE_TOKENS + ["AA1", "AE1", "!SIL"], st.just(_PLAIN_LEXICON)))
def test_prepare_dict_writes_a_valid_dict_dir_or_nothing(lexicon):
    """pynnet-prepare-dict: a dict dir that read_dict_dir takes, or no dict dir and no temp dir."""
    from pynnet.bin.custom import prepare_dict_main
    from pynnet.hmm.lang import read_dict_dir

    with scratch() as top:
        lex = put(top, "lexicon.txt", lexicon)
        dict_dir = os.path.join(top, "dict")
        rc, err = run_cli(prepare_dict_main, [lex, dict_dir])
        if rc != 0:
            assert has_error(err) and not os.path.exists(dict_dir), err
        else:
            read_dict_dir(dict_dir)
        assert sorted(os.listdir(top)) == sorted(["lexicon.txt"] + (["dict"] if rc == 0 else []))


@fuzz(100)
@given(data=any_input(["<eps>", "a", "b", "#0", "0", "1", "2", "3", "2147483647", "2147483648"],
                      st.just(b"<eps> 0\na 1\nb 2\n#0 3\n")))
def test_symbol_table_never_crashes(data):
    from pynnet.hmm.lang import read_symbol_table

    with scratch() as d:
        path = put(d, "words.txt", data)
        out = reads_or_fails(read_symbol_table, path, names=path)
        if out is not None:
            sym, names = out
            assert all(names[i] == s for s, i in sym.items())


# ----------------------------------------------------------------------------------------------
# ARPA language models (pynnet/hmm/lm.py)
# ----------------------------------------------------------------------------------------------

_ARPA = b"""
\\data\\
ngram 1=5
ngram 2=3

\\1-grams:
-1.0\t<s>\t-0.5
-0.7\t</s>
-0.5\ta\t-0.3
-0.6\tb\t-0.2
-1.2\t<unk>

\\2-grams:
-0.3\t<s> a
-0.2\ta b
-0.4\tb </s>

\\end\\
"""
_ARPA_TOKENS = ["\\data\\", "ngram", "1=5", "2=3", "ngram 1=2", "\\1-grams:", "\\2-grams:", "\\3-grams:",
                "\\end\\", "<s>", "</s>", "a", "b", "-0.5", "-1.0", "0"]


@fuzz(200)
@given(data=any_input(_ARPA_TOKENS, st.just(_ARPA)))
def test_arpa_reader_never_crashes(data):
    from pynnet.hmm.lm import BackoffLM, perplexity

    with scratch() as d:
        path = put(d, "lm.arpa", data)
        lm = reads_or_fails(BackoffLM.read_arpa, path, names=path)
        if lm is not None:
            assert all(math.isfinite(lm.logprob(w, ("<s>",))) for w in ("a", "b", "zz", "</s>"))
            perplexity(lm, [["a", "b"], ["zz"]])


_WORDS = st.sampled_from(["a", "b", "c", "d", "caf\u00e9", "x-y"])


@fuzz(30)
@given(sentences=st.lists(st.lists(_WORDS, min_size=1, max_size=6), min_size=1, max_size=8),
       order=st.integers(1, 3), discount=st.sampled_from(["kn", "wb"]), gz=st.booleans())
def test_arpa_write_read_round_trip(sentences, order, discount, gz):
    """What pynnet-train-lm writes reads back to the same model (7 significant digits)."""
    from pynnet.hmm.lm import BackoffLM, train_lm

    lm = train_lm(sentences, order, discount=discount, verbose=False)
    with scratch() as d:
        path = os.path.join(d, "lm.arpa" + (".gz" if gz else ""))
        lm.write_arpa(path)
        back = BackoffLM.read_arpa(path)
    assert back.order == lm.order and back.num_ngrams() == lm.num_ngrams()
    for k in range(1, lm.order + 1):
        assert back.probs[k].keys() == lm.probs[k].keys()
        for g, p in lm.probs[k].items():
            assert back.probs[k][g] == pytest.approx(p, rel=1e-6, abs=1e-6)
    for g, b in lm.bows.items():
        assert back.bows.get(g, 0.0) == pytest.approx(b, rel=1e-6, abs=1e-6)


@fuzz(40)
@given(text=any_input(["a", "b", "<s>", "</s>", "utt1"]), order=st.integers(1, 3), gz=st.booleans())
def test_train_lm_fails_without_an_output(text, order, gz):
    from pynnet.bin.lang import train_lm_main

    with scratch() as d:
        src = put(d, "text", text)
        out = os.path.join(d, "out", "lm.arpa" + (".gz" if gz else ""))
        rc, err = run_cli(train_lm_main, ["--order", str(order), src, out])
        if rc != 0:
            assert has_error(err) and not os.path.exists(out), err
        assert not temp_leftovers(d)


_LANG_ARPA = b"""\\data\\
ngram 1=6
ngram 2=3

\\1-grams:
-1.0	<s>	-0.5
-0.7	</s>
-0.5	cab	-0.3
-0.6	baa	-0.2
-1.2	<unk>
-1.3	sil

\\2-grams:
-0.3	<s> cab
-0.2	cab baa
-0.4	baa </s>

\\end\\
"""


@pytest.fixture(scope="module")
def lang_dir(tmp_path_factory):
    from pynnet.hmm.lang import prepare_lang

    top = tmp_path_factory.mktemp("lang")
    put_all(str(top / "dict"), {k: v for k, v in _DICT.items() if k != "lexiconp.txt"})
    prepare_lang(str(top / "dict"), "<unk>", str(top / "tmp"), str(top / "lang"))
    return str(top / "lang")


@fuzz(25)
@given(arpa=any_input(_ARPA_TOKENS + ["cab", "baa", "<eps>", "#0"], st.just(_LANG_ARPA)))
def test_format_lm_fails_without_an_output(arpa, lang_dir):
    """pynnet-format-lm: what our ARPA checker lets through kaldilm's arpa2fst takes (kaldilm
    aborts the process on anything else), and a failing run leaves no lang dir and no stage."""
    from pynnet.bin.lang import format_lm_main

    with scratch() as d:
        src = put(d, "lm.arpa", arpa)
        out = os.path.join(d, "lang_test")
        rc, err = run_cli_forked(format_lm_main, [lang_dir, src, "", out])
        if rc != 0:
            assert has_error(err) and not os.path.exists(out), err
        else:
            assert os.path.isfile(os.path.join(out, "G.fst"))
        assert sorted(os.listdir(d)) == sorted(["lm.arpa"] + (["lang_test"] if rc == 0 else []))


# ----------------------------------------------------------------------------------------------
# feature config files (pynnet/feat/options.py, pynnet/feat/compute.py, pynnet-compute-*-feats)
# ----------------------------------------------------------------------------------------------

_CONF_NAMES = ["sample-frequency", "frame-shift", "frame-length", "dither", "preemphasis-coefficient",
               "remove-dc-offset", "window-type", "num-mel-bins", "low-freq", "high-freq", "vtln-low",
               "vtln-high", "num-ceps", "use-energy", "cepstral-lifter", "energy-floor", "snip-edges",
               "htk-compat", "dither-mode", "channel", "min-duration", "vtln-warp", "max-overshoot",
               "blackman-coeff", "round-to-power-of-two", "raw-energy", "no-such-option", "config"]
_CONF_VALUES = ["8000", "16000", "10", "25", "0", "1", "-1", "2", "3", "23", "40", "13", "0.97", "true",
                "false", "hamming", "povey", "rectangular", "frame", "20", "7800", "-200", "1e6", "0.9",
                "1.1", "4000"] + BAD_TOKENS


_CONF_BASE = {"sample-frequency": "16000", "frame-length": "25", "frame-shift": "10", "num-mel-bins": "23",
              "dither": "1", "low-freq": "20", "high-freq": "-400"}


@st.composite
def conf_file(draw) -> bytes:
    """Mostly --name=value lines with plausible or bad values; sometimes anything at all."""
    name, value = st.sampled_from(_CONF_NAMES), st.sampled_from(_CONF_VALUES)
    line = st.one_of(st.builds(lambda n, v: f"--{n}={v}", name, value),
                     st.builds(lambda n: f"--{n}", name),
                     st.builds(lambda n, v: f"--{n} = {v}", name, value),
                     st.sampled_from(["# a comment", "", "  ", "-x", "--", "--=1", "foo"]))
    conf = draw(st.builds(lambda ls, nl: nl.join(ls).encode(), st.lists(line, max_size=6),
                          st.sampled_from(["\n", "\r\n"])))
    # a working config with one bad (or odd) value
    base = dict(_CONF_BASE)
    base[draw(st.sampled_from(_CONF_NAMES[:-2]))] = draw(value)
    one_bad = "".join(f"--{k}={v}\n" for k, v in base.items()).encode()
    return draw(st.one_of(st.just(one_bad), st.just(one_bad), st.just(conf), mutated(conf), st.binary(max_size=60)))


@pytest.fixture(scope="module")
def tiny_wav(tmp_path_factory):
    import soundfile as sf

    d = tmp_path_factory.mktemp("wav")
    x = (np.sin(np.arange(4000) * 0.05) * 8000).astype(np.int16)   # 0.25 s at 16 kHz
    sf.write(str(d / "a.wav"), x, 16000, subtype="PCM_16")
    (d / "wav.scp").write_text(f"utt1 {d / 'a.wav'}\n")
    return str(d / "wav.scp")


@fuzz(100)
@given(conf=conf_file(), kind=st.sampled_from(["mfcc", "fbank"]))
def test_feature_config_never_crashes(conf, kind):
    """A config file is read, checked and turned into a feature computer (and one short
    utterance computed) or refused in one line."""
    from pynnet.feat.compute import FeatureComputer, register_options
    from pynnet.feat.options import KaldiOptions

    with scratch() as d:
        path = put(d, "feat.conf", conf)
        p = KaldiOptions("")
        register_options(p, kind)
        v = reads_or_fails(lambda: p.parse([f"--config={path}"])[0], names=path)
        if v is None:
            return
        fc = reads_or_fails(FeatureComputer, kind, v, names="--")
        if fc is not None:
            x = (np.sin(np.arange(800) * 0.05) * 8000).astype(np.float32)
            feats = fc.compute(x, "utt1")
            assert feats.ndim == 2 and feats.shape[1] == fc.dim


@fuzz(40)
@given(conf=conf_file(), kind=st.sampled_from(["mfcc", "fbank"]))
def test_compute_feats_fails_without_an_output(conf, kind, tiny_wav):
    from pynnet.bin.feat import compute_fbank_feats, compute_mfcc_feats

    main = compute_mfcc_feats if kind == "mfcc" else compute_fbank_feats
    with scratch() as d:
        path = put(d, "feat.conf", conf)
        ark, scp = os.path.join(d, "raw.ark"), os.path.join(d, "raw.scp")
        rc, err = run_cli(main, [f"--config={path}", f"scp:{tiny_wav}", f"ark,scp:{ark},{scp}"])
        if rc != 0:
            assert has_error(err) and not os.path.exists(ark) and not os.path.exists(scp), err
        assert not temp_leftovers(d)


@fuzz(40)
@given(data=st.data())
def test_compute_feats_with_segments_fails_without_an_output(data, tiny_wav):
    """compute-mfcc-feats --segments on a near-valid wav.scp and segments: features, or one error
    and no output; per-recording problems are warnings (Kaldi's)."""
    from pynnet.bin.feat import compute_mfcc_feats

    wav = open(tiny_wav).read().split()[1]
    with scratch() as d:
        wav_scp = data.draw(any_input(["r1", wav, "|"], st.just(f"r1 {wav}\nr2 {wav}\n".encode())))
        assume(b"|" not in wav_scp)      # (no fuzzed shell commands)
        scp = put(d, "wav.scp", wav_scp)
        seg = put(d, "segments", data.draw(any_input(["u1", "r1", "0", "0.1", "-1"],
                                                     st.just(b"u1 r1 0 0.1\nu2 r1 0.05 0.2\nu3 r2 0 -1\n"))))
        ark, out_scp = os.path.join(d, "raw.ark"), os.path.join(d, "raw.scp")
        rc, err = run_cli(compute_mfcc_feats, ["--dither=0", f"--segments={seg}", f"scp:{scp}",
                                               f"ark,scp:{ark},{out_scp}"])
        if rc != 0:
            assert has_error(err) and not os.path.exists(ark) and not os.path.exists(out_scp), err
        assert not temp_leftovers(d)


# ----------------------------------------------------------------------------------------------
# NIST SPHERE (pynnet/io/audio.py)
# ----------------------------------------------------------------------------------------------

def _sphere_bytes(samples: np.ndarray, rate: int, coding: str) -> bytes:
    from pynnet.io.audio import write_sphere

    with scratch() as d:
        path = os.path.join(d, "x.sph")
        write_sphere(path, samples, rate, coding)
        with open(path, "rb") as f:
            return f.read()


_SPH_FIELDS = ["sample_count -i 10", "sample_rate -i 8000", "channel_count -i 1", "channel_count -i 2",
               "sample_n_bytes -i 2", "sample_n_bytes -i 1", "sample_coding -s4 ulaw", "sample_coding -s3 pcm",
               "sample_coding -s4 alaw", "sample_byte_format -s2 10", "sample_byte_format -s2 01",
               "sample_rate -r 8000.0", "sample_count -i -5", "channel_count -s1 x", "sample_rate -i 0",
               "sample_rate -r nan", "sample_rate -r inf", "sample_count -r 1e30", "sample_coding -s99 pcm",
               "sample_count -i 99999999999999999999", "channel_count -i 99999999999999999999", "x -z 1",
               "; comment", "", "end_head"]


@st.composite
def sphere_input(draw) -> bytes:
    kind = draw(st.sampled_from(["valid", "header", "bytes"]))
    if kind == "bytes":
        return b"NIST_1A\n" + draw(st.binary(max_size=100))
    if kind == "header":
        lines = draw(st.lists(st.sampled_from(_SPH_FIELDS), max_size=8))
        size = draw(st.sampled_from([1024, 16, 0, -3, 99999]))
        head = f"NIST_1A\n{size:7d}\n" + "\n".join(lines) + "\nend_head\n"
        return head.encode() + b" " * draw(st.integers(0, 1100 - len(head))) + draw(st.binary(max_size=40))
    n = draw(st.integers(0, 20))
    ch = draw(st.integers(1, 2))
    x = np.arange(n * ch, dtype=np.int16).reshape(n, ch) * 37
    return draw(mutated(_sphere_bytes(x, 8000, draw(st.sampled_from(["ulaw", "pcm"]))), binary=True))


@fuzz(200)
@given(data=sphere_input())
def test_sphere_reader_never_crashes(data):
    from pynnet.io.audio import read_audio_file, read_sphere, read_wav_bytes

    with scratch() as d:
        path = put(d, "x.sph", data)
        out = reads_or_fails(read_sphere, path, names=path)
        if out is not None:
            samples, rate = out
            assert samples.ndim == 2 and samples.shape[1] >= 1 and rate > 0
        reads_or_fails(read_audio_file, path, names=path)
        reads_or_fails(read_wav_bytes, data, "pipe-name", names="pipe-name")


@fuzz(60)
@given(n=st.integers(0, 50), ch=st.integers(1, 3), rate=st.sampled_from([8000, 16000, 44100]),
       seed=st.integers(0, 2**31))
def test_sphere_write_read_round_trip(n, ch, rate, seed):
    from pynnet.io.audio import linear_to_ulaw, read_sphere, ulaw_to_linear, write_sphere

    x = np.random.default_rng(seed).integers(-32768, 32768, size=(n, ch)).astype(np.int16)
    with scratch() as d:
        for coding in ("pcm", "ulaw"):
            path = os.path.join(d, f"{coding}.sph")
            write_sphere(path, x, rate, coding)
            y, r = read_sphere(path)
            want = x if coding == "pcm" else ulaw_to_linear(linear_to_ulaw(x))
            assert r == rate and y.shape == (n, ch) and np.array_equal(y, want)


# ----------------------------------------------------------------------------------------------
# ark/scp (pynnet/feat/tables.py through kaldiio)
# ----------------------------------------------------------------------------------------------

def _write_ark(d: str, mats: dict[str, np.ndarray], text: bool = False, compress: bool = False) -> tuple[str, str]:
    from pynnet.feat.tables import MatrixWriter

    ark, scp = os.path.join(d, "m.ark"), os.path.join(d, "m.scp")
    with MatrixWriter(f"ark,scp{',t' if text else ''}:{ark},{scp}", compress=compress) as w:
        for k, m in mats.items():
            w.write(k, m)
    return ark, scp


_MATS = st.dictionaries(
    st.text(alphabet="abu01-_\u00e9", min_size=1, max_size=5),
    st.tuples(st.integers(0, 4), st.integers(1, 3), st.integers(0, 2**31)).map(
        lambda t: np.random.default_rng(t[2]).normal(size=t[:2]).astype(np.float32)),
    min_size=1, max_size=4)


@fuzz(100)
@given(mats=_MATS, text=st.booleans(), which=st.sampled_from(["ark", "scp"]), data=st.data())
def test_ark_and_scp_readers_never_crash(mats, text, which, data):
    from pynnet.feat.tables import read_matrices

    with scratch() as d:
        ark, scp = _write_ark(d, mats, text)
        target = ark if which == "ark" else scp
        with open(target, "rb") as f:
            valid = f.read()
        bad = data.draw(st.one_of(mutated(valid, binary=not text and which == "ark"), mutated(valid),
                                  st.binary(max_size=80)))
        put(d, os.path.basename(target), bad)
        reads_or_fails(read_matrices, f"{which}:{target}", names=d)


@fuzz(60)
@given(mats=_MATS, text=st.booleans(), compress=st.booleans())
def test_ark_scp_write_read_round_trip(mats, text, compress):
    from pynnet.feat.tables import read_matrices

    compress = compress and not text
    if text:
        # kaldiio writes an empty matrix as ' []', which it cannot read back (Kaldi writes ' [ ]',
        # read back as a vector): text arks of empty matrices do not round-trip
        assume(all(m.shape[0] for m in mats.values()))
    with scratch() as d:
        ark, scp = _write_ark(d, mats, text, compress)
        for spec in (f"ark:{ark}", f"scp:{scp}"):
            back = dict(read_matrices(spec))
            assert list(back) == list(mats)
            for k, m in mats.items():
                if compress:
                    assert back[k].shape == m.shape
                    assert np.allclose(back[k], m, atol=0.01 * (np.ptp(m) if m.size else 1) + 1e-6)
                elif text:
                    assert np.allclose(back[k], m, rtol=1e-6, atol=1e-6)
                else:
                    assert np.array_equal(back[k], m)


@fuzz(40)
@given(mats=_MATS, data=st.data())
def test_copy_feats_fails_without_an_output(mats, data):
    from pynnet.bin.feat import copy_feats

    with scratch() as d:
        ark, scp = _write_ark(d, mats)
        with open(ark, "rb") as f:
            put(d, "m.ark", data.draw(mutated(f.read(), binary=True)))
        out = os.path.join(d, "out")
        rc, err = run_cli(copy_feats, [f"scp:{scp}", f"ark,scp:{out}.ark,{out}.scp"])
        if has_error(err):
            assert not os.path.exists(out + ".ark") and not os.path.exists(out + ".scp"), err
        assert not temp_leftovers(d)


# ----------------------------------------------------------------------------------------------
# lattices (pynnet/decode/lattice.py)
# ----------------------------------------------------------------------------------------------

@st.composite
def lattice(draw):
    from pynnet.decode.lattice import Lattice

    ns = draw(st.integers(1, 5))
    ne = draw(st.integers(0, 8))
    ints = st.integers(0, ns - 1)
    cost = st.floats(-50, 50, allow_nan=False).map(lambda x: float(f"{x:.6g}"))
    src = draw(st.lists(ints, min_size=ne, max_size=ne))
    dst = draw(st.lists(ints, min_size=ne, max_size=ne))
    il = draw(st.lists(st.integers(0, 1000), min_size=ne, max_size=ne))
    ol = draw(st.lists(st.integers(0, 1000), min_size=ne, max_size=ne))
    g = draw(st.lists(cost, min_size=ne, max_size=ne))
    a = draw(st.lists(cost, min_size=ne, max_size=ne))
    fs = sorted(draw(st.sets(ints, max_size=ns)))
    fg = draw(st.lists(cost, min_size=len(fs), max_size=len(fs)))
    fa = draw(st.lists(cost, min_size=len(fs), max_size=len(fs)))
    i32, f64 = (lambda v: np.array(v, np.int32)), (lambda v: np.array(v, np.float64))
    # the text form names the states it uses; the start state is the first one printed
    return Lattice(ns, 0, i32(src), i32(dst), i32(il), i32(ol), f64(g), f64(a), i32(fs), f64(fg), f64(fa))


def _lattice_text(lats: dict[str, object]) -> bytes:
    return "".join(lat.to_kaldi_text(k) for k, lat in lats.items()).encode()


_LAT_TOKENS = ["0", "1", "2", "3", "4", "1,2", "0,0", "1.5,-2", "1,2,3_4", "1,2,", "utt1", "-1", "2147483648"]


@fuzz(200)
@given(data=st.one_of(any_input(_LAT_TOKENS),
                      st.dictionaries(ID, lattice(), min_size=1, max_size=3).map(_lattice_text).flatmap(mutated)),
       gz=st.booleans())
def test_lattice_reader_never_crashes(data, gz):
    import gzip

    from pynnet.decode.lattice import best_paths, read_lattice_ark

    with scratch() as d:
        path = put(d, "lat.1" + (".gz" if gz else ""), gzip.compress(data, mtime=0) if gz else data)
        lats = reads_or_fails(read_lattice_ark, f"ark:{path}", names=path)
        for _, lat in lats or ():
            # (best_paths' own one-line error: a lattice with a cycle)
            reads_or_fails(best_paths, lat, [10.0, 12.0], [0.0, 0.5], names="")


def _arcs(lat) -> list[tuple]:
    return sorted(zip(lat.src.tolist(), lat.dst.tolist(), lat.ilabel.tolist(), lat.olabel.tolist(),
                      lat.graph.tolist(), lat.acoustic.tolist()))


def _finals(lat) -> list[tuple]:
    return sorted(zip(lat.final_state.tolist(), lat.final_graph.tolist(), lat.final_acoustic.tolist()))


@fuzz(100)
@given(lats=st.dictionaries(ID, lattice(), min_size=1, max_size=3))
def test_lattice_write_read_round_trip(lats):
    from pynnet.decode.lattice import read_lattice_ark

    with scratch() as d:
        path = put(d, "lat.txt", _lattice_text(lats))
        back = dict(read_lattice_ark(f"ark:{path}"))
    assert list(back) == list(lats)
    for k, lat in lats.items():
        b = back[k]
        assert _arcs(b) == _arcs(lat) and _finals(b) == _finals(lat)
        # (the text form cannot say which state starts a lattice whose start state has neither
        # arcs nor a final weight, as in Kaldi: such a lattice has no path either way)
        if (lat.src == lat.start).any() or (lat.final_state == lat.start).any():
            assert b.start == lat.start


def _binary_lattice(key: str, lat, compact: bool) -> bytes:
    """``lat`` as Kaldi writes it in a binary archive: OpenFst's VectorFst of arc type lattice4,
    or compactlattice44 with each arc's word on both sides and its ilabel as a one-transition-id
    string (empty for an ilabel of 0)."""
    import struct

    def string(x: str) -> bytes:
        return struct.pack("<i", len(x)) + x.encode()

    arc_type = "compactlattice44" if compact else "lattice4"
    out = [key.encode() + b" ", struct.pack("<i", 2125659606), string("vector"), string(arc_type),
           struct.pack("<iiQqqq", 1, 0, 0, lat.start, lat.num_states, lat.num_arcs)]
    finals = dict(zip(lat.final_state.tolist(), zip(lat.final_graph.tolist(), lat.final_acoustic.tolist())))
    for st_ in range(lat.num_states):
        g, a = finals.get(st_, (math.inf, math.inf))
        arcs = np.flatnonzero(lat.src == st_)
        out.append(struct.pack("<ff", g, a) + (struct.pack("<i", 0) if compact else b"") + struct.pack("<q", arcs.size))
        for e in arcs.tolist():
            i, o, d = int(lat.ilabel[e]), int(lat.olabel[e]), int(lat.dst[e])
            g, a = float(lat.graph[e]), float(lat.acoustic[e])
            if compact:
                tids = [i] if i else []
                out.append(struct.pack(f"<iiffi{len(tids)}ii", o, o, g, a, len(tids), *tids, d))
            else:
                out.append(struct.pack("<iiffi", i, o, g, a, d))
    return b"".join(out)


@fuzz(150)
@given(lat=lattice(), compact=st.booleans(), data=st.data())
def test_binary_lattice_reader_never_crashes(lat, compact, data):
    from pynnet.decode.lattice import best_paths, read_lattice_ark

    with scratch() as d:
        path = put(d, "lat.1", data.draw(mutated(_binary_lattice("utt1", lat, compact), binary=True)))
        for _, lat in reads_or_fails(read_lattice_ark, f"ark:{path}", names=path) or ():
            reads_or_fails(best_paths, lat, [10.0], [0.0, 0.5], names="")


@fuzz(60)
@given(lat=lattice())
def test_binary_lattice4_read_round_trip(lat):
    """A binary Lattice (latgen-faster's lattice4 archives) reads back arc for arc."""
    from pynnet.decode.lattice import read_lattice_ark

    with scratch() as d:
        path = put(d, "lat.1", _binary_lattice("utt1", lat, False) + _binary_lattice("utt2", lat, True))
        back = dict(read_lattice_ark(f"ark:{path}"))
    b = back["utt1"]
    assert (b.num_states, b.start) == (lat.num_states, lat.start)
    f32 = lambda x: np.asarray(x, np.float32).tolist()  # noqa: E731
    assert sorted(zip(b.src.tolist(), b.dst.tolist(), b.ilabel.tolist(), b.olabel.tolist(), f32(b.graph))) == \
        sorted(zip(lat.src.tolist(), lat.dst.tolist(), lat.ilabel.tolist(), lat.olabel.tolist(), f32(lat.graph)))
    assert sorted(b.final_state.tolist()) == sorted(lat.final_state.tolist())
    assert back["utt2"].num_arcs == lat.num_arcs       # (compact: one transition-id per arc at most)


@fuzz(100)
@given(data=any_input(["1", "2", "15", "begin", "end", "singleton", "internal", "nonword", "2147483647"],
                      st.just(b"1 nonword\n2 begin\n3 end\n4 internal\n5 singleton\n")))
def test_word_boundary_never_crashes(data):
    """phones/word_boundary.int, as lattice-to-ctm reads it."""
    from pynnet.decode.ctm import read_word_boundary

    with scratch() as d:
        path = put(d, "word_boundary.int", data)
        reads_or_fails(read_word_boundary, path, names=path)


# ----------------------------------------------------------------------------------------------
# nnet1 feature transforms (pynnet/nnet/kaldi_nnet1.py)
# ----------------------------------------------------------------------------------------------

@st.composite
def feature_transform(draw):
    import torch

    from pynnet.nnet.model import FeatureTransform

    t = FeatureTransform(draw(st.integers(1, 4)), draw(st.integers(0, 3)))
    vals = st.floats(-1e6, 1e6, allow_nan=False, width=32)
    n = t.output_dim
    t.shift.copy_(torch.tensor(draw(st.lists(vals, min_size=n, max_size=n)), dtype=torch.float32))
    t.scale.copy_(torch.tensor(draw(st.lists(vals, min_size=n, max_size=n)), dtype=torch.float32))
    return t


_FT_TOKENS = ["<Nnet>", "</Nnet>", "<Splice>", "<AddShift>", "<Rescale>", "<LearnRateCoef>", "<!EndOfComponent>",
              "[", "]", "-1", "0", "1", "3", "9", "<Sigmoid>"]


@fuzz(200)
@given(data=st.one_of(any_input(_FT_TOKENS),
                      st.tuples(feature_transform(), st.booleans()).map(lambda tb: feature_transform_bytes(*tb))
                      .flatmap(lambda b: mutated(b, binary=b.startswith(b"\0B")))))
def test_feature_transform_reader_never_crashes(data):
    from pynnet.nnet.kaldi_nnet1 import read_feature_transform

    with scratch() as d:
        path = put(d, "final.feature_transform", data)
        t = reads_or_fails(read_feature_transform, path, names=path)
        if t is not None:
            assert t.shift.numel() == t.output_dim == t.scale.numel()


@fuzz(60)
@given(t=feature_transform())
def test_feature_transform_write_read_round_trip(t):
    from pynnet.nnet.kaldi_nnet1 import feature_transform_bytes, read_feature_transform, write_feature_transform

    with scratch() as d:
        path = os.path.join(d, "ft")
        write_feature_transform(path, t)
        u = read_feature_transform(path)
        put(d, "ft.bin", feature_transform_bytes(t, binary=True))
        v = read_feature_transform(os.path.join(d, "ft.bin"))
    for w in (u, v):
        assert (w.input_dim, w.context) == (t.input_dim, t.context)
    # binary: the float32 bytes themselves; text: Kaldi's 7 significant digits
    assert np.array_equal(v.shift.numpy(), t.shift.numpy()) and np.array_equal(v.scale.numpy(), t.scale.numpy())
    for x, y in ((u.shift, t.shift), (u.scale, t.scale)):
        assert np.allclose(x.numpy(), y.numpy(), rtol=6e-7, atol=0)


# ----------------------------------------------------------------------------------------------
# NIST scoring files: STM, CTM, GLM (pynnet/score/stm.py)
# ----------------------------------------------------------------------------------------------

_STM = b""";; comment
en_4156 A en_4156_A 1.5 3.25 <O,en,F,en-F> HELLO (UH) WORLD
en_4156 A en_4156_A 4.0 5.0 IGNORE_TIME_SEGMENT_IN_SCORING
en_4156 B en_4156_B 0 2 { A / AN / @ } APPLE
"""
_CTM = b"en_4156 A 1.50 0.30 hello 0.9\nen_4156 A 1.9 0.2 world\nen_4156 B 0.1 0.2 an NA\n"
_GLM = b"""* name "test"
* format = 'NIST1'
* copy_no_hit = 'T'
* case_sensitive = 'F'
;; INPUT_DEPENDENT_APPLICATION = "stm"
I'M => I AM / [ ] __ [ ]
GONNA => GOING TO
;; INPUT_DEPENDENT_APPLICATION = "(stm|ctm)"
UH-HUH => { UH-HUH / UHHUH }
"""
_SCORE_TOKENS = ["en_4156", "A", "B", "1.5", "3.25", "-1", "<O>", "<x", "(UH)", "{", "}", "/", "@", "=>",
                 "__", "[", "]", "*", "format", "=", "'NIST1'", "\"x\"", ";;", "INPUT_DEPENDENT_APPLICATION",
                 "\"(\"", "NA"]


@fuzz(120)
@given(stm=any_input(_SCORE_TOKENS, st.just(_STM)), ctm=any_input(_SCORE_TOKENS, st.just(_CTM)),
       glm=any_input(_SCORE_TOKENS, st.just(_GLM)))
def test_stm_ctm_glm_readers_never_crash(stm, ctm, glm):
    from pynnet.score.stm import read_ctm, read_glm, read_stm

    with scratch() as d:
        paths = {n: put(d, n, b) for n, b in (("ref.stm", stm), ("hyp.ctm", ctm), ("en.glm", glm))}
        g = reads_or_fails(read_glm, paths["en.glm"], names=paths["en.glm"])
        reads_or_fails(read_stm, paths["ref.stm"], g, names=paths["ref.stm"])
        reads_or_fails(read_ctm, paths["hyp.ctm"], g, names=paths["hyp.ctm"])


# ----------------------------------------------------------------------------------------------
# Switchboard ms98 transcripts and dictionary (pynnet/corpora/swbd.py)
# ----------------------------------------------------------------------------------------------

_MS98 = (b"sw2001A-ms98-a-0001 0.000000 0.977625 [silence]\n"
         b"sw2001A-ms98-a-0002 0.977625 11.561375 hi um yeah i'd like to talk about how you dress for work\n"
         b"sw2001A-ms98-a-0003 11.561375 12.3 [laughter] <b_aside> okay <e_aside>\n")
_MS98_DICT = (b"file: sw-ms98-dict.text\n#comment\nabout ax b aw t\nhi hh ay\nokay ow k ey\nyeah y ae\n"
              b"[silence] sil\n[laughter] lau\nibm ay b iy eh m\n"
              # the letters' phones, which the dictionary must have
              + b"".join(f"{c.lower()} {p}\n".encode() for c, p in LETTER_PRONS.items()))
_ACRONYMS = b"ibm\ti._b._m.\ti b m\nfbi\tf._b._i.\tf b i\n"


@fuzz(100)
@given(trans=any_input(["sw2001A-ms98-a-0001", "0.5", "1.0", "[silence]", "hi"], st.just(_MS98)),
       dict_text=any_input(["a", "ax", "b", "file:"], st.just(_MS98_DICT)),
       acronyms=any_input(["ibm", "i._b._m."], st.just(_ACRONYMS)))
def test_swbd_readers_never_crash(trans, dict_text, acronyms):
    from pynnet.corpora import swbd

    with scratch() as d:
        put(d, "20/2001/sw2001A-ms98-a-trans.text", trans)
        dpath = put(d, "sw-ms98-dict.text", dict_text)
        apath = put(d, "acronyms.map", acronyms)
        rows = reads_or_fails(swbd.read_ms98, d, names=d)
        for ms98_id, s, e, words, _, _ in rows or ():
            swbd.ms98_utt_id(ms98_id, s, e)
        reads_or_fails(swbd.build_dict, dpath, names=dpath)
        reads_or_fails(swbd.read_acronyms_map, apath, names=apath)


# ----------------------------------------------------------------------------------------------
# wav.scp and segments as the feature programs read them (pynnet/io/audio.py)
# ----------------------------------------------------------------------------------------------

@fuzz(100)
@given(wav_scp=any_input(["r1", "a.wav", "sox", "|", "-"], st.just(b"r1 a.wav\nr2 sox b.wav -t wav - |\n")),
       segments=any_input(["u1", "r1", "0", "1.5", "-1", "A"], st.just(b"u1 r1 0 1.5\nu2 r1 1.5 -1 1\n")))
def test_wav_scp_and_segments_never_crash(wav_scp, segments):
    from pynnet.io.audio import read_segments, read_wav_scp

    with scratch() as d:
        reads_or_fails(read_wav_scp, put(d, "wav.scp", wav_scp), names=d)
        reads_or_fails(read_segments, put(d, "segments", segments), names=d)


_SPH2PIPE_OPTS = ["-f wav", "-p", "-c 1", "-c 2", "-c 3", "-t 0.01:0.02", "-t :0.01", "-t 0.01:", "-s 5:9", "-s 3:",
                   "-h", "-u", "-c", "-t"] + [f"{o} {v}" for o in ("-c", "-t", "-s") for v in BAD_NUMBERS if v] + \
                  [f"-t 0:{v}" for v in ("nan", "inf", "1e999", "x")]


@pytest.mark.skipif(shutil.which("sph2pipe") is not None, reason="sph2pipe is installed: the real one runs")
@fuzz(100)
@given(opts=st.lists(st.sampled_from(_SPH2PIPE_OPTS), max_size=4), which=st.sampled_from(["ok", "missing", "two"]))
def test_sph2pipe_wav_scp_entries_never_crash(opts, which):
    """The sph2pipe lines of Switchboard wav.scp files, read without sph2pipe (pynnet's fallback)."""
    from pynnet.io.audio import read_rxfilename, write_sphere

    with scratch() as d:
        sph = os.path.join(d, "sw02001.sph")
        write_sphere(sph, np.arange(200, dtype=np.int16).reshape(100, 2), 8000)
        files = {"ok": sph, "missing": os.path.join(d, "nope.sph"), "two": f"{sph} {sph}"}[which]
        # (the wav.scp line, or the .sph file: "file has 2 channels")
        out = reads_or_fails(read_rxfilename, f"sph2pipe {' '.join(opts)} {files} |", "wav.scp:7",
                             names=("wav.scp:7", sph))
        if out is not None:
            samples, rate = out
            assert rate == 8000 and samples.ndim == 2


@fuzz(100)
@given(data=any_input(["utt1", "utt2", "a", "b", "<UNK>"], st.just(b"utt1 a b c\nutt2 b\nutt3\n")))
def test_wer_transcripts_and_vocab_never_crash(data):
    from pynnet.hmm.lm import read_sentences, read_vocab
    from pynnet.score.wer import read_transcripts

    with scratch() as d:
        path = put(d, "text", data)
        reads_or_fails(read_transcripts, path, names=path)
        reads_or_fails(read_vocab, path, names=path)
        reads_or_fails(read_sentences, path, True, names=path)


_SLURM_CONF = b"""command sbatch --export=PATH --ntasks-per-node=1
option time=* --time $0
option mem=* --mem-per-cpu $0
option mem=0
option num_threads=* --cpus-per-task $0 --ntasks-per-node=1
option num_threads=1 --cpus-per-task 1 --ntasks-per-node=1
option max_jobs_run=* --array-throttle $0
default gpu=0
option gpu=0 -p shared
option gpu=* -p gpu --gres=gpu:$0 --time 4:0:0  # this has to be figured out
"""


@fuzz(100)
@given(data=any_input(["command", "option", "default", "sbatch", "time=*", "gpu=0", "$0", "#"], st.just(_SLURM_CONF)))
def test_slurm_conf_never_crashes(data):
    """conf/slurm.conf (slurm.pl --config): read, or refused with slurm.pl's usage error naming it."""
    from pynnet.bin.jobs import UsageError, read_slurm_config

    with scratch() as d:
        path = put(d, "slurm.conf", data)
        try:
            read_slurm_config(path)
        except UsageError as e:
            assert str(e).startswith(path) and "\n" not in str(e), str(e)


@fuzz(100)
@given(opts=st.one_of(st.text(max_size=40), st.lists(st.sampled_from(
    ["--norm-means=true", "--norm-vars=false", "--norm-vars=true", "--norm-means", "'", '"', "--x=1", "=", " "]),
    max_size=4).map(" ".join)))
def test_cmvn_opts_never_crash(opts):
    """An exp dir's cmvn_opts, as the GMM programs take it (--cmvn-opts "$(cat cmvn_opts)")."""
    from pynnet.hmm.train import parse_cmvn_opts

    reads_or_fails(parse_cmvn_opts, opts, names="CMVN option")


# ----------------------------------------------------------------------------------------------
# Regression tests: the crashes the properties above found, as plain examples
# ----------------------------------------------------------------------------------------------

def _fails_naming(fn, *args, match: str, names: str):
    with pytest.raises(PynnetError, match=match) as e:
        out = fn(*args)
        if hasattr(out, "__next__"):
            list(out)
    assert names in str(e.value) and "\n" not in str(e.value), str(e.value)
    return str(e.value)


def test_symbol_table_huge_id_is_an_error_not_a_memory_error(tmp_path):
    from pynnet.hmm.lang import read_symbol_table

    p = tmp_path / "words.txt"
    p.write_text("<eps> 0\na 9223372036854775807\n")
    assert _fails_naming(read_symbol_table, str(p), match="32-bit", names=f"{p}:2:")
    # in range, but a list of 2 billion names: refused naming the line
    p.write_text("<eps> 0\na 1\nb 2000000000\nc 2\n")
    assert _fails_naming(read_symbol_table, str(p), match="ids should be consecutive", names=f"{p}:3:")
    p.write_text("<eps> 0\na 1\nb 5\n")   # small gaps are still fine
    assert read_symbol_table(str(p))[1] == ["<eps>", "a", "", "", "", "b"]


def test_sphere_header_bad_numbers_are_errors(tmp_path):
    from pynnet.io.audio import read_sphere

    def sph(*fields: str) -> str:
        head = "NIST_1A\n   1024\n" + "".join(f + "\n" for f in fields) + "end_head\n"
        p = tmp_path / "x.sph"
        p.write_bytes(head.encode().ljust(1024) + b"\0\1" * 8)
        return str(p)

    for fields, match in ((("sample_rate -i 8000", "channel_count -s1 x"), "channel_count 'x' is not an integer"),
                          (("sample_rate -r nan",), "sample_rate=nan"),
                          (("sample_rate -r inf",), "sample_rate=inf"),
                          (("sample_rate -i 8000", "sample_count -i -5"), "sample_count=-5"),
                          (("sample_rate -i 8000", "sample_count -s2 ab"), "sample_count 'ab'")):
        p = sph(*fields)
        _fails_naming(read_sphere, p, match=match, names=p)
    # a -sN or -r number that is one is still read
    samples, rate = read_sphere(sph("sample_rate -r 8000.0", "channel_count -s1 2", "sample_count -s1 3"))
    assert rate == 8000 and samples.shape == (3, 2)
    bad = tmp_path / "bad.sph"
    bad.write_bytes(b"NIST_1A\n  abc\n")
    _fails_naming(read_sphere, str(bad), match="header size", names=str(bad))


def test_sphere_from_a_pipe_errors_name_the_pipe_not_a_temp_file():
    from pynnet.io.audio import read_wav_bytes

    msg = _fails_naming(read_wav_bytes, b"NIST_1A\n   1024\nend_head\n", "wav.scp:3",
                        match="truncated SPHERE header", names="wav.scp:3")
    assert "/tmp" not in msg


def test_corrupt_ark_is_one_line_error(tmp_path):
    from pynnet.feat.tables import read_matrices

    p = tmp_path / "m.ark"
    for data in (b"u1 \0BFM \x04\x00\x00\x00\x00\x04",      # header cut short: kaldiio's struct.error
                 b"u1 \0BFM \x04",
                 b"u1  [ 1 2\n x y ]\n",                     # kaldiio: RuntimeError over two lines
                 b"u1\t\t[]\n"):
        p.write_bytes(data)
        _fails_naming(read_matrices, f"ark:{p}", match="cannot read matrices", names=str(p))


def test_compressed_empty_matrix_is_written(tmp_path):
    from pynnet.feat.tables import MatrixWriter, read_matrices

    ark, scp = tmp_path / "a.ark", tmp_path / "a.scp"
    with MatrixWriter(f"ark,scp:{ark},{scp}", compress=True) as w:
        w.write("empty", np.zeros((0, 3), np.float32))
        w.write("full", np.ones((10, 3), np.float32))
    back = dict(read_matrices(f"scp:{scp}"))
    assert back["empty"].shape == (0, 3) and np.allclose(back["full"], 1.0)


def test_acronyms_map_bad_utf8_is_an_error(tmp_path):
    from pynnet.corpora.swbd import read_acronyms_map

    p = tmp_path / "acronyms.map"
    p.write_bytes(b"ibm\ti._b._m.\ti b m\n\x80\tx\ty\n")
    _fails_naming(read_acronyms_map, str(p), match="not valid UTF-8", names=f"{p}:2:")
    p.write_bytes(b"ibm\ti._b._m.\ti b m\r\n")                # CRLF: the same map
    assert read_acronyms_map(str(p)) == {"ibm": "i._b._m."}


def test_lattice_state_ids_out_of_range_are_errors(tmp_path):
    from pynnet.decode.lattice import read_lattice_ark

    p = tmp_path / "lat.txt"
    for body, line in (("0\t2147483648\t1\t1\t0,0\n1\n", 2),          # past int32
                       ("0\t1\t1\t1\t0,0\n1\t0,0\n2000000000\n", 4),   # in range, but 2e9 states
                       ("0\t-1\t1\t1\t0,0\n", 2),                       # a negative state
                       ("0\t1\t1\t99999999999\t0,0\n1\n", 2)):          # a label past int32
        p.write_text(f"utt1 \n{body}\n")
        _fails_naming(read_lattice_ark, f"ark:{p}", match="lattice", names=f"{p}:{line}:")
    p.write_text("utt1 \n0\t1\t5\t7\t1.5,2\n1\t0,0\n\n")
    ((key, lat),) = read_lattice_ark(f"ark:{p}")
    assert key == "utt1" and lat.num_states == 2 and lat.olabel.tolist() == [7]


@pytest.mark.parametrize("line, match", [
    ("--frame-length=nan", "--frame-length must be a finite number"),
    ("--frame-length=inf", "--frame-length must be a finite number"),
    ("--sample-frequency=nan", "--sample-frequency must be a finite number"),
    ("--dither=nan", "--dither must be a finite number"),
    ("--frame-length=1e9", "at most"),
    ("--num-mel-bins=1000000000000000000000000000000", "--num-mel-bins=.* too large"),
    ("--num-mel-bins=2147483647", "--num-mel-bins=.* too large"),
    ("--dither=1e300", "cannot compute features of utterance utt1"),
    ("--channel=-5", "--channel=-5"),
])
def test_feature_options_that_crashed_are_one_line_errors(tmp_path, tiny_wav, line, match):
    from pynnet.bin.feat import compute_mfcc_feats

    conf = tmp_path / "mfcc.conf"
    conf.write_text(line + "\n")
    ark, scp = tmp_path / "raw.ark", tmp_path / "raw.scp"
    rc, err = run_cli(compute_mfcc_feats, [f"--config={conf}", f"scp:{tiny_wav}", f"ark,scp:{ark},{scp}"])
    assert rc == 1 and re.search(match, err.strip().splitlines()[-1]), err
    assert not ark.exists() and not scp.exists() and not temp_leftovers(str(tmp_path))


def test_vtln_warp_that_crashed_is_an_error():
    from pynnet.feat.compute import FeatureComputer, default_values

    fc = FeatureComputer("mfcc", {**default_values("mfcc"), "dither": 0.0})
    x = np.ones(800, np.float32)
    for warp, match in ((float("nan"), "bad VTLN warp factor"), (0.0, "bad VTLN warp factor"),
                        (100.0, "VTLN warp factor 100")):
        with pytest.raises(PynnetError, match=match):
            fc.compute(x, "u", warp)
    assert fc.compute(x, "u", 1.1).shape == (3, 13)


def test_segments_negative_channel_or_nan_time_is_an_error(tmp_path):
    from pynnet.io.audio import read_segments

    p = tmp_path / "segments"
    p.write_text("u1 r1 0 1 0\nu2 r1 1 2 -3\n")
    _fails_naming(read_segments, str(p), match="channel must be an integer >= 0", names=f"{p}:2:")
    for times in ("nan 0.1", "0 nan", "0 inf", "1e999 2"):   # (NaN passed every comparison, then int(nan))
        p.write_text(f"u1 r1 0 1\nu2 r1 {times}\n")
        _fails_naming(read_segments, str(p), match="start/end times must be finite", names=f"{p}:2:")


def test_corrupt_ark_header_asking_for_exabytes_is_an_error(tmp_path):
    from pynnet.feat.tables import read_matrices

    p = tmp_path / "m.ark"
    # FM of rows x cols: kaldiio reads rows*cols*4 bytes at once (an OverflowError past 2^63, a
    # MemoryError for 4 TB)
    for size in (b"\xff\xff\xff\x7f", b"\x00\x00\x10\x00"):
        p.write_bytes(b"u1 \0BFM \x04" + size + b"\x04" + size + b"\0" * 16)
        _fails_naming(read_matrices, f"ark:{p}", match="sizes larger than memory", names=str(p))


def test_ms98_nan_or_inf_times_are_errors(tmp_path):
    from pynnet.corpora.swbd import read_ms98

    p = tmp_path / "20" / "2001" / "sw2001A-ms98-a-trans.text"
    p.parent.mkdir(parents=True)
    for times in ("nan 0.97", "0 inf", "0 1e999"):
        p.write_text(f"sw2001A-ms98-a-0001 0 0.5 hi\nsw2001A-ms98-a-0002 {times} hi\n")
        _fails_naming(read_ms98, str(tmp_path), match="bad start/end times", names=f"{p}:2:")


@pytest.mark.skipif(shutil.which("sph2pipe") is not None, reason="sph2pipe is installed: the real one runs")
def test_sph2pipe_bad_option_values_and_missing_file_are_errors(tmp_path):
    from pynnet.io.audio import read_rxfilename, write_sphere

    sph = tmp_path / "sw02001.sph"
    write_sphere(sph, np.zeros((80, 2), np.int16), 8000)
    for opts, match in (("-c x", "sph2pipe -c 'x': not a number"), ("-t 0:inf", "sph2pipe -t 'inf'"),
                        ("-t nan:1", "sph2pipe -t 'nan'"), ("-s 1:2.5", "sph2pipe -s '2.5'")):
        _fails_naming(read_rxfilename, f"sph2pipe -f wav -p {opts} {sph} |", "wav.scp:3", match=match,
                      names="wav.scp:3:")
    # a missing file is the recording's error (a warning in compute-mfcc-feats), not a traceback
    _fails_naming(read_rxfilename, f"sph2pipe -f wav -p {tmp_path}/nope.sph |", "wav.scp:4",
                  match="sph2pipe: no such file", names="wav.scp:4:")
    samples, _ = read_rxfilename(f"sph2pipe -f wav -p -c 2 -s 10:20 {sph} |", "wav.scp:5")
    assert samples.shape == (10, 1)


def test_slurm_conf_bad_utf8_is_a_usage_error(tmp_path):
    from pynnet.bin.jobs import UsageError, read_slurm_config

    p = tmp_path / "slurm.conf"
    p.write_bytes(b"command sbatch\noption time=* --time $0 \xff\n")
    with pytest.raises(UsageError, match=f"^{re.escape(str(p))}:2: not valid UTF-8$"):
        read_slurm_config(str(p))


def test_cmvn_opts_unbalanced_quote_is_an_error():
    from pynnet.hmm.train import parse_cmvn_opts

    with pytest.raises(PynnetError, match="cannot parse the CMVN options '--norm-vars=\"true'"):
        parse_cmvn_opts('--norm-vars="true')
    assert parse_cmvn_opts("--norm-vars=true") == (True, True)


def test_binary_lattice_corrupt_type_string_is_a_one_line_error(tmp_path):
    import struct

    from pynnet.decode.lattice import read_lattice_ark

    p = tmp_path / "lat.1"
    p.write_bytes(b"utt1 " + struct.pack("<i", 2125659606) + struct.pack("<i", 6) + b"vector"
                  + struct.pack("<i", 9) + b"latti\ne4\xff" + b"\0" * 64)
    msg = _fails_naming(read_lattice_ark, f"ark:{p}", match="unsupported binary FST", names=str(p))
    assert "arc type latti\\ne4\\xff)" in msg


def test_word_boundary_huge_phone_id_is_an_error(tmp_path):
    from pynnet.decode.ctm import read_word_boundary

    p = tmp_path / "word_boundary.int"
    p.write_text("1 nonword\n2 begin\n2147483647 end\n")
    _fails_naming(read_word_boundary, str(p), match="phone id 2147483647 is far past", names=f"{p}:3:")
    p.write_text("1 nonword\n2 begin\n9 end\n")
    out = read_word_boundary(str(p))          # (small gaps: kind 0 for the phones not listed)
    assert out.shape == (10,) and out[9] != 0 and out[2] != 0 and out[3] == 0



@pytest.mark.parametrize("edit, match", [
    (("-0.3\t<s> cab", "-0.3\t<s> cab\t-0.1"), "a back-off weight on an n-gram of the highest order"),
    (("-0.5\tcab\t-0.3", "-inf\tcab\t-0.3"), "bad number '-inf'"),
    (("-0.5\tcab\t-0.3", "-0.5\tcab\tinf"), "bad number 'inf'"),
    (("-0.5\tcab\t-0.3", "-3.5e38\tcab\t-0.3"), "bad number '-3.5e38'"),
    (("-1.3\tsil", "-1.3\t<eps>"), "'<eps>' and '#0' cannot be words"),
    (("-0.2\tcab baa", "-0.2\tcab #0"), "'<eps>' and '#0' cannot be words"),
    (("-0.6\tbaa", "-0.6\t\0baa"), "NUL byte"),
    (("\\data\\", " \\data\\"), "must begin its line"),
    (("\\end\\", " \\end\\"), "must begin its line"),
])
def test_arpa_that_aborted_kaldilm_is_a_one_line_error(tmp_path, lang_dir, edit, match):
    """Each of these passed our ARPA checker, and kaldilm's arpa2fst then aborted the process
    (SIGABRT: no file name, format_lm's stage dir left behind)."""
    from pynnet.bin.lang import format_lm_main
    from pynnet.hmm.lm import BackoffLM

    arpa = tmp_path / "lm.arpa"
    text = _LANG_ARPA.decode()
    assert edit[0] in text
    arpa.write_text(text.replace(edit[0], edit[1], 1))
    _fails_naming(BackoffLM.read_arpa, str(arpa), match=match, names=f"{arpa}:")
    rc, err = run_cli_forked(format_lm_main, [lang_dir, str(arpa), "", str(tmp_path / "out")])
    assert rc == 1 and match.split("'")[0] in err and not (tmp_path / "out").exists()
    assert sorted(os.listdir(tmp_path)) == ["lm.arpa"]


def test_feature_transform_corrupt_tokens_are_one_line_errors(tmp_path):
    from pynnet.nnet.kaldi_nnet1 import read_feature_transform

    dims = b"\x04\x03\x00\x00\x00\x04\x03\x00\x00\x00"
    p = tmp_path / "final.feature_transform"
    for data, match in ((b"\0B<Nnet> <Sig\nmoid> " + dims, r"component <Sig\\nmoid>"),
                        (b"\0B<Nnet> <AddShift> " + dims + b"F\nV ", r"expected a vector \(FV/DV\), got F\\nV")):
        p.write_bytes(data)
        _fails_naming(read_feature_transform, str(p), match=match, names=str(p))


def test_nnet_feature_reader_corrupt_ark_is_one_line_error(tmp_path):
    from pynnet.nnet.data import FeatureReader

    (tmp_path / "m.ark").write_bytes(b"u1  [ 1 2\n x y ]\n")   # kaldiio: a RuntimeError over two lines
    (tmp_path / "feats.scp").write_text(f"u1 {tmp_path}/m.ark:3\n")
    (tmp_path / "utt2spk").write_text("u1 s1\n")
    (tmp_path / "cmvn.scp").write_text(f"s1 {tmp_path}/m.ark:3\n")
    r = FeatureReader(str(tmp_path))
    _fails_naming(r.read, "u1", match="cannot read features of 'u1'", names=f"{tmp_path}/feats.scp:1:")
    r = FeatureReader(str(tmp_path), apply_cmvn=True)
    _fails_naming(r._speaker_mean, "u1", match="cannot read the CMVN stats", names=f"{tmp_path}/cmvn.scp:1:")
