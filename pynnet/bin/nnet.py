"""DNN programs: pynnet-nnet-train, pynnet-rbm-train (DBN pretraining), pynnet-nnet-forward,
pynnet-nnet-info."""
from __future__ import annotations

import argparse
import math
import os
import sys

from pynnet.bin._cli import cli
from pynnet.bin._opts import ascii_int, float_opt, int_opt, kaldi_bool
from pynnet.bin._opts import parser as _parser
from pynnet.io.errors import fail
from pynnet.io.progress import progress_kwargs


def _device_from_use_gpu(device: str, use_gpu: str) -> str:
    """--device, or Kaldi's --use-gpu (yes/wait: cuda; optional: cuda where there is one; no: cpu)."""
    import torch
    if device and use_gpu:
        fail("give --device or --use-gpu, not both")
    if use_gpu in ("yes", "wait"):
        return "cuda"
    if use_gpu == "optional":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device or "cpu"


def _check_device(device: str) -> None:
    """--device: cpu, or cuda[:N] where CUDA (and device N) exists; a one-line error otherwise,
    before any data is read."""
    import torch
    try:
        d = torch.device(device)
    except (RuntimeError, ValueError):   # 'cudax', 'cuda:x', 'gpu'
        d = None
    if d is None or d.type not in ("cpu", "cuda"):
        fail(f"--device must be cpu or cuda[:N], not '{device}'")
    if d.type == "cuda":
        if not torch.cuda.is_available():
            fail(f"--device {device}: CUDA is not available on this machine")
        count = torch.cuda.device_count()
        if (d.index or 0) >= count:
            fail(f"--device {device}: this machine has {count} CUDA device(s) (cuda:0 to cuda:{count - 1})")


def _check_positive(a: argparse.Namespace, *names: str) -> None:
    for name in names:
        v = getattr(a, name)
        if not 0 < v < math.inf:   # (not v <= 0: catches nan too)
            fail(f"--{name.replace('_', '-')} must be positive{' and finite' if v == math.inf else ''}, not {v}")


def _check_not_negative(a: argparse.Namespace, *names: str) -> None:
    for name in names:
        v = getattr(a, name)
        if not 0 <= v < math.inf:   # (catches nan too)
            fail(f"--{name.replace('_', '-')} must not be negative{' and finite' if v == math.inf else ''}, not {v}")


def _apply_cmvn(v: str, data_dir: str) -> bool:
    if v == "auto":
        return os.path.exists(os.path.join(data_dir, "cmvn.scp"))
    return v == "true"


def _dbn_shape(a: argparse.Namespace, shape: dict) -> dict:
    """With --dbn the DBN decides the hidden layers and the splicing: take them from it, and refuse
    given options that say otherwise (they would be ignored). Returns the DBN (read once)."""
    from pynnet.nnet.rbm import load_dbn
    from pynnet.nnet.train import dbn_shape
    dbn = load_dbn(a.dbn)
    shape_of_dbn = dbn_shape(dbn)
    hidden = shape_of_dbn["hidden_dims"]
    have = {"nn_depth": len(hidden), "activation": shape_of_dbn["activation"], "splice": shape_of_dbn["context"]}
    if len(set(hidden)) == 1:
        have["hid_dim"] = hidden[0]
    elif a.hid_dim is not None:
        fail(f"--hid-dim {a.hid_dim}: the DBN's hidden layers have {hidden} units; leave it out with --dbn", a.dbn)
    for k, v in have.items():
        given = getattr(a, k)
        if given is not None and given != v:
            fail(f"--{k.replace('_', '-')} {given}: the DBN has {v}; leave it out with --dbn", a.dbn)
    shape.update(have)
    return dbn


