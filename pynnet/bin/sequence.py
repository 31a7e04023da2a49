"""pynnet-nnet-train-sequential: one pass of sequence-discriminative DNN training (Kaldi nnet1's
nnet-train-mpe-sequential / nnet-train-mmi-sequential; steps/nnet/train_mpe.sh runs one per
iteration)."""
from __future__ import annotations

import glob
import json
import os
import re
import sys

from pynnet.bin._cli import cli
from pynnet.bin._opts import float_opt, int_opt, kaldi_bool, log, parser
from pynnet.bin.nnet import _check_device, _device_from_use_gpu
from pynnet.io.errors import fail
from pynnet.io.progress import progress_kwargs


def lattice_files(denlat_dir: str) -> list[str]:
    """<denlat-dir>/lat.1.gz ... lat.N.gz (N from num_jobs, all of them present)."""
    nj_file = os.path.join(denlat_dir, "num_jobs")
    if os.path.isfile(nj_file):
        with open(nj_file) as f:
            nj_text = f.read().strip()
        if not re.fullmatch(r"[1-9][0-9]*", nj_text, re.ASCII):
            fail(f"expected a positive integer, got '{nj_text}'", nj_file)
        files = [os.path.join(denlat_dir, f"lat.{n}.gz") for n in range(1, int(nj_text) + 1)]
        for f in files:
            if not os.path.isfile(f):
                fail("no such file (make_denlats.sh did not finish?)", f)
        return files
    files = sorted(glob.glob(os.path.join(denlat_dir, "lat.*.gz")),
                   key=lambda p: int(m.group(1)) if (m := re.search(r"lat\.(\d+)\.gz$", p)) else 0)
    if not files:
        fail("no lat.*.gz (run steps/nnet/make_denlats.sh)", denlat_dir)
    return files


def _write_history(path: str, entry: dict) -> list[dict]:
    """Add (or replace) this iteration's entry in the JSON history; a PNG curve next to it."""
    from pynnet.io.atomic import atomic_write
    hist: list[dict] = []
    if os.path.isfile(path):
        try:
            with open(path) as f:
                hist = json.load(f)
        except (OSError, ValueError):
            fail("not a training history (JSON list)", path)
        if not isinstance(hist, list):
            fail("not a training history (JSON list)", path)
    hist = [h for h in hist if h.get("iter") != entry["iter"]] + [entry]
    hist.sort(key=lambda h: h["iter"])
    with atomic_write(path) as f:
        json.dump(hist, f, indent=1)
        f.write("\n")
    _plot(hist, os.path.splitext(path)[0] + ".png")
    return hist


def _plot(hist: list[dict], path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from pynnet.io.atomic import atomic_path
    fig, ax = plt.subplots(figsize=(5, 4))
    ax.plot([h["iter"] for h in hist], [100 * h["objective_per_frame"] for h in hist], "o-")
    crit = hist[-1]["criterion"]
    ax.set_xlabel("iteration"), ax.grid(alpha=.3)
    ax.set_ylabel("expected frame accuracy (%)" if crit != "mmi" else "MMI objective per frame (x100)")
    ax.set_title(f"{crit} training")
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=80)
    plt.close(fig)


