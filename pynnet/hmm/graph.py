"""Decoding graphs: G.fst from an ARPA LM (utils/format_lm.sh) and HCLG.fst (utils/mkgraph.sh).

HCLG is built the way Kaldi's mkgraph.sh builds it:
  LG    = minimize_encoded(determinize_star(L_disambig o G))            (log semiring)
  CLG   = compose_context(disambig phones, N, P, LG) -> ilabel_info
  Ha    = get_h_transducer(ilabel_info, tree, model, transition_scale)   (+ disambig tids)
  HCLGa = minimize_encoded(rmepsilon(rmsymbols(determinize_star(Ha o CLG), disambig tids)))
  HCLG  = add_self_loops(HCLGa, self_loop_scale, reorder=true)
Everything is OpenFst binary (vector FSTs), readable by Kaldi's tools.
"""
from __future__ import annotations

import math
import os
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass

import numpy as np

from pynnet.io.atomic import apply_umask, atomic_path, atomic_write
from pynnet.io.errors import fail
from pynnet.hmm.lang import Lang, _read_lines
from pynnet.hmm.lm import iter_arpa


def _fst():
    import kaldi_hmm_gmm  # noqa: F401  (must come before kaldifst, or the import hangs)
    import kaldifst

    return kaldifst


def read_fst(path: str):
    kf = _fst()
    if not os.path.exists(path):
        fail("no such file", path)
    try:
        return kf.StdVectorFst.read(path)
    except Exception as e:  # OpenFst reports a bad header as a generic error
        fail(f"cannot read FST: {e}", path)


def write_fst(fst, path: str) -> None:
    with atomic_path(path) as tmp:
        fst.write(tmp)


def fst_arcs(fst):
    """Yield (state, ilabel, olabel, weight, nextstate) for every arc."""
    kf = _fst()
    for s in kf.StateIterator(fst):
        for a in kf.ArcIterator(fst, s):
            yield s, a.ilabel, a.olabel, a.weight.value, a.nextstate


def fst_num_arcs(fst) -> int:
    kf = _fst()
    return sum(fst.num_arcs(s) for s in kf.StateIterator(fst))


def stochasticity(fst) -> tuple[float, float]:
    """(min, max) over states of -log(sum of exp(-weight) over arcs and final), as Kaldi's
    fstisstochastic prints (0 0 for a stochastic FST)."""
    kf = _fst()
    lo, hi = math.inf, -math.inf
    for s in kf.StateIterator(fst):
        ws = [a.weight.value for a in kf.ArcIterator(fst, s)]
        f = fst.final(s).value
        if f != math.inf:
            ws.append(f)
        if not ws:
            continue
        m = min(ws)
        tot = m - math.log(sum(math.exp(m - w) for w in ws))
        lo, hi = min(lo, tot), max(hi, tot)
    return (lo, hi) if lo != math.inf else (0.0, 0.0)


def remove_input_symbols(fst, symbols: list[int], max_label: int):
    """``fst`` with the given input labels replaced by epsilon (Kaldi's fstrmsymbols), done as a
    composition with a one-state mapper over labels 1..max_label so that it runs in C++."""
    kf = _fst()
    if not symbols:
        return fst
    drop = set(symbols)
    mapper = kf.StdVectorFst()
    mapper.add_state()
    mapper.start = 0
    mapper.set_final(0, 0.0)
    for t in range(1, max_label + 1):
        mapper.add_arc(0, kf.StdArc(0 if t in drop else t, t, 0.0, 0))
    kf.arcsort(mapper, sort_type="olabel")
    return kf.StdVectorFst(kf.compose(mapper, fst))


