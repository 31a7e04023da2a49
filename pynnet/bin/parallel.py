"""pynnet-mpirun: the launcher of steps/nnet/train.sh --num-workers K (pynnet.parallel.launch)."""
from __future__ import annotations

from pynnet.bin._cli import cli
from pynnet.bin._opts import int_opt
from pynnet.bin._opts import parser as _parser


@cli
def mpirun_main(argv: list[str] | None = None) -> int:
    from pynnet.parallel.launch import run

    p = _parser("pynnet-mpirun", "Start K ranks of a command with an MPI launcher; a rank that dies is "
                "named in one line with the last checkpoint (<log-dir>/ranks/, <log-dir>/last_checkpoint).")
    p.add_argument("--num-workers", type=int_opt, required=True)
    p.add_argument("--mpirun", default="", help="the launcher command (default 'mpiexec -n K'; e.g. "
                   "'mpiexec -n 8 -f hostfile', 'srun --mpi=pmi2')")
    p.add_argument("--log-dir", required=True, help="the training's log dir (<exp-dir>/log)")
    p.add_argument("--comm-backend", default="mpi", choices=["mpi", "torch"],
                   help="torch: set MASTER_ADDR (default 127.0.0.1) and a free MASTER_PORT for the rendezvous")
    p.add_argument("--elastic", default="false", choices=["true", "false"],
                   help="the job may lose ranks and go on (pynnet-nnet-train --elastic true): this process hosts "
                        "the ranks' store and, without --mpirun, starts the K ranks on this host itself")
    p.add_argument("command", nargs="+", help="the program and its arguments (after --)")
    a = p.parse_args(argv)
    if a.num_workers < 1:
        from pynnet.io.errors import fail
        fail(f"--num-workers must be positive, not {a.num_workers}")
    elastic = a.elastic == "true"
    return run(a.num_workers, a.mpirun, a.log_dir, a.command, "torch" if elastic else a.comm_backend, elastic)
