"""format_lm (utils/format_lm.sh, pynnet-format-lm) on faulty ARPA files: CRLF line ends give the
same G.fst as LF ones; malformed or truncated ARPA files (plain or gzipped) give one
``ERROR (pynnet-format-lm): <arpa>:<line>: <what>`` line and exit 1, with no staging dir left
behind (kaldilm's parser would abort the process in C++); the OOV warning names the input lang
dir's words.txt, not the staging copy. Uses a finished recipe's data when there is one, else a
small lang dir and trigram made here."""
from __future__ import annotations

import gzip
import os
import random
import re
import shutil
import subprocess
import sys

import pytest

from pynnet.bin.lang import format_lm_main
from pynnet.hmm.lang import prepare_lang
from pynnet.hmm.lm import train_lm

from test_lang import make_dict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """(lang dir, dict dir, LF ARPA path, gzipped ARPA path) in a fresh dir."""
    t = tmp_path_factory.mktemp("flm")
    # built here (tests read nothing outside the checkout and their temp dirs)
    rnd = random.Random(1)
    phones = [f"p{i}" for i in range(12)]
    words = [f"w{i}" for i in range(80)]
    lex = "<unk> SPN\n" + "".join(
        f"{w} {' '.join(rnd.choice(phones) for _ in range(rnd.randint(2, 5)))}\n" for w in words)
    d = make_dict(t / "dict", lexicon=lex, nonsil="\n".join(phones) + "\n")
    prepare_lang(d, "<unk>", str(t / "tmp"), str(t / "lang"))
    lang = str(t / "lang")
    sents = [rnd.choices(words, k=rnd.randint(3, 10)) for _ in range(600)]
    train_lm(sents, 3, vocab=words, unk="<unk>", verbose=False).write_arpa(str(t / "lm.arpa.gz"))
    with gzip.open(t / "lm.arpa.gz", "rb") as fi, open(t / "lm.arpa", "wb") as fo:
        shutil.copyfileobj(fi, fo)
    return lang, d, str(t / "lm.arpa"), str(t / "lm.arpa.gz")


def _run_cli(lang, arpa, d, out):
    """pynnet-format-lm in a subprocess (kaldilm could abort the process)."""
    exe = os.path.join(os.path.dirname(sys.executable), "pynnet-format-lm")
    if not os.path.exists(exe):
        exe = shutil.which("pynnet-format-lm") or pytest.skip("pynnet-format-lm is not installed")
    return subprocess.run([exe, lang, arpa, d, out], capture_output=True, text=True, timeout=300)


def _staging_left(out) -> list[str]:
    parent, base = os.path.split(os.path.abspath(out))
    return [n for n in os.listdir(parent) if n.startswith("." + base + ".")]


def test_crlf_arpa_gives_same_G_as_lf(data, tmp_path):
    lang, d, arpa, _ = data
    crlf = tmp_path / "crlf.arpa"
    with open(arpa, "rb") as f:
        crlf.write_bytes(f.read().replace(b"\n", b"\r\n"))
    script = os.path.join(ROOT, "utils", "format_lm.sh")
    r_lf = subprocess.run([script, lang, arpa, d, str(tmp_path / "lf")], capture_output=True, text=True)
    r_cr = subprocess.run([script, lang, str(crlf), d, str(tmp_path / "cr")], capture_output=True, text=True)
    assert r_lf.returncode == 0, r_lf.stderr
    assert r_cr.returncode == 0, r_cr.stderr
    assert "not in symbol table" not in r_cr.stderr
    assert (tmp_path / "cr" / "G.fst").read_bytes() == (tmp_path / "lf" / "G.fst").read_bytes()


def _lines(arpa: str) -> list[str]:
    with open(arpa, encoding="utf-8") as f:
        return f.read().split("\n")


def _truncated_mid_line(lines):
    text = "\n".join(lines)
    cut = len(text) // 2
    while text[cut - 1] in "\n\t ":  # cut inside a field
        cut += 1
    return text[:cut]


def _bad_data_line(lines):
    i = next(i for i, s in enumerate(lines) if s.startswith("ngram 2="))
    return "\n".join(lines[:i] + [lines[i].replace("=", " ")] + lines[i + 1:])


def _no_end(lines):
    return "\n".join(s for s in lines if s.strip() != "\\end\\")


def _non_numeric(lines):
    i = next(i for i, s in enumerate(lines) if s.strip() == "\\2-grams:") + 3
    f = lines[i].split("\t")
    return "\n".join(lines[:i] + ["\t".join(["-1.2x"] + f[1:])] + lines[i + 1:])


def _bad_backoff(lines):
    i = next(i for i, s in enumerate(lines) if s.strip() == "\\1-grams:") + 5
    f = lines[i].split("\t")
    return "\n".join(lines[:i] + ["\t".join(f[:2] + ["nan"])] + lines[i + 1:])


def _no_bos(lines):
    out = [s for s in lines if not re.match(r"^\S+\t<s>(\t\S+)?$", s)]
    n1 = sum(1 for s in lines if re.match(r"^\S+\t<s>(\t\S+)?$", s))
    assert n1 == 1
    return "\n".join(re.sub(r"^ngram 1=(\d+)$", lambda m: f"ngram 1={int(m.group(1)) - 1}", s) for s in out)