def push_special(fst, delta: float = 1e-6, max_iter: int = 2000):
    """Kaldi's fstpushspecial: reweight so that every state's outgoing probability mass (arcs plus
    final weight) is the same, spreading an LM's non-stochasticity evenly so that beam pruning is
    not misled; the weight of every complete path is unchanged. Finds the leading eigenvector v of
    the transition matrix (final states looping back to the start) by power iteration, then sets
    w' = w + log v[src] - log v[dst] and final' = final + log v[s] - log v[start]."""
    kf = _fst()
    n = fst.num_states
    if n == 0:
        return fst
    src, dst, w, il, ol = [], [], [], [], []
    for s in range(n):
        for a in kf.ArcIterator(fst, s):
            src.append(s)
            dst.append(a.nextstate)
            w.append(a.weight.value)
            il.append(a.ilabel)
            ol.append(a.olabel)
    final = np.array([fst.final(s).value for s in range(n)], dtype=np.float64)
    start = fst.start
    src_a, dst_a = np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64)
    w_a = np.array(w, dtype=np.float64)
    fin = np.isfinite(final)
    # Matrix rows: arcs plus final-state -> start "loop"; probabilities relative to each row's best
    # would not keep the eigenvector, so scale all by one constant for range safety.
    shift = min(w_a.min() if len(w_a) else 0.0, final[fin].min() if fin.any() else 0.0)
    p_arc = np.exp(-(w_a - shift))
    p_fin = np.where(fin, np.exp(-(np.where(fin, final, 0.0) - shift)), 0.0)
    v = np.ones(n)
    for _ in range(max_iter):
        mv = np.bincount(src_a, weights=p_arc * v[dst_a], minlength=n) + p_fin * v[start]
        nv = mv + v  # eigenvector of M + I is M's; the identity removes periodicity
        nv /= nv.max()
        nv = np.maximum(nv, 1e-300)
        done = np.max(np.abs(np.log(nv) - np.log(v))) < delta
        v = nv
        if done:
            break
    logv = np.log(v)
    out = kf.StdVectorFst()
    for _ in range(n):
        out.add_state()
    out.start = start
    new_w = w_a + logv[src_a] - logv[dst_a]
    new_f = final + logv - logv[start]
    for k in range(len(src)):
        out.add_arc(src[k], kf.StdArc(il[k], ol[k], float(new_w[k]), dst[k]))
    for s in np.nonzero(fin)[0].tolist():
        out.set_final(s, float(new_f[s]))
    return out


def has_cycle(fst, labels: set[int]) -> bool:
    """Whether the FST has a cycle made only of arcs whose input label is in ``labels``."""
    kf = _fst()
    adj: dict[int, list[int]] = {}
    for s in kf.StateIterator(fst):
        nxt = [a.nextstate for a in kf.ArcIterator(fst, s) if a.ilabel in labels]
        if nxt:
            adj[s] = nxt
    color: dict[int, int] = {}
    for root in adj:
        if root in color:
            continue
        stack = [(root, iter(adj.get(root, ())))]
        color[root] = 1
        while stack:
            s, it = stack[-1]
            for t in it:
                c = color.get(t, 0)
                if c == 1:
                    return True
                if c == 0:
                    color[t] = 1
                    stack.append((t, iter(adj.get(t, ()))))
                    break
            else:
                color[s] = 2
                stack.pop()
    return False


# ----------------------------------------------------------------------------------------------
# G.fst (format_lm)
# ----------------------------------------------------------------------------------------------

