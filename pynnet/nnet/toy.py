"""A small, learnable corpus in Kaldi formats for tests and benchmarks of the DNN stages.

``make_toy_corpus(root)`` writes ``root/data`` (feats.scp/ark, utt2spk, spk2utt, cmvn.scp,
utt2num_frames) and ``root/ali`` (final.mdl: a monophone 3-state TransitionModel + single-Gaussian
AmDiagGmm in Kaldi binary format, ali.1.gz: transition-id alignments). Each frame's features are
drawn around a mean of its pdf, plus a per-speaker offset (which per-speaker CMVN removes), so a
DNN can learn the pdfs from spliced frames.
"""
from __future__ import annotations

import os

import numpy as np

_TOPO = """<Topology>
<TopologyEntry>
<ForPhones> {phones} </ForPhones>
<State> 0 <PdfClass> 0 <Transition> 0 0.75 <Transition> 1 0.25 </State>
<State> 1 <PdfClass> 1 <Transition> 1 0.75 <Transition> 2 0.25 </State>
<State> 2 <PdfClass> 2 <Transition> 2 0.75 <Transition> 3 0.25 </State>
<State> 3 </State>
</TopologyEntry>
</Topology>"""


def toy_transition_model(num_phones: int):
    import kaldi_hmm_gmm as khg

    phones = list(range(1, num_phones + 1))
    topo = khg.HmmTopology()
    topo.read(_TOPO.format(phones=" ".join(map(str, phones))))
    ctx = khg.monophone_context_dependency(phones, [0] + [3] * num_phones)
    return khg.TransitionModel(ctx, topo)


def toy_lexicon(num_words: int, num_phones: int) -> dict[int, list[int]]:
    """Word w (1-based) -> two distinct phones; every word differs from the others."""
    pairs = [(a, b) for a in range(1, num_phones + 1) for b in range(1, num_phones + 1) if a != b]
    if num_words > len(pairs):
        raise ValueError("too many words for the phones")
    return {w + 1: list(pairs[w]) for w in range(num_words)}


def make_toy_corpus(root: str, *, num_utts: int = 40, num_spk: int = 4, num_phones: int = 4,
                    feat_dim: int = 6, frames: tuple[int, int] = (40, 80), seed: int = 0,
                    drop_ali: int = 0, num_words: int = 0, utt_seed: int | None = None,
                    name: str = "data", spk_prefix: str = "") -> tuple[str, str]:
    """Write the corpus; returns (data_dir, ali_dir). ``drop_ali`` utterances get no alignment.
    With ``num_words`` the utterances are word sequences (``toy_lexicon``) and ``text`` is
    written; ``utt_seed`` draws other utterances (a test set) with the same acoustics;
    ``spk_prefix`` starts the speaker (and utterance) ids."""
    import kaldi_hmm_gmm as khg
    import kaldiio

    from pynnet.hmm.ali_io import TransitionTables, write_alignments
    from pynnet.hmm.model_io import write_model
    from pynnet.io.tables import write_table

    rng = np.random.default_rng(seed)
    data, ali = os.path.join(root, name), os.path.join(root, "ali" if name == "data" else f"ali_{name}")
    os.makedirs(data, exist_ok=True)
    os.makedirs(ali, exist_ok=True)
    tm = toy_transition_model(num_phones)
    tab = TransitionTables.from_model(tm)
    num_pdfs = tm.num_pdfs
    # tids of each (phone, hmm state): self-loop and forward transition
    loop_tid, fwd_tid = {}, {}
    for tid in range(1, len(tab.pdf)):
        key = (int(tab.phone[tid]), int(tab.hmm_state[tid]))
        (loop_tid if tab.self_loop[tid] else fwd_tid)[key] = tid
    means = rng.normal(0, 1.5, (num_pdfs, feat_dim)).astype(np.float32)
    spk_offset = rng.normal(0, 2.0, (num_spk, feat_dim)).astype(np.float32)
    if utt_seed is not None:
        rng = np.random.default_rng(utt_seed)
    lexicon = toy_lexicon(num_words, num_phones) if num_words else {}
    feats, alis, utt2spk, text = {}, {}, {}, {}
    for i in range(num_utts):
        s = i % num_spk
        spk = f"{spk_prefix}spk{s}"
        utt = f"{spk}-utt{i:04d}"
        T = int(rng.integers(frames[0], frames[1] + 1))
        tids, words = [], []
        while len(tids) < T:
            if lexicon:
                w = int(rng.integers(1, num_words + 1))
                words.append(w)
                phones = lexicon[w]
            else:
                phones = [int(rng.integers(1, num_phones + 1))]
            for p in phones:
                for st in range(3):
                    dur = int(rng.integers(1, 5))
                    tids += [loop_tid[(p, st)]] * (dur - 1) + [fwd_tid[(p, st)]]
        if not lexicon:
            tids = tids[:T]
        else:
            text[utt] = " ".join(f"w{w}" for w in words)
        tids = np.asarray(tids, dtype=np.int32)
        T = len(tids)
        pdfs = tab.pdf[tids]
        feats[utt] = means[pdfs] + spk_offset[s] + rng.normal(0, 0.7, (T, feat_dim)).astype(np.float32)
        alis[utt] = tids
        utt2spk[utt] = spk
    with kaldiio.WriteHelper(f"ark,scp:{data}/feats.ark,{data}/feats.scp") as w:
        for utt in sorted(feats):
            w(utt, feats[utt])
    stats = {}
    for utt, m in feats.items():
        st = stats.setdefault(utt2spk[utt], np.zeros((2, feat_dim + 1)))
        st[0, :-1] += m.sum(0)
        st[0, -1] += len(m)
        st[1, :-1] += (m.astype(np.float64) ** 2).sum(0)
    with kaldiio.WriteHelper(f"ark,scp:{data}/cmvn.ark,{data}/cmvn.scp") as w:
        for spk in sorted(stats):
            w(spk, stats[spk])
    write_table(f"{data}/utt2spk", utt2spk)
    spk2utt: dict[str, list[str]] = {}
    for u in sorted(utt2spk):
        spk2utt.setdefault(utt2spk[u], []).append(u)
    write_table(f"{data}/spk2utt", {k: " ".join(v) for k, v in spk2utt.items()})
    write_table(f"{data}/utt2num_frames", {u: str(len(m)) for u, m in feats.items()})
    if text:
        write_table(f"{data}/text", text)
    keep = sorted(alis)[drop_ali:]
    write_alignments(f"{ali}/ali.1.gz", {u: alis[u] for u in keep})
    am = khg.AmDiagGmm.__new__(khg.AmDiagGmm)
    state = []
    for p in range(num_pdfs):
        state += [np.ones(1, np.float32), np.ones((1, feat_dim), np.float32), means[p:p + 1].copy()]
    am.__setstate__(tuple(state))
    write_model(f"{ali}/final.mdl", tm, am)
    return data, ali


