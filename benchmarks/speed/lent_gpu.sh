#!/bin/bash
# Everything issue-sized that the project measures on a lent GPU machine, in one call of at most
# BUDGET seconds (default 540): the machine is lent by the minute, and each call starts it bare.
#
#   bash benchmarks/speed/lent_gpu.sh OUT [BUDGET] [--dry_run]
#
# Wheels of what the machine lacks (ml-collections, tensorboardX, grain, array-record, simplejpeg,
# nbclient, ipykernel and their needs) are installed from .whl/ if it exists. In order of
# importance, each writing under OUT as it finishes (a call stopped at its limit keeps the rest):
#   1. accelerator.py's environment and trainer sections (main.py against the bare step);
#   2. input_pipeline.py's prepare, prepared and trainer sections on every core of the host;
#   3. at once: the suite on the cores left (all but four) || the notebook, then the mocked
#      8-GPU programs with the time model's predictions, until BUDGET is spent.
# Merge the reports here with accelerator.py --previous (docs/gpu.md says how).
set -u
OUT=${1:?usage: bash benchmarks/speed/lent_gpu.sh OUT [BUDGET] [--dry_run]}
BUDGET=${2:-540}
DRY=${3:-}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
PYTHON=${PYTHON:-python3}
log() { echo "== $(date +%T) +${SECONDS}s $*" | tee -a "$OUT/lent_gpu.log"; }
if compgen -G ".whl/*.whl" >/dev/null; then
  log "installing .whl/"
  $PYTHON -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl >>"$OUT/lent_gpu.log" 2>&1 && \
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
nvidia-smi >>"$OUT/lent_gpu.log" 2>&1
log "environment, trainer"
$PYTHON -m benchmarks.speed.accelerator $DRY --sections=environment,trainer --out="$OUT/first" \
  >>"$OUT/lent_gpu.log" 2>&1
log "input pipeline"
$PYTHON -m benchmarks.speed.input_pipeline $DRY --sections=prepare,prepared,trainer \
  --out="$OUT" >>"$OUT/lent_gpu.log" 2>&1
CORES=$(nproc)
SUITE_CORES=$([ "$CORES" -gt 8 ] && echo "4-$((CORES - 1))" || echo "0-$((CORES - 1))")
log "suite on cores $SUITE_CORES || notebook, mocked 8-GPU programs"
taskset -c "$SUITE_CORES" $PYTHON -m benchmarks.speed.accelerator $DRY --sections=suite \
  --budget_s=$((BUDGET - SECONDS - 15)) --out="$OUT/suite" >>"$OUT/suite.log" 2>&1 &
SUITE=$!
$PYTHON -m benchmarks.speed.accelerator $DRY --sections=notebook --out="$OUT/notebook" \
  >>"$OUT/lent_gpu.log" 2>&1
$PYTHON -m benchmarks.speed.accelerator $DRY --sections=mock_multi_gpu \
  --budget_s=$((BUDGET - SECONDS - 15)) --out="$OUT/mock" >>"$OUT/lent_gpu.log" 2>&1
log "waiting for the suite"
wait $SUITE
rm -f "$OUT"/*/accelerator.md  # the tables are rendered again where the reports are merged
cat "$OUT/suite.log" >>"$OUT/lent_gpu.log"; rm -f "$OUT/suite.log"
log "done"