def arpa_to_g(arpa: str, words_txt: str, out_fst: str, verbose: bool = True, words_name: str | None = None):
    """G.fst from an ARPA LM with kaldilm (Kaldi's arpa2fst): #0 on back-off arcs, <s>/</s> as
    epsilon, the lang's words.txt as symbol table, ilabel-sorted. Returns the FST. The ARPA is
    checked (and CRLF line ends dropped) before kaldilm reads it; ``words_name``: how messages
    name ``words_txt`` (the input lang dir's, when that is a staging copy)."""
    from pynnet.io.kaldi_libs import import_kaldilm
    kaldilm = import_kaldilm()

    if not os.path.exists(arpa):
        fail("no such file", arpa)
    words_name = words_name or words_txt
    words = {f[0] for _, f in _read_lines(words_txt) if f}
    with tempfile.TemporaryDirectory(dir=os.path.dirname(os.path.abspath(out_fst)) or ".") as td:
        src = os.path.join(td, "lm.arpa")
        # kaldilm's parser aborts the whole process (C++ abort, no file name, staging dirs left
        # behind) on malformed input: it reads a checked copy with '\n' line ends
        with open(src, "wb") as fo:
            unigrams = [f[1] for k, f, _, _ in iter_arpa(arpa, copy_to=fo, prog="format_lm") if k == 1]
        missing = [w for w in unigrams if w not in words]
        inside = len(unigrams) - len(missing)
        if inside <= 2:  # only <s> and </s>
            fail(f"none of the LM's words are in {words_name}: wrong lang dir?", arpa)
        if missing and verbose:
            print(f"format_lm: {len(missing)} of {len(unigrams)} LM words are not in {words_name} and are "
                  f"dropped with their n-grams (e.g. {' '.join(missing[:5])})", file=sys.stderr)
        tmp_fst = os.path.join(td, "G.fst")
        try:
            kaldilm.arpa2fst(input_arpa=src, output_fst=tmp_fst, disambig_symbol="#0",
                             read_symbol_table=words_txt, max_arpa_warnings=0 if not verbose else 30)
        except Exception as e:
            fail(f"arpa2fst failed: {e}", arpa)
        G = read_fst(tmp_fst)
        write_fst(G, out_fst)
    return G


def unigram_g(text_path: str, words_txt: str, oov_word: str | None, out_fst: str) -> tuple[int, int]:
    """G.fst of a unigram over the transcripts of a Kaldi ``text`` file (steps/nnet/make_denlats.sh's
    "sym2int.pl --map-oov | make_unigram_grammar.pl | fstcompile | fstarcsort"); words not in
    words.txt count as ``oov_word`` (None: the oov.txt next to words.txt).  Written atomically;
    returns (distinct words, sentences)."""
    from pynnet.hmm.lang import _read_oov_word, read_symbol_table
    from pynnet.hmm.lm import unigram_grammar_text

    kf = _fst()
    words, _ = read_symbol_table(words_txt)
    if oov_word is None:
        oov_word = _read_oov_word(os.path.dirname(words_txt) or ".", words)
    if oov_word not in words:
        fail(f"the OOV word '{oov_word}' is not in the word symbol table", words_txt)
    sentences = []
    for n, fields in _read_lines(text_path):
        sentences.append([str(words.get(w, words[oov_word])) for w in fields[1:]])
    if not sentences:
        fail("no transcripts", text_path)
    G = kf.compile(unigram_grammar_text(sentences))
    kf.arcsort(G, sort_type="ilabel")
    write_fst(G, out_fst)
    return len({w for s in sentences for w in s}), len(sentences)


def _remove_dead_stages(parent: str, base: str) -> None:
    """Staging dirs ``.<base>.<pid>.*`` and ``<base>.old.<pid>`` of format_lm runs that were killed
    (their process is gone): a kill -9 leaves them behind, nothing else removes them."""
    pat = re.compile(rf"(?:\.{re.escape(base)}\.|{re.escape(base)}\.old\.)(\d+)(?:\..*)?")
    for name in os.listdir(parent):
        m = pat.fullmatch(name)
        if not m or int(m.group(1)) == os.getpid():
            continue
        try:
            os.kill(int(m.group(1)), 0)
            continue   # its process runs (or is another user's): leave it
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        shutil.rmtree(os.path.join(parent, name), ignore_errors=True)