def make_toy_graph(graph_dir: str, num_words: int, num_phones: int = 4) -> str:
    """A word-loop HCLG.fst (any word, cost 1 each) over ``toy_lexicon`` and words.txt, built with
    kaldi-hmm-gmm's training-graph compiler for the toy TransitionModel."""
    import kaldi_hmm_gmm as khg  # noqa: I001 (before kaldifst)
    import kaldifst

    from pynnet.io.tables import write_table

    os.makedirs(graph_dir, exist_ok=True)
    tm = toy_transition_model(num_phones)
    phones = list(range(1, num_phones + 1))
    ctx = khg.monophone_context_dependency(phones, [0] + [3] * num_phones)
    lexicon = toy_lexicon(num_words, num_phones)
    lines, n = [], 1
    for w, ph in lexicon.items():   # L with a loop through state 0
        prev = 0
        for i, p in enumerate(ph):
            nxt = 0 if i == len(ph) - 1 else n
            n += 1 if nxt else 0
            lines.append(f"{prev} {nxt} {p} {w if i == 0 else 0}")
            prev = nxt
    lines.append("0")
    lex = kaldifst.compile(s="\n".join(lines) + "\n", acceptor=False)
    gc = khg.TrainingGraphCompiler(tm, ctx, lex, [], khg.TrainingGraphCompilerOptions())
    arcs, base = [], 1
    for w in lexicon:
        wg = gc.compile_graph_from_text([w])
        finals = []
        for ln in wg.to_str().strip().split("\n"):
            f = ln.split()
            if len(f) >= 4:
                arcs.append(f"{int(f[0]) + base} {int(f[1]) + base} {f[2]} {f[3]} {f[4] if len(f) > 4 else 0}")
            else:
                finals.append((int(f[0]) + base, float(f[1]) if len(f) > 1 else 0.0))
        arcs.append(f"0 {wg.start + base} 0 0 1.0")
        arcs += [f"{s} 0 0 0 {c}" for s, c in finals]
        base += wg.num_states
    arcs.append("0 0")
    arcs.sort(key=lambda ln: ln.split()[0] != "0")   # the first line's state is the start state
    fst = kaldifst.compile(s="\n".join(arcs) + "\n", acceptor=False)
    path = os.path.join(graph_dir, "HCLG.fst")
    fst.write(path)
    words = {"<eps>": "0", **{f"w{w}": str(w) for w in lexicon}, "#0": str(num_words + 1)}
    write_table(os.path.join(graph_dir, "words.txt"), list(words.items()), sort=False)
    return path
