#!/usr/bin/env bash
# The reliability runs of docs/reliability.md, on a CUDA machine with its own
# torch, against a built wheel:
#
#   tools/reliability_run.sh [path/to/wheelops-*.whl] [stage...]
#
# Stages (default: tests huge sanitize):
#   tests     the GPU suite but the huge and two-GPU tests, property tests with
#             hypothesis's "gpu" profile          -> gpu-tests.xml, gpu-tests-examples.json*
#   huge      the tests over 2**31 elements (about 60 GiB of GPU memory at most)
#                                                 -> huge-tests.xml
#   multi     the two-GPU tests (cuda:1, DDP over NCCL); needs two GPUs
#                                                 -> multi-gpu.xml
#   sanitize  tools/sanitize.sh (memcheck, racecheck, initcheck, synccheck)
#                                                 -> sanitizer-*.xml, sanitizer-summary.json
# Results go to $OUT (default: a new temporary directory, printed), with
# environment.json; `python tools/reliability_report.py $OUT` makes the tables.
# Extra pytest arguments: $PYTEST_ARGS.
set -uo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
wheel=""
if [[ $# -gt 0 && "$1" == *.whl ]]; then wheel="$1"; shift; fi
stages=("$@")
[[ ${#stages[@]} -gt 0 ]] || stages=(tests huge sanitize)
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
status=0
for stage in "${stages[@]}"; do
  start=$SECONDS rc=0
  case "$stage" in
    tests) WHEELOPS_REPORT_NAME=gpu-tests "$repo/tools/gpu_tests.sh" "$wheel" -q \
             -m "not huge and not multi_gpu" "${extra[@]}" > "$OUT/gpu-tests.log" 2>&1 || rc=$? ;;
    huge) WHEELOPS_REPORT_NAME=huge-tests "$repo/tools/gpu_tests.sh" "$wheel" -q \
            -m huge "${extra[@]}" > "$OUT/huge-tests.log" 2>&1 || rc=$? ;;
    multi) WHEELOPS_REPORT_NAME=multi-gpu "$repo/tools/gpu_tests.sh" "$wheel" -q \
             -m multi_gpu "${extra[@]}" > "$OUT/multi-gpu.log" 2>&1 || rc=$? ;;
    sanitize) "$repo/tools/sanitize.sh" "$wheel" "${extra[@]}" > "$OUT/sanitizer.log" 2>&1 || rc=$? ;;
    *) echo "unknown stage: $stage (tests, huge, multi, sanitize)" >&2; exit 2 ;;
  esac
  echo "$stage: exit $rc in $((SECONDS - start)) s"
  [[ $rc -eq 0 ]] || status=1
done
exit "$status"