@cli
def train_main(argv: list[str] | None = None) -> int:
    from pynnet.nnet.train import DEFAULT_SHAPE, TrainConfig, build_and_train

    p = _parser("pynnet-nnet-train", "Cross-entropy DNN training on Kaldi alignments "
                "(newbob or exponential learning rate, exact resume from <exp-dir>/checkpoint.pt).")
    p.add_argument("data", help="data dir with feats.scp (and cmvn.scp, utt2spk)")
    p.add_argument("ali_dir", help="alignment dir with ali.*.gz and final.mdl")
    p.add_argument("exp_dir")
    d = TrainConfig()
    p.add_argument("--optimizer", default=d.optimizer, choices=["ngsgd", "sgd", "adagrad"])
    p.add_argument("--learn-rate", type=float_opt, default=d.learn_rate)
    p.add_argument("--momentum", type=float_opt, default=d.momentum)
    p.add_argument("--minibatch-size", default=str(d.minibatch_size),
                   help="frames per update, or auto (CNTK's AutoAdjust, Seide et al.: from --auto-minibatch-min)")
    p.add_argument("--auto-minibatch-min", type=int_opt, default=d.minibatch_size,
                   help="--minibatch-size auto: the first and smallest size")
    p.add_argument("--auto-minibatch-every-hours", type=float_opt, default=d.auto_minibatch_every_hours,
                   help="--minibatch-size auto: hours of training data between searches")
    p.add_argument("--auto-minibatch-trial-hours", type=float_opt, default=d.auto_minibatch_trial_hours,
                   help="--minibatch-size auto: hours of data each trial size trains on")
    p.add_argument("--auto-minibatch-margin", type=float_opt, default=d.auto_minibatch_margin,
                   help="--minibatch-size auto: %% of frame accuracy a larger size may lose")
    p.add_argument("--schedule", default=d.schedule, choices=["newbob", "exponential"])
    p.add_argument("--max-epochs", type=int_opt, default=d.max_epochs)
    p.add_argument("--start-halving-impr", type=float_opt, default=d.start_halving_impr)
    p.add_argument("--end-halving-impr", type=float_opt, default=d.end_halving_impr)
    p.add_argument("--halving-factor", type=float_opt, default=d.halving_factor)
    p.add_argument("--num-epochs", type=int_opt, default=d.num_epochs,
                   help="exponential schedule: epochs of decay from --learn-rate to --final-learn-rate")
    p.add_argument("--final-learn-rate", type=float_opt, default=d.final_learn_rate, help="exponential schedule")
    p.add_argument("--num-epochs-extra", type=int_opt, default=d.num_epochs_extra,
                   help="exponential schedule: epochs at --final-learn-rate after the decay")
    p.add_argument("--buffer-frames", type=int_opt, default=d.buffer_frames, help="frame randomizer size")
    p.add_argument("--checkpoint-every", type=int_opt, default=d.checkpoint_every, help="minibatches")
    p.add_argument("--seed", type=int_opt, default=d.seed)
    p.add_argument("--device", default="cpu")
    # the model's shape: without --dbn these or their defaults; with --dbn the DBN's (given ones
    # must agree with it)
    shape = {"nn_depth": len(DEFAULT_SHAPE["hidden_dims"]), "hid_dim": DEFAULT_SHAPE["hidden_dims"][0],
             "activation": DEFAULT_SHAPE["activation"], "splice": DEFAULT_SHAPE["context"]}
    p.add_argument("--nn-depth", type=int_opt, help=f"hidden layers (default {shape['nn_depth']}; --dbn: its)")
    p.add_argument("--hid-dim", type=int_opt, help=f"units per hidden layer (default {shape['hid_dim']}; --dbn: its)")
    p.add_argument("--activation", choices=["sigmoid", "relu", "pnorm"], help="default sigmoid (--dbn: sigmoid)")
    p.add_argument("--pnorm-group", type=int_opt, default=10)
    p.add_argument("--splice", type=int_opt, help=f"frames of context each side (default {shape['splice']}; --dbn: its)")
    p.add_argument("--apply-cmvn", default="auto", choices=["true", "false", "auto"],
                   help="per-speaker mean normalisation from <data>/cmvn.scp (auto: where it exists)")
    p.add_argument("--delta-order", type=int_opt, default=0)
    p.add_argument("--cv-percent", type=float_opt, default=None,
                   help="utterances held out of <data> for CV (default 10; not with --cv-data)")
    p.add_argument("--cv-data", default="", help="CV data dir (Kaldi nnet1's <data-cv>); all of <data> trains")
    p.add_argument("--cv-ali", default="", help="alignment dir of --cv-data (default: <ali-dir>)")
    p.add_argument("--dbn", default="", help="initialise the hidden layers from this DBN (final.dbn)")
    p.add_argument("--feature-transform", default="",
                   help="Kaldi nnet1 feature transform (<Splice> -N..N, <AddShift>, <Rescale>) to use instead "
                        "of splicing + a global CMVN of the data; with --dbn it must be the DBN's")
    g = p.add_argument_group("data-parallel training (started by mpiexec/srun: steps/nnet/train.sh --num-workers)")
    g.add_argument("--num-workers", type=int_opt, default=d.num_workers,
                   help="ranks the launcher started (1: no MPI, today's training)")
    g.add_argument("--sync", default=d.sync, choices=["average", "allreduce", "average-1bit", "1bit"],
                   help="model averaging (Su & Chen), fp32 gradient allreduce, 1-bit compressed averaging, "
                        "1-bit SGD (Seide et al.: striped aggregation, the update on the aggregate; "
                        "--minibatch-size is then the global minibatch)")
    g.add_argument("--double-buffering", default="false", choices=["true", "false"],
                   help="1bit: each minibatch in two halves, one exchanged while the next is computed")
    g.add_argument("--error-feedback", default="true", choices=["true", "false"],
                   help="1bit, average-1bit: carry each value's quantization error into the next exchange")
    g.add_argument("--average-every", default=str(d.average_every),
                   help="minibatches between averages, or auto: the period at which the averages take "
                        "--comm-share of the step time, predicted from --calibration")
    g.add_argument("--comm-share", type=float_opt, default=d.comm_share,
                   help="--average-every auto: the averages' target share of the step time (default 0.05)")
    g.add_argument("--calibration", default="",
                   help="--average-every auto: this machine's constants (pynnet-parallel-model --calibrate --out FILE)")
    g.add_argument("--lr-scaling", default=d.lr_scaling, choices=["linear", "sqrt", "none"],
                   help="learning rate times K, sqrt(K) or 1 with K workers")
    g.add_argument("--model-parallel", type=int_opt, default=d.model_parallel,
                   help="M: groups of M workers split every layer between them (model parallelism; "
                        "--num-workers / M groups train data-parallel by --sync)")
    g.add_argument("--comm-backend", default=None, choices=["mpi", "torch"],
                   help="mpi (mpi4py, the default) or torch (torch.distributed: gloo on CPUs, nccl on GPUs)")
    g.add_argument("--elastic", default="false", choices=["true", "false"],
                   help="averaging (--sync average, average-1bit) goes on when a rank is lost: the others drop "
                        "it and train on from the last checkpoint (over torch.distributed's gloo; started by "
                        "pynnet-mpirun --elastic true)")
    g.add_argument("--comm-timeout", type=float_opt, default=None,
                   help="seconds a collective may wait before the job ends naming the missing ranks (default 45)")
    a = p.parse_args(argv)
    _check_device(a.device)
    auto_mb = a.minibatch_size == "auto"
    if auto_mb:
        a.minibatch_size = a.auto_minibatch_min
    elif ascii_int(a.minibatch_size) is None:
        fail(f"--minibatch-size: expected an integer or auto, got '{a.minibatch_size}'")
    else:
        a.minibatch_size = ascii_int(a.minibatch_size)
    if auto_mb:
        _check_positive(a, "auto_minibatch_every_hours", "auto_minibatch_trial_hours", "auto_minibatch_min")
        _check_not_negative(a, "auto_minibatch_margin")
    auto_avg = a.average_every == "auto"
    if auto_avg:
        a.average_every = 0
    elif ascii_int(a.average_every) is None:
        fail(f"--average-every: expected an integer or auto, got '{a.average_every}'")
    else:
        a.average_every = ascii_int(a.average_every)
        _check_positive(a, "average_every")
    _check_positive(a, "num_workers", "model_parallel")
    if a.num_workers % a.model_parallel:
        fail(f"--model-parallel {a.model_parallel} must divide --num-workers {a.num_workers}")
    if a.comm_timeout is not None and not a.comm_timeout > 0:
        fail(f"--comm-timeout must be positive, not {a.comm_timeout}")
    if a.elastic == "true" and a.num_workers > 1:
        if a.sync not in ("average", "average-1bit"):
            fail(f"--elastic works with --sync average or average-1bit, not {a.sync}")
        if a.model_parallel > 1:
            fail("--elastic does not combine with --model-parallel (a lost rank would take a slice of every layer)")
        if a.comm_backend == "mpi":
            fail("--elastic runs over torch.distributed (an MPI communicator cannot shrink without ULFM): "
                 "leave --comm-backend out or give torch")
        a.comm_backend = "torch"
    if a.comm_backend is None:
        a.comm_backend = "mpi"
    transform = None
    if a.feature_transform:
        from pynnet.nnet.kaldi_nnet1 import read_feature_transform
        transform = read_feature_transform(a.feature_transform)
    # before any data is read (that can take minutes on a real corpus)
    from pynnet.nnet.optim import check_momentum
    dbn = _dbn_shape(a, shape) if a.dbn else None
    if transform is not None and not a.dbn and a.splice is None:
        shape["splice"] = transform.context   # (the transform splices; --splice must agree if given)
    for k, v in shape.items():
        if getattr(a, k) is None:
            setattr(a, k, v)
    _check_positive(a, "learn_rate", "minibatch_size", "max_epochs", "num_epochs", "buffer_frames",
                    "checkpoint_every", "hid_dim", "nn_depth", "pnorm_group")
    if a.schedule == "exponential":
        _check_positive(a, "final_learn_rate")
    _check_not_negative(a, "splice", "delta_order", "start_halving_impr", "end_halving_impr", "num_epochs_extra",
                        "seed")
    if not 0.0 < a.halving_factor <= 1.0:   # newbob multiplies the learning rate by it
        fail(f"--halving-factor must be in (0, 1], not {a.halving_factor}")
    if a.cv_data and a.cv_percent is not None:
        fail("--cv-percent holds CV out of <data>; with --cv-data leave it out")
    if a.cv_ali and not a.cv_data:
        fail("--cv-ali needs --cv-data")
    if a.cv_percent is None:
        a.cv_percent = 10.0
    if not 0.0 < a.cv_percent < 100.0:   # (newbob and the logs need a CV set)
        fail(f"--cv-percent must be in (0, 100), not {a.cv_percent}")
    check_momentum(a.optimizer, a.momentum)
    if a.buffer_frames < a.minibatch_size:
        fail("--buffer-frames must be at least --minibatch-size")
    cfg = TrainConfig(optimizer=a.optimizer, learn_rate=a.learn_rate, momentum=a.momentum,
                      minibatch_size=a.minibatch_size, schedule=a.schedule, max_epochs=a.max_epochs,
                      start_halving_impr=a.start_halving_impr, end_halving_impr=a.end_halving_impr,
                      halving_factor=a.halving_factor, num_epochs=a.num_epochs,
                      final_learn_rate=a.final_learn_rate, num_epochs_extra=a.num_epochs_extra,
                      buffer_frames=a.buffer_frames,
                      checkpoint_every=a.checkpoint_every, seed=a.seed, device=a.device)
    if auto_mb:
        cfg.auto_minibatch, cfg.auto_minibatch_every_hours, cfg.auto_minibatch_trial_hours, cfg.auto_minibatch_margin = \
            True, a.auto_minibatch_every_hours, a.auto_minibatch_trial_hours, a.auto_minibatch_margin
    if a.num_workers > 1:   # (one worker: the parallel options do not apply, nor enter the checkpoint)
        cfg.num_workers, cfg.sync, cfg.average_every, cfg.lr_scaling, cfg.model_parallel = \
            a.num_workers, a.sync, a.average_every, a.lr_scaling, a.model_parallel
        cfg.elastic = a.elastic == "true"
        if auto_avg and a.sync in ("average", "average-1bit") and a.num_workers > a.model_parallel:
            if not 0.0 < a.comm_share < 1.0:
                fail(f"--comm-share must be in (0, 1), not {a.comm_share}")
            if not a.calibration:
                fail("--average-every auto needs --calibration FILE (pynnet-parallel-model --calibrate --out FILE "
                     "measures this machine; steps/nnet/train.sh runs it)")
            from pynnet.parallel.perfmodel import load_calibration
            load_calibration(a.calibration)   # (a bad file: one line, before any data is read)
            cfg.comm_share, cfg.calibration = a.comm_share, os.path.abspath(a.calibration)
        elif auto_avg:
            cfg.average_every = 10   # (no averages to space: the option does not apply)
        if a.model_parallel > 1:
            if a.optimizer == "adagrad" and a.sync != "1bit":
                fail("--model-parallel trains with --optimizer ngsgd or sgd (adagrad only with --sync 1bit)")
            if a.activation == "pnorm":
                fail("--model-parallel splits sigmoid or ReLU layers, not pnorm")
            if a.hid_dim < a.model_parallel:
                fail(f"--model-parallel {a.model_parallel}: a layer of {a.hid_dim} units cannot be split "
                     f"{a.model_parallel} ways")
        cfg.double_buffering = a.sync == "1bit" and a.double_buffering == "true"
        cfg.error_feedback = a.error_feedback == "true" or a.sync not in ("1bit", "average-1bit")
        if a.sync == "1bit" and a.optimizer not in ("adagrad", "sgd"):
            fail(f"--sync 1bit updates with AdaGrad (Seide et al.) or SGD on the aggregated gradient: "
                 f"use --optimizer adagrad or sgd, not {a.optimizer}")
        parts = a.num_workers // a.model_parallel * (2 if cfg.double_buffering else 1)
        if a.sync == "1bit" and a.minibatch_size < parts:
            fail(f"--minibatch-size {a.minibatch_size} is the global minibatch of --sync 1bit: it must be at "
                 f"least the {parts} parts it is split into")
    given_shape = {} if a.dbn else {"hidden_dims": [a.hid_dim] * a.nn_depth, "activation": a.activation,
                                    "context": a.splice}   # (the DBN's, checked above)
    def train(sync=None):
        build_and_train(a.data, a.ali_dir, a.exp_dir, cfg, **given_shape, pnorm_group=a.pnorm_group,
                        apply_cmvn=_apply_cmvn(a.apply_cmvn, a.data), delta_order=a.delta_order,
                        cv_percent=a.cv_percent, cv_data_dir=a.cv_data or None, cv_ali_dir=a.cv_ali or None,
                        dbn_path=a.dbn or None, dbn=dbn, feature_transform=transform,
                        feature_transform_path=a.feature_transform, progress=not progress_kwargs()["disable"],
                        sync=sync)

    from pynnet.parallel.comm import launched_size
    if a.num_workers == 1:
        if launched_size() > 1:
            fail(f"started as {launched_size()} ranks but --num-workers is 1 (steps/nnet/train.sh "
                 "--num-workers K starts K ranks)")
        train()
        return 0
    from pynnet.parallel.job import run_on_ranks
    return run_on_ranks(train, a.exp_dir, cfg, backend=a.comm_backend, timeout=a.comm_timeout)