def format_lm(lang_dir: str, arpa: str, lexicon: str | None, out_dir: str, verbose: bool = True) -> None:
    """utils/format_lm.sh: copy the lang dir to ``out_dir`` and add G.fst built from ``arpa``.
    Fails if G has a cycle of empty words (#0 back-off arcs and words with empty pronunciations in
    ``lexicon``), which would make LG non-determinizable. Nothing is left half-written."""
    lang = Lang.load(lang_dir)
    empty = {lang.words["#0"]}
    if lexicon:
        # Kaldi passes the lexicon file; a dict dir (its lexicon.txt / lexiconp.txt) is accepted too.
        if os.path.isdir(lexicon):
            cand = [os.path.join(lexicon, n) for n in ("lexiconp.txt", "lexicon.txt")]
            found = [c for c in cand if os.path.exists(c)]
            if not found:
                fail("no lexicon.txt or lexiconp.txt", lexicon)
            lexicon = found[0]
        has_probs = os.path.basename(lexicon) == "lexiconp.txt"
        for n, fields in _read_lines(lexicon):
            if len(fields) == (2 if has_probs else 1) and fields[0] in lang.words:
                empty.add(lang.words[fields[0]])
    parent = os.path.dirname(os.path.abspath(out_dir))
    os.makedirs(parent, exist_ok=True)
    base = os.path.basename(os.path.abspath(out_dir))
    _remove_dead_stages(parent, base)
    stage = tempfile.mkdtemp(dir=parent, prefix=f".{base}.{os.getpid()}.")
    try:
        shutil.rmtree(stage)
        shutil.copytree(lang_dir, stage, ignore=shutil.ignore_patterns("G.fst", ".*.tmp"))
        apply_umask(stage)  # copytree gave it lang_dir's mode (0700 if an old pynnet staged it)
        G = arpa_to_g(arpa, os.path.join(stage, "words.txt"), os.path.join(stage, "G.fst"), verbose,
                      words_name=os.path.join(lang_dir, "words.txt"))
        if verbose and G.num_states < 200000:  # informational, as Kaldi's; Python-speed
            lo, hi = stochasticity(G)
            print(f"format_lm: G.fst has {G.num_states} states, {fst_num_arcs(G)} arcs; "
                  f"fstisstochastic: {lo:.6g} {hi:.6g}", file=sys.stderr)
        if has_cycle(G, empty):
            fail("language model has cycles with empty words (#0 or words with empty pronunciations)", arpa)
        if os.path.isdir(out_dir):
            old = out_dir.rstrip("/") + ".old." + str(os.getpid())
            os.rename(out_dir, old)
            os.rename(stage, out_dir)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(stage, out_dir)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise


# ----------------------------------------------------------------------------------------------
# HCLG (mkgraph)
# ----------------------------------------------------------------------------------------------

@dataclass
class GraphInfo:
    lg_states: int
    clg_states: int
    hclga_states: int
    hclg_states: int
    hclg_arcs: int
    seconds: float
    cpu_seconds: float


def remove_word(G, word: int, num_words: int):
    """G without the arcs that carry ``word`` (Kaldi's fstrmsymbols --remove-arcs=true
    --apply-to-output=true), as a composition with a one-state filter so that it runs in C++."""
    kf = _fst()
    filt = kf.StdVectorFst()
    filt.add_state()
    filt.start = 0
    filt.set_final(0, 0.0)
    for w in range(1, num_words):
        if w != word:
            filt.add_arc(0, kf.StdArc(w, w, 0.0, 0))
    out = kf.StdVectorFst(kf.compose(G, filt))
    kf.arcsort(out, sort_type="ilabel")
    return out


