"""One rank of a data-parallel training job: communicator, synchronizer, and what happens on an
error (one message, then the whole job ends: never K-1 ranks waiting for a dead one)."""
from __future__ import annotations

import json
import os
import sys
import time
from typing import Callable

from pynnet.io.errors import PynnetError
from pynnet.nnet.data import set_log_rank
from pynnet.nnet.train import TrainConfig, WorkersLost
from pynnet.parallel.comm import DEFAULT_TIMEOUT, CommFailure, launched_size, make_communicator
from pynnet.parallel.launch import write_rank_info
from pynnet.parallel.sync import make_sync


def prog_name() -> str:
    return os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "pynnet"


def run_on_ranks(train: Callable, exp_dir: str, cfg: TrainConfig, backend: str = "mpi",
                 timeout: float | None = None) -> int:
    """``train(sync)`` on this rank of a job of ``cfg.num_workers`` ranks."""
    started = launched_size()
    if started != cfg.num_workers:
        raise PynnetError(f"--num-workers {cfg.num_workers} but the launcher started {started} rank(s) "
                          f"(steps/nnet/train.sh --num-workers K starts them with mpiexec -n K)")
    timeout = DEFAULT_TIMEOUT if timeout is None else timeout
    if cfg.elastic:
        from pynnet.parallel.elastic import ElasticCommunicator
        comm = ElasticCommunicator(timeout)
    else:
        comm = make_communicator(backend, timeout, cfg.device)
    if comm.size != cfg.num_workers:
        raise PynnetError(f"--num-workers {cfg.num_workers} but the communicator has {comm.size} ranks")
    set_log_rank(comm.rank)
    comm.failure_note = "no checkpoint was written yet: rerun the same command to start again"
    try:
        write_rank_info(os.path.join(exp_dir, "log"), comm.rank)
        if cfg.model_parallel > 1:
            from pynnet.parallel.model_parallel import ModelParallelSync
            sync = ModelParallelSync(cfg, comm)
        elif cfg.elastic:
            from pynnet.parallel.elastic import make_elastic_sync
            sync = make_elastic_sync(cfg, comm)
        else:
            sync = make_sync(cfg, comm)
        while True:
            try:
                train(sync)
                # the others wait for rank 0's final.nnet: the job ends when the model is there
                comm.barrier("the end of the training (rank 0 writes final.nnet)")
                break
            except WorkersLost as e:   # (elastic: the survivors train on, from the last checkpoint)
                sync.regroup(e)
                if sync.is_writer:
                    _write_json(os.path.join(exp_dir, "log", "lost_ranks.json"), sync.lost_events())
        if cfg.elastic and sync.is_writer:   # (pynnet-mpirun: the job completed, whatever mpiexec says)
            _write_json(os.path.join(exp_dir, "log", "elastic_done.json"), sync.lost_events())
    except BaseException as e:  # noqa: BLE001 - every error of a rank ends the whole job
        if isinstance(e, CommFailure) and e.collective:
            # the rank that prints it ends the job: aborting first could kill it before it prints
            time.sleep(10)
        else:
            _report(e, comm.rank, os.path.join(exp_dir, "log"))
        comm.abort(143 if type(e).__name__ == "Terminated" else 1)
    comm.close()
    return 0


def _report(e: BaseException, rank: int, log_dir: str) -> None:
    """The error on stderr, and in <log_dir>/ranks/<rank>.error: an abort right after the print can
    end mpiexec before it forwards the line, and pynnet-mpirun then prints it from there."""
    who = f"rank {rank}: " if rank else ""
    if isinstance(e, PynnetError):
        msg = str(e)
    elif isinstance(e, OSError):
        msg = f"{e.strerror or e}" + (f": {e.filename}" if e.filename else "")
    elif type(e).__name__ == "Terminated":
        msg = "terminated"
    elif isinstance(e, KeyboardInterrupt):
        msg = "interrupted"
    else:   # a bug, not a user error: the traceback is wanted
        import traceback
        traceback.print_exception(e)
        msg = f"{type(e).__name__}: {e}"
    line = f"ERROR ({prog_name()}): {who}{msg}"
    print(line, file=sys.stderr, flush=True)
    try:
        with open(os.path.join(log_dir, "ranks", f"{rank}.error"), "w") as f:
            f.write(line + "\n")
    except OSError:
        pass


def _write_json(path: str, obj) -> None:
    from pynnet.io.atomic import atomic_write
    with atomic_write(path) as f:
        json.dump(obj, f, indent=1)
        f.write("\n")