@cli
def rbm_main(argv: list[str] | None = None) -> int:
    from pynnet.nnet.rbm import RbmConfig, pretrain_dbn

    p = _parser("pynnet-rbm-train", "DBN pretraining: stacked RBMs trained with CD-1 (Kaldi nnet1 "
                "pretrain_dbn.sh); writes <dbn-dir>/final.dbn.")
    p.add_argument("data")
    p.add_argument("dbn_dir")
    d = RbmConfig()
    p.add_argument("--nn-depth", type=int_opt, default=6)
    p.add_argument("--hid-dim", type=int_opt, default=2048)
    p.add_argument("--rbm-iter", type=int_opt, default=d.epochs, help="epochs per layer (Gaussian layer: twice)")
    p.add_argument("--rbm-lrate", type=float_opt, default=d.lr_bb)
    p.add_argument("--rbm-lrate-low", type=float_opt, default=d.lr_gb)
    p.add_argument("--rbm-l2penalty", type=float_opt, default=d.l2)
    p.add_argument("--minibatch-size", type=int_opt, default=d.minibatch_size)
    p.add_argument("--buffer-frames", type=int_opt, default=d.buffer_frames)
    p.add_argument("--splice", type=int_opt, default=5)
    p.add_argument("--apply-cmvn", default="auto", choices=["true", "false", "auto"])
    p.add_argument("--delta-order", type=int_opt, default=0)
    p.add_argument("--seed", type=int_opt, default=d.seed)
    p.add_argument("--device", default=d.device, help="cpu | cuda[:N]")
    a = p.parse_args(argv)
    _check_device(a.device)
    _check_positive(a, "nn_depth", "hid_dim", "rbm_iter", "minibatch_size", "buffer_frames", "rbm_lrate",
                    "rbm_lrate_low")
    _check_not_negative(a, "splice", "delta_order", "rbm_l2penalty", "seed")
    from pynnet.nnet.train import set_threads
    set_threads()
    cfg = RbmConfig(minibatch_size=a.minibatch_size, lr_gb=a.rbm_lrate_low, lr_bb=a.rbm_lrate,
                    epochs=a.rbm_iter, l2=a.rbm_l2penalty, buffer_frames=a.buffer_frames, seed=a.seed,
                    device=a.device)
    pretrain_dbn(a.data, a.dbn_dir, a.nn_depth, a.hid_dim, cfg, context=a.splice,
                 apply_cmvn=_apply_cmvn(a.apply_cmvn, a.data), delta_order=a.delta_order)
    return 0


