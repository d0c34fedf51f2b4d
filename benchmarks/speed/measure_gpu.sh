#!/bin/bash
# Everything the project measures on a GPU machine, in one call of at most BUDGET seconds
# (default 540): each call starts the machine bare, so the script installs what it lacks, runs the
# measurements in order of importance, and writes each under OUT as it finishes (a call stopped at
# its limit keeps the rest).
#
#   bash benchmarks/speed/measure_gpu.sh OUT [BUDGET] [--dry_run] [--parts=PART,...]
#
# Wheels of what the machine lacks (ml-collections, tensorboardX, grain, array-record, simplejpeg,
# nbclient, ipykernel and their needs) are installed from .whl/ if it exists. The parts (default
# trainer,input_pipeline,suite; each writes under OUT):
#   trainer         accelerator.py's environment and trainer sections (main.py against the bare
#                   step on synthetic data);
#   input_pipeline  input_pipeline.py's prepare, prepared and trainer sections on every core;
#   feeding         ImageNet fed at the step's speed (input_pipeline.py --sections=feeding):
#                   a decoded YUV 4:2:0 set of 150,000 rows (14.7 GB) made on this host from the
#                   benchmark's photographs — nothing is downloaded — and main.py ÷ the pipelined
#                   bare step at batch 256 and 512 with that set on the device, from host memory,
#                   and the prepared JPEGs on a worker process per core beside their ceiling
#                   (cores × one core's decode rate), each with the device's busy share from a
#                   trace; rows of the set gathered on the device past 2³¹ bytes into it, against
#                   the file's; also the decoded set's prepare rates (1, 2 and every worker) and
#                   its gather + augment program timed alone against the bare step
#                   (--sections=decoded_prepare,decoded). Writes OUT/feeding/input_pipeline.json;
# Without the imagenet extra the JPEG rows are skipped, saying so (input_pipeline's part is all
# JPEG rows: it is skipped).
#   suite           at once: the test suite on the cores left (all but four) || the notebook,
#                   then the mocked 8-GPU programs with the time model's predictions, until
#                   BUDGET is spent.
# Merge the reports here with accelerator.py --previous (docs/gpu.md says how); the feeding
# part's results go into docs/input_pipeline.json under `gpu_feeding`.
set -u
OUT=${1:?usage: bash benchmarks/speed/measure_gpu.sh OUT [BUDGET] [--dry_run] [--parts=PART,...]}
shift
BUDGET=540
DRY=
PARTS=trainer,input_pipeline,suite
for arg in "$@"; do
  case "$arg" in
    --dry_run) DRY=--dry_run ;;
    --parts=*) PARTS=${arg#--parts=} ;;
    [0-9]*) BUDGET=$arg ;;
    *) echo "error: unknown argument '$arg'; expected BUDGET, --dry_run or --parts=..." >&2
       exit 1 ;;
  esac
done
for part in ${PARTS//,/ }; do
  case "$part" in
    trainer|input_pipeline|feeding|suite) ;;
    *) echo "error: unknown part '$part'; choose from trainer, input_pipeline, feeding, suite." >&2
       exit 1 ;;
  esac
done
has() { [[ ",$PARTS," == *",$1,"* ]]; }
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
PYTHON=${PYTHON:-python3}
LOG="$OUT/measure_gpu.log"
log() { echo "== $(date +%T) +${SECONDS}s $*" | tee -a "$LOG"; }
if compgen -G ".whl/*.whl" >/dev/null; then
  log "installing .whl/"
  $PYTHON -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl >>"$LOG" 2>&1 && \
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
nvidia-smi >>"$LOG" 2>&1
# The JPEG path's rows need the imagenet extra (Grain, ArrayRecord, simplejpeg): without it they
# are skipped, saying so, and everything else is measured.
if ! $PYTHON -c "import grain, array_record, simplejpeg" >/dev/null 2>&1; then
  log "the imagenet extra (grain, array-record, simplejpeg) is not installed: skipping the JPEG rows"
  JPEG_PATH=
else
  JPEG_PATH=yes
fi
if has trainer; then
  log "environment, trainer"
  $PYTHON -m benchmarks.speed.accelerator $DRY --sections=environment,trainer --out="$OUT/first" \
    >>"$LOG" 2>&1
fi
if has feeding; then
  log "feeding: decoded set, main.py on it against the step"
  # What the host has: its disk and memory bound the decoded set (nvidia-smi gives the device's).
  { df -h "${TMPDIR:-/tmp}"; free -g; } >>"$LOG" 2>&1
  $PYTHON -m benchmarks.speed.input_pipeline $DRY \
    --sections=decoded_prepare,decoded,feeding --feeding_batches=256,512 \
    --budget_s=$((BUDGET - SECONDS - 30)) --out="$OUT/feeding" >>"$LOG" 2>&1
fi
if has input_pipeline && [ -z "$JPEG_PATH" ]; then
  log "input pipeline: skipped (its rows are the JPEG path's)"
elif has input_pipeline; then
  log "input pipeline"
  $PYTHON -m benchmarks.speed.input_pipeline $DRY --sections=prepare,prepared,trainer \
    --out="$OUT" >>"$LOG" 2>&1
fi
if has suite; then
  CORES=$(nproc)
  SUITE_CORES=$([ "$CORES" -gt 8 ] && echo "4-$((CORES - 1))" || echo "0-$((CORES - 1))")
  log "suite on cores $SUITE_CORES || notebook, mocked 8-GPU programs"
  taskset -c "$SUITE_CORES" $PYTHON -m benchmarks.speed.accelerator $DRY --sections=suite \
    --budget_s=$((BUDGET - SECONDS - 15)) --out="$OUT/suite" >>"$OUT/suite.log" 2>&1 &
  SUITE=$!
  $PYTHON -m benchmarks.speed.accelerator $DRY --sections=notebook --out="$OUT/notebook" \
    >>"$LOG" 2>&1
  $PYTHON -m benchmarks.speed.accelerator $DRY --sections=mock_multi_gpu \
    --budget_s=$((BUDGET - SECONDS - 15)) --out="$OUT/mock" >>"$LOG" 2>&1
  log "waiting for the suite"
  wait $SUITE
  rm -f "$OUT"/*/accelerator.md  # the tables are rendered again where the reports are merged
  cat "$OUT/suite.log" >>"$LOG"; rm -f "$OUT/suite.log"
fi
log "done"
