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


def make_toy_corpus(root: str, *, num_utts: int = 40, num_spk: int = 4, num_phones: int = 4,
                    feat_dim: int = 6, frames: tuple[int, int] = (40, 80), seed: int = 0,
                    drop_ali: int = 0) -> tuple[str, str]:
    """Write the corpus; returns (data_dir, ali_dir). ``drop_ali`` utterances get no alignment."""
    import kaldi_hmm_gmm as khg
    import kaldiio

    from pynnet.hmm.ali_io import TransitionTables, write_alignments
    from pynnet.hmm.model_io import write_model
    from pynnet.io.tables import write_table

    rng = np.random.default_rng(seed)
    data, ali = os.path.join(root, "data"), os.path.join(root, "ali")
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
    feats, alis, utt2spk = {}, {}, {}
    for i in range(num_utts):
        s = i % num_spk
        spk = f"spk{s}"
        utt = f"{spk}-utt{i:04d}"
        T = int(rng.integers(frames[0], frames[1] + 1))
        tids = []
        while len(tids) < T:
            p = int(rng.integers(1, num_phones + 1))
            for st in range(3):
                dur = int(rng.integers(1, 5))
                tids += [loop_tid[(p, st)]] * (dur - 1) + [fwd_tid[(p, st)]]
        tids = np.asarray(tids[:T], dtype=np.int32)
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
    keep = sorted(alis)[drop_ali:]
    write_alignments(f"{ali}/ali.1.gz", {u: alis[u] for u in keep})
    am = khg.AmDiagGmm.__new__(khg.AmDiagGmm)
    state = []
    for p in range(num_pdfs):
        state += [np.ones(1, np.float32), np.ones((1, feat_dim), np.float32), means[p:p + 1].copy()]
    am.__setstate__(tuple(state))
    write_model(f"{ali}/final.mdl", tm, am)
    return data, ali