@cli
def forward_main(argv: list[str] | None = None) -> int:
    import numpy as np
    import torch

    from pynnet.feat.tables import MatrixWriter, read_matrices
    from pynnet.nnet.data import add_deltas, read_cmvn_scp, speaker_mean
    from pynnet.nnet.model import load_model

    p = _parser("pynnet-nnet-forward", "Forward features through a DNN (Kaldi nnet-forward): "
                "posteriors, log-posteriors or pseudo-log-likelihoods as a Kaldi matrix archive.")
    p.add_argument("model")
    p.add_argument("feats_rspecifier")
    p.add_argument("out_wspecifier")
    p.add_argument("--no-softmax", nargs="?", const=True, default=False, type=kaldi_bool,
                   help="output the pre-softmax activations (Kaldi's --no-softmax[=true])")
    p.add_argument("--apply-log", nargs="?", const=True, default=False, type=kaldi_bool,
                   help="log of the softmax output (Kaldi's --apply-log[=true])")
    p.add_argument("--prior-subtract", action="store_true",
                   help="log-posteriors minus the model's log priors (pseudo-log-likelihoods for decoding)")
    p.add_argument("--class-frame-counts", default="",
                   help="Kaldi nnet1: subtract log priors from these frame counts per pdf (a text vector, "
                        "e.g. the training dir's ali_train_pdf.counts) instead of the model's")
    p.add_argument("--prior-scale", type=float_opt, default=1.0, help="scale of the subtracted log priors")
    p.add_argument("--prior-floor", type=float_opt, default=1e-10,
                   help="pdfs with a relative frequency below this are disabled (with --class-frame-counts)")
    p.add_argument("--utt2spk", default="", help="needed when the model was trained with per-speaker CMVN")
    p.add_argument("--cmvn-scp", default="", help="per-speaker CMVN stats (with --utt2spk)")
    p.add_argument("--device", default="", help="cpu (default) or cuda[:N]")
    p.add_argument("--use-gpu", default="", choices=["yes", "no", "optional", "wait"],
                   help="Kaldi's form of --device: yes/wait = cuda, optional = cuda where there is one")
    p.add_argument("--feature-transform", default="",
                   help="(Kaldi nnet1) refused: a pynnet model holds its feature transform")
    a = p.parse_args(argv)
    if a.feature_transform:
        fail(f"--feature-transform {a.feature_transform}: a pynnet model holds its own feature transform "
             "(Kaldi nnet1 feature transforms are not read)")
    if a.no_softmax and a.apply_log:   # (Kaldi refuses it too)
        fail("--no-softmax and --apply-log together: there is no softmax output to take the log of")
    device = _device_from_use_gpu(a.device, a.use_gpu)
    _check_device(device)
    from pynnet.nnet.train import set_threads
    set_threads()
    model = load_model(a.model)
    model.eval()
    if a.class_frame_counts:
        from pynnet.hmm.model_io import read_vector_file
        from pynnet.nnet.model import log_priors_from_counts
        counts = read_vector_file(a.class_frame_counts)
        if counts.size != model.arch["output_dim"]:
            fail(f"{counts.size} frame counts for a model with {model.arch['output_dim']} pdfs",
                 a.class_frame_counts)
        model.log_priors.copy_(torch.as_tensor(log_priors_from_counts(counts, a.prior_floor),
                                               dtype=torch.float32))
    subtract = a.prior_subtract or bool(a.class_frame_counts)
    dev = torch.device(device)
    model.to(dev)
    pipe = model.input_pipeline
    spk_of, cmvn_of, mean_cache = {}, {}, {}
    if pipe.get("apply_cmvn"):
        if not (a.utt2spk and a.cmvn_scp):
            fail("the model was trained with per-speaker CMVN: give --utt2spk and --cmvn-scp", a.model)
        from pynnet.io.tables import read_table_lines
        spk_of = {k: v for _, k, v in read_table_lines(a.utt2spk)}
        cmvn_of = read_cmvn_scp(a.cmvn_scp)
    in_dim = model.arch["input_dim"]
    n = 0
    # the output file appears only when every utterance went through (MatrixWriter renames);
    # read_matrices turns an unreadable scp/ark into a one-line error naming it
    with MatrixWriter(a.out_wspecifier) as writer:
        for utt, m in read_matrices(a.feats_rspecifier):
            m = np.asarray(m, dtype=np.float32)
            if not m.flags.writeable:   # (kaldiio may hand out read-only arrays; torch warns on them)
                m = m.copy()
            if not np.isfinite(m).all():   # (Kaldi's nnet-forward refuses them too)
                fail(f"NaN or inf in the features of utterance '{utt}'", a.feats_rspecifier)
            if pipe.get("apply_cmvn"):
                spk = spk_of.get(utt)
                if spk is None:
                    fail(f"utterance '{utt}' not in utt2spk", a.utt2spk)
                if spk not in mean_cache:
                    mean_cache[spk] = speaker_mean(cmvn_of, spk, a.cmvn_scp)
                if mean_cache[spk].shape[0] != m.shape[1]:
                    fail(f"utterance '{utt}': feature dim {m.shape[1]} != CMVN stats dim {mean_cache[spk].shape[0]}",
                         a.feats_rspecifier)
                m = (m - mean_cache[spk]).astype(np.float32)
            m = add_deltas(m, pipe.get("delta_order", 0))
            if m.shape[1] != in_dim:
                fail(f"utterance '{utt}': feature dim {m.shape[1]} != model input dim {in_dim}", a.feats_rspecifier)
            with torch.no_grad():
                y = model.utterance_logits(torch.from_numpy(m).to(dev))
                # (Kaldi's nnet-forward subtracts --class-frame-counts priors from whatever it outputs;
                # decoding takes --no-softmax=true: logits and log-softmax differ by a per-frame constant)
                if not a.no_softmax:
                    y = torch.log_softmax(y, 1) if (a.apply_log or a.prior_subtract) else torch.softmax(y, 1)
                if subtract:
                    y = y - a.prior_scale * model.log_priors
            writer.write(utt, y.cpu().numpy())
            n += 1
        if n == 0:
            fail(f"no utterances in '{a.feats_rspecifier}'")
    print(f"LOG (pynnet-nnet-forward): processed {n} utterances", file=sys.stderr)
    return 0


@cli
def info_main(argv: list[str] | None = None) -> int:
    from pynnet.nnet.model import load_model_file, model_from_dict

    p = _parser("pynnet-nnet-info", "Print a DNN model's architecture and training history.")
    p.add_argument("model")
    a = p.parse_args(argv)
    obj = load_model_file(a.model)
    m = model_from_dict(obj)
    print(f"arch {obj['arch']}")
    print(f"input-pipeline {obj['input_pipeline']}")
    print(f"num-params {m.num_params()}")
    for h in obj.get("history", []):
        print(" ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in h.items()))
    return 0
