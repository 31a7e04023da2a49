# How jobs are run: "run.pl" runs them as local processes (in parallel, up to --max-jobs-run);
# "slurm.pl" submits them as a SLURM array job (options after it are passed to sbatch), e.g.
#   export train_cmd="slurm.pl --partition cpu --mem 4G"
export train_cmd="run.pl"
export decode_cmd="run.pl"
export cuda_cmd="run.pl"