def make_hclg(lang_test_dir: str, ctx_dep, trans_model, graph_dir: str, *, self_loop_scale: float = 0.1,
              transition_scale: float = 1.0, remove_oov: bool = False, verbose: bool = True) -> GraphInfo:
    """Build graph_dir/HCLG.fst from lang_test_dir (with G.fst), a tree (``ContextDependency``) and a
    ``TransitionModel``; also writes words.txt, phones.txt, phones/, disambig_tid.int, num_pdfs.
    ``remove_oov``: drop the OOV word's arcs from G first (mkgraph.sh --remove-oov)."""
    import kaldi_hmm_gmm as khg
    kf = _fst()

    t0, c0 = time.time(), time.process_time()
    lang = Lang.load(lang_test_dir)
    g_path = os.path.join(lang_test_dir, "G.fst")
    if not os.path.exists(g_path):
        fail("no G.fst: run utils/format_lm.sh to make a lang test dir", lang_test_dir)
    real = set(lang.real_phones)
    bad = [p for p in trans_model.phones if p not in real]
    if bad:
        fail(f"the model's phones {bad[:5]} are not phones of this lang dir (phones.txt mismatch?)",
             lang_test_dir)
    N, P = ctx_dep.context_width, ctx_dep.central_position

    def log(msg: str) -> None:
        if verbose:
            print(f"mkgraph: [{time.time() - t0:6.2f}s] {msg}", file=sys.stderr)

    L = lang.L_disambig_fst()
    G = read_fst(g_path)
    kf.arcsort(G, sort_type="ilabel")
    if remove_oov:
        G = remove_word(G, lang.oov_id, len(lang.word_names))
        log(f"removed the OOV word {lang.oov_word} from G")
    LG = kf.StdVectorFst(kf.compose(L, G))
    log(f"L o G: {LG.num_states} states")
    kf.determinize_star(LG, use_log=True)
    kf.minimize_encoded(LG)
    LG = push_special(LG)
    log(f"LG determinized, minimized, pushed: {LG.num_states} states")

    CLG, ilabels = kf.compose_context(lang.disambig_phones, N, P, LG)
    kf.arcsort(CLG, sort_type="ilabel")
    log(f"CLG (N={N} P={P}): {CLG.num_states} states, {len(ilabels)} ilabels")

    Ha, disambig_tids = khg.get_h_transducer(ilabels, ctx_dep, trans_model,
                                            khg.HTransducerConfig(transition_scale=transition_scale))
    kf.arcsort(Ha, sort_type="olabel")
    HCLGa = kf.StdVectorFst(kf.compose(Ha, CLG))
    log(f"Ha o CLG: {HCLGa.num_states} states ({len(disambig_tids)} disambiguation tids)")
    kf.determinize_star(HCLGa, use_log=True)
    # Disambiguation tids are numbered after the real ones (Kaldi's make-h-transducer).
    HCLGa = remove_input_symbols(HCLGa, disambig_tids, max(disambig_tids, default=0))
    kf.rmepsilon(HCLGa)
    kf.minimize_encoded(HCLGa)
    log(f"HCLGa: {HCLGa.num_states} states")
    HCLG = khg.add_self_loops(self_loop_scale=self_loop_scale, disambig_syms=[], reorder=True,
                              trans_model=trans_model, ifst=HCLGa)
    narcs = fst_num_arcs(HCLG)
    log(f"HCLG: {HCLG.num_states} states, {narcs} arcs")
    if HCLG.num_states == 0:
        fail("HCLG is empty: G accepts nothing the lexicon can spell?", lang_test_dir)

    os.makedirs(os.path.join(graph_dir, "phones"), exist_ok=True)
    for name in ("words.txt", "phones.txt"):
        _copy(os.path.join(lang_test_dir, name), os.path.join(graph_dir, name))
    src_ph = os.path.join(lang_test_dir, "phones")
    for name in sorted(os.listdir(src_ph)):
        stem = name.split(".")[0]
        if stem in ("word_boundary", "align_lexicon", "optional_silence", "disambig") or name == "silence.csl":
            _copy(os.path.join(src_ph, name), os.path.join(graph_dir, "phones", name))
    with atomic_write(os.path.join(graph_dir, "disambig_tid.int")) as f:
        f.write("".join(f"{t}\n" for t in disambig_tids))
    with atomic_write(os.path.join(graph_dir, "num_pdfs")) as f:
        f.write(f"{trans_model.num_pdfs}\n")
    write_fst(HCLG, os.path.join(graph_dir, "HCLG.fst"))
    secs = time.time() - t0
    log(f"wrote {graph_dir}/HCLG.fst")
    return GraphInfo(LG.num_states, CLG.num_states, HCLGa.num_states, HCLG.num_states, narcs, secs,
                     time.process_time() - c0)


def _copy(src: str, dst: str) -> None:
    with atomic_path(dst) as tmp:
        shutil.copyfile(src, tmp)