@cli
def train_sequential_main(argv: list[str] | None = None) -> int:
    p = parser("pynnet-nnet-train-sequential",
               "One pass of sequence-discriminative training (sMBR, MPFE or MMI) with per-utterance SGD "
               "over denominator lattices and numerator alignments (Kaldi nnet1's nnet-train-mpe-sequential "
               "and nnet-train-mmi-sequential).",
               usage="%(prog)s [options] <model-in> <trans-model> <data-dir> <denlat-dir> <ali-dir> <model-out>\n"
                     "  e.g. %(prog)s --criterion smbr --learn-rate 1e-5 exp/dnn_smbr/0.nnet exp/dnn_smbr/final.mdl "
                     "data/train exp/dnn_denlats exp/dnn_ali exp/dnn_smbr/1.nnet")
    p.add_argument("--criterion", default="smbr", choices=["smbr", "mpfe", "mmi"],
                   help="smbr: state-level MBR (Kaldi's --do-smbr=true); mpfe: phone-level (MPE, --do-smbr=false); mmi")
    p.add_argument("--do-smbr", type=kaldi_bool, default=None, help="Kaldi's form: true = smbr, false = mpfe")
    p.add_argument("--acoustic-scale", type=float_opt, default=0.1)
    p.add_argument("--lm-scale", type=float_opt, default=1.0)
    p.add_argument("--learn-rate", type=float_opt, default=1e-5)
    p.add_argument("--momentum", type=float_opt, default=0.0)
    p.add_argument("--one-silence-class", type=kaldi_bool, default=True,
                   help="sMBR/MPFE: all silence phones are one class (false: silence frames always count as wrong)")
    p.add_argument("--silence-phones", default="", help="colon-separated silence phone ids (phones/silence.csl)")
    p.add_argument("--drop-frames", type=kaldi_bool, default=True,
                   help="MMI: drop frames whose reference pdf has no denominator posterior")
    p.add_argument("--seed", type=int_opt, default=777, help="seed of the utterance order")
    p.add_argument("--shuffle-buffer", type=int_opt, default=256, help="utterances in the shuffling buffer")
    p.add_argument("--iter", type=int_opt, default=1, help="iteration number (for the history)")
    p.add_argument("--history", default="", help="JSON training history to add this pass to (a PNG curve "
                   "is written next to it)")
    p.add_argument("--device", default="")
    p.add_argument("--use-gpu", default="", choices=["yes", "no", "optional", "wait"])
    p.add_argument("model_in")
    p.add_argument("trans_model")
    p.add_argument("data_dir")
    p.add_argument("denlat_dir")
    p.add_argument("ali_dir")
    p.add_argument("model_out")
    a = p.parse_args(argv)
    device = _device_from_use_gpu(a.device, a.use_gpu)
    _check_device(device)
    import torch
    from tqdm import tqdm

    from pynnet.decode.sequence_train import SequenceConfig, train_pass
    from pynnet.hmm.ali_io import TransitionTables, read_alignments
    from pynnet.hmm.model_io import read_transition_model
    from pynnet.nnet.data import FeatureReader
    from pynnet.nnet.model import load_model, save_model
    from pynnet.nnet.train import seed_everything, set_threads

    criterion = a.criterion if a.do_smbr is None else ("smbr" if a.do_smbr else "mpfe")
    try:
        sil = tuple(int(x) for x in a.silence_phones.split(":") if x)
    except ValueError:
        fail(f"--silence-phones: expected colon-separated integers, got '{a.silence_phones}'")
    cfg = SequenceConfig(criterion, a.acoustic_scale, a.lm_scale, a.learn_rate, a.momentum, a.one_silence_class,
                         sil, a.drop_frames, a.seed, a.shuffle_buffer)
    cfg.check()
    set_threads()
    seed_everything(a.seed)
    model = load_model(a.model_in)
    tables = TransitionTables.from_model(read_transition_model(a.trans_model))
    pipe = model.input_pipeline
    feats = FeatureReader(a.data_dir, apply_cmvn=bool(pipe.get("apply_cmvn")), delta_order=pipe.get("delta_order", 0))
    alignments = read_alignments(a.ali_dir)
    lats = lattice_files(a.denlat_dir)
    bar = tqdm(total=len(feats.scp), desc=f"{criterion} pass {a.iter}", unit="utt", **progress_kwargs())

    def progress(st) -> None:
        bar.update()
        bar.set_postfix_str(f"acc/frame {st.objective / max(st.frames, 1):.4f}", refresh=False)

    with bar:
        st = train_pass(model, feats, alignments, lats, tables, cfg, torch.device(device), progress)
    if st.no_alignment:
        print(f"WARNING: {len(st.no_alignment)} utterances of the lattices have no alignment: "
              f"{' '.join(st.no_alignment[:10])}{' ...' if len(st.no_alignment) > 10 else ''}", file=sys.stderr)
    if st.skipped:
        print(f"WARNING: {len(st.skipped)} utterances skipped (see the warnings above): "
              f"{' '.join(st.skipped[:10])}{' ...' if len(st.skipped) > 10 else ''}", file=sys.stderr)
    if st.utterances == 0:
        fail(f"no utterance trained (lattices in {a.denlat_dir}, alignments in {a.ali_dir})")
    log(st.summary(criterion))
    model.cpu()
    save_model(a.model_out, model)
    if a.history:
        _write_history(a.history, {"iter": a.iter, "criterion": criterion, "learn_rate": a.learn_rate,
                                   "objective_per_frame": st.objective / st.frames, "frames": st.frames,
                                   "utterances": st.utterances, "skipped": len(st.skipped),
                                   "no_alignment": len(st.no_alignment), "seconds": round(st.seconds, 2),
                                   "frames_per_s": round(st.frames / max(st.seconds, 1e-9), 1)})
    log(f"wrote {a.model_out} ({st.seconds:.1f} s, {st.frames / max(st.seconds, 1e-9):.0f} frames/s)")
    return 0