def _count_mismatch(lines):   # more trigrams than the header announces
    return "\n".join(re.sub(r"^ngram 3=(\d+)$", lambda m: f"ngram 3={int(m.group(1)) - 7}", s) for s in lines)


@pytest.mark.parametrize("make, what", [
    (_truncated_mid_line, r"missing \\end\\|expected log10-prob"),
    (_bad_data_line, r"expected 'ngram N=count'"),
    (_no_end, r"missing \\end\\"),
    (_non_numeric, r"bad number '-1\.2x'"),
    (_bad_backoff, r"bad number 'nan'"),
    (_no_bos, r"no unigram <s>"),
    (_count_mismatch, r"ngram 3=\d+ but"),
])
def test_malformed_arpa_is_one_line_error(data, tmp_path, make, what):
    lang, d, arpa, _ = data
    bad = tmp_path / "bad.arpa"
    bad.write_text(make(_lines(arpa)), encoding="utf-8")
    out = tmp_path / "lt"
    r = _run_cli(lang, str(bad), d, str(out))
    assert r.returncode == 1, r.stderr[-2000:]
    err = r.stderr.strip().splitlines()
    assert len(err) == 1, r.stderr[-2000:]
    assert re.match(rf"^ERROR \(pynnet-format-lm\): {re.escape(str(bad))}:\d+: ", err[0]), err[0]
    assert re.search(what, err[0]), err[0]
    assert not out.exists() and not _staging_left(out)


def test_truncated_gzip_is_one_line_error(data, tmp_path):
    lang, d, _, gz = data
    with open(gz, "rb") as f:
        blob = f.read()
    t = tmp_path / "t.arpa.gz"
    t.write_bytes(blob[:len(blob) // 2])
    out = tmp_path / "lt"
    r = _run_cli(lang, str(t), d, str(out))
    assert r.returncode == 1
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert err[0].startswith(f"ERROR (pynnet-format-lm): {t}:"), err[0]
    assert "truncated" in err[0]
    assert not out.exists() and not _staging_left(out)


def test_oov_warning_names_the_input_words_txt(data, tmp_path, capsys):
    lang, d, arpa, _ = data
    lines = _lines(arpa)
    i = next(i for i, s in enumerate(lines) if s.strip() == "\\1-grams:") + 1
    extra = [f"-3.5\tzzoov{j}" for j in range(3)]
    lines = lines[:i] + extra + lines[i:]
    lines = [re.sub(r"^ngram 1=(\d+)$", lambda m: f"ngram 1={int(m.group(1)) + 3}", s) for s in lines]
    oov = tmp_path / "oov.arpa"
    oov.write_text("\n".join(lines), encoding="utf-8")
    out = tmp_path / "lt"
    assert format_lm_main([lang, str(oov), d, str(out)]) == 0
    err = capsys.readouterr().err
    msg = [s for s in err.splitlines() if "LM words are not in" in s]
    assert len(msg) == 1, err
    assert f"not in {os.path.join(lang, 'words.txt')} and are dropped" in msg[0]
    assert "zzoov0" in msg[0]
    assert os.path.exists(out / "G.fst") and not _staging_left(out)


def test_fewer_ngrams_than_the_header_says_is_a_warning(data, tmp_path):
    # as Kaldi's arpa2fst: a pruned LM that kept its old header still builds G.fst
    lang, d, arpa, _ = data
    bad = tmp_path / "fewer.arpa"
    bad.write_text("\n".join(re.sub(r"^ngram 3=(\d+)$", lambda m: f"ngram 3={int(m.group(1)) + 7}", s)
                             for s in _lines(arpa)), encoding="utf-8")
    r = _run_cli(lang, str(bad), d, str(tmp_path / "lt"))
    assert r.returncode == 0, r.stderr
    assert "WARNING (format_lm): " in r.stderr and "but the \\3-grams: section has" in r.stderr
    assert (tmp_path / "lt" / "G.fst").exists()


def test_stages_of_killed_runs_are_removed_by_the_next(data, tmp_path):
    """kill -9 of format_lm leaves its staging dir (.lang_test.<pid>.xxxx) and, mid-install, the old
    dir (lang_test.old.<pid>); the next run removes those whose process is gone, not a live one's."""
    lang, d, arpa, _ = data
    out = tmp_path / "lt"
    dead = subprocess.Popen(["true"])
    dead.wait()   # a pid that no longer runs
    stale = [tmp_path / f".lt.{dead.pid}.abc123", tmp_path / f"lt.old.{dead.pid}"]
    live = tmp_path / f".lt.{os.getppid()}.live99"   # (the test runner's parent: alive)
    for p in (*stale, live):
        p.mkdir()
        (p / "G.fst").write_text("half written")
    r = _run_cli(lang, arpa, d, str(out))
    assert r.returncode == 0, r.stderr
    assert (out / "G.fst").exists()
    assert not any(p.exists() for p in stale) and live.exists()
