#!/usr/bin/env bash
# Run the whole test suite (GPU tests included) against a built wheel on a CUDA
# machine, with that machine's own torch and no network:
#
#   tools/gpu_tests.sh [path/to/wheelops-*.whl] [pytest args...]
#
# The wheel defaults to the first in dist/repaired/{universal,cu130}/, then
# dist/{universal,cu130}/. It is installed (without
# dependencies) into a temporary directory, never over the machine's packages.
# Dev-mode tests build from this checkout with the machine's CUDA toolkit: the
# PyPI one next to torch, or CUDA_HOME (set here to /usr/local/cuda if unset
# and present). If $OUT is set, the JUnit report and a summary JSON go there
# (named $WHEELOPS_REPORT_NAME.xml / -summary.json, default gpu-tests), and the
# property tests' example counts to $OUT/$WHEELOPS_REPORT_NAME-examples.json.
# Property tests use hypothesis's "gpu" profile (250 examples a test) unless
# WHEELOPS_HYPOTHESIS_PROFILE says otherwise. WHEELOPS_TEST_LAUNCHER, if set, is
# a command prefix for pytest (tools/sanitize.sh uses it for compute-sanitizer).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
wheel="${1:-}"
[[ $# -gt 0 ]] && shift
if [[ -z "$wheel" ]]; then
  for candidate in "$repo"/dist/{repaired/,}{universal,cu130}/wheelops-*.whl; do
    if [[ -f "$candidate" ]]; then wheel="$candidate"; break; fi
  done
  [[ -n "$wheel" ]] || { echo "no wheel given and none in dist/{repaired/,}{universal,cu130}" >&2; exit 2; }
fi
site="$(mktemp -d)"
python3 -m pip install --quiet --no-deps --no-index --no-compile --target "$site" "$wheel"
if [[ -z "${CUDA_HOME:-}" && -x /usr/local/cuda/bin/nvcc ]]; then
  export CUDA_HOME=/usr/local/cuda
fi
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" WHEELOPS_TEST_INSTALLED=1
export WHEELOPS_HYPOTHESIS_PROFILE="${WHEELOPS_HYPOTHESIS_PROFILE:-gpu}"
name="${WHEELOPS_REPORT_NAME:-gpu-tests}"
report="${OUT:-$site}/$name.xml"
export WHEELOPS_EXAMPLE_LOG="${OUT:-$site}/$name-examples.json"
read -r -a launcher <<<"${WHEELOPS_TEST_LAUNCHER:-}"
python3 - <<'PY'
import torch
print(f"torch {torch.__version__} CUDA {torch.version.cuda};",
      f"GPU {torch.cuda.get_device_name() if torch.cuda.is_available() else 'none'}")
PY
cd "$site"
status=0
"${launcher[@]}" python3 -m pytest "$repo/tests" -ra -p no:cacheprovider --junitxml="$report" "$@" \
  || status=$?
python3 - "$report" "$status" "$name" <<'PY'
import json, os, sys, xml.etree.ElementTree as ET
summary = {}
if os.path.exists(sys.argv[1]):  # pytest killed by a timeout writes none
    suite = ET.parse(sys.argv[1]).getroot()
    suite = suite if suite.tag == "testsuite" else suite[0]
    summary = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
summary["exit_status"] = int(sys.argv[2])
print("summary:", json.dumps(summary))
if os.environ.get("OUT"):
    with open(os.path.join(os.environ["OUT"], f"{sys.argv[3]}-summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
PY
exit "$status"
