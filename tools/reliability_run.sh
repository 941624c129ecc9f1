#!/usr/bin/env bash
# The reliability runs of docs/reliability.md, on a CUDA machine with its own
# torch, against a built wheel:
#
#   tools/reliability_run.sh [path/to/wheelops-*.whl] [stage...]
#
# Stages (default: tests slow memory huge sanitize):
#   tests     the GPU suite but the slow, huge, two-GPU and memory-growth tests,
#             property tests with hypothesis's "gpu" profile; in $TEST_WORKERS
#             processes (pytest-xdist) if set     -> gpu-tests.xml, gpu-tests-examples.json*
#   slow      the tests marked slow (graph compiles, AOTInductor packages, dev-mode
#             builds, subprocess matrices), in $TEST_WORKERS processes too
#                                                 -> slow-tests.xml
#   memory    the 10,000-call memory tests, alone on the GPU (they read the
#             device's free memory)               -> memory-tests.xml
#   huge      the tests over 2**31 elements (about 60 GiB of GPU memory at most)
#                                                 -> huge-tests.xml
#   multi     the two-GPU tests (cuda:1, DDP over NCCL); needs two GPUs
#                                                 -> multi-gpu.xml
#   sanitize  tools/sanitize.sh (memcheck, racecheck, initcheck, synccheck)
#                                                 -> sanitizer-*.xml, sanitizer-summary.json
# Results go to $OUT (default: a new temporary directory, printed), with
# environment.json; `python tools/reliability_report.py $OUT` makes the tables.
# Extra pytest arguments: $PYTEST_ARGS. Each stage is interrupted after $STAGE_TIMEOUT
# seconds (default 540, inside one 10-minute call; 0: no limit; sanitize, whose tools
# take longer than one call together, has no default limit). Each pytest stage
# writes NAME.log (failures as they happen, -rfE, the slowest tests) and
# NAME-progress.log (a line per test started and ended); after the stage,
# tools/progress_report.py prints its failures and, for an interrupted stage, the tests
# still running.
set -uo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
wheel=""
if [[ $# -gt 0 && "$1" == *.whl ]]; then wheel="$1"; shift; fi
stages=("$@")
[[ ${#stages[@]} -gt 0 ]] || stages=(tests slow memory huge sanitize)
export OUT="${OUT:-$(mktemp -d)}"
mkdir -p "$OUT"
echo "results in $OUT"
python3 - > "$OUT/environment.json" <<'PY'
import json, subprocess, torch
smi = subprocess.run(
    ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
    capture_output=True, text=True,
).stdout.strip().splitlines()
print(json.dumps({"gpus": smi, "torch": torch.__version__, "cuda": torch.version.cuda}, indent=2))
PY
read -r -a extra <<<"${PYTEST_ARGS:-}"
workers=() threads=""
if [[ -n "${TEST_WORKERS:-}" ]]; then
  # xdist hands each worker a queue of tests up front; "worksteal" lets an idle worker
  # take tests still queued behind a long one ("load" cannot). The suite puts its
  # longest tests (the property tests) first, so none starts last.
  workers=(-n "$TEST_WORKERS" --dist worksteal)
  # Each worker's torch gets its share of the cores: with torch's default (all of them)
  # 14 workers ran 224 intra-op threads on 16 cores, and a CPU test of 3 s took 60 s.
  share=$(( $(nproc) / TEST_WORKERS ))
  threads="${OMP_NUM_THREADS:-$(( share > 0 ? share : 1 ))}"
  echo "$TEST_WORKERS workers (--dist worksteal), $threads intra-op threads each"
fi
# SIGINT first: pytest then still prints its failures and writes its report.
limit=(timeout -k 30 -s INT "${STAGE_TIMEOUT:-540}")
suite() {  # report name, intra-op threads a process ("": torch's default), pytest arguments
  local name="$1" threads="$2"; shift 2
  local progress="$OUT/$name-progress.log" rc=0
  rm -f "$progress"
  env ${threads:+OMP_NUM_THREADS="$threads"} WHEELOPS_REPORT_NAME="$name" \
    WHEELOPS_PROGRESS_LOG="$progress" "${limit[@]}" \
    "$repo/tools/gpu_tests.sh" "$wheel" -q -rfE --durations=25 "$@" "${extra[@]}" \
    > "$OUT/$name.log" 2>&1 || rc=$?
  [[ ! -f "$progress" ]] || python3 "$repo/tools/progress_report.py" "$progress" --slowest 10
  return "$rc"
}
status=0
for stage in "${stages[@]}"; do
  start=$SECONDS rc=0
  case "$stage" in
    tests) suite gpu-tests "$threads" -m "not slow and not huge and not multi_gpu" \
             -k "not no_memory_growth" "${workers[@]}" || rc=$? ;;
    slow) suite slow-tests "$threads" -m "slow and not huge and not multi_gpu" \
            -k "not no_memory_growth" "${workers[@]}" || rc=$? ;;
    memory) suite memory-tests "" -m "not huge and not multi_gpu" -k no_memory_growth || rc=$? ;;
    huge) suite huge-tests "" -m huge || rc=$? ;;
    multi) suite multi-gpu "" -m multi_gpu || rc=$? ;;
    sanitize) timeout "${STAGE_TIMEOUT:-0}" "$repo/tools/sanitize.sh" "$wheel" "${extra[@]}" \
                > "$OUT/sanitizer.log" 2>&1 || rc=$? ;;
    *) echo "unknown stage: $stage (tests, slow, memory, huge, multi, sanitize)" >&2; exit 2 ;;
  esac
  echo "$stage: exit $rc in $((SECONDS - start)) s"
  [[ $rc -eq 0 ]] || status=1
done
exit "$status"
