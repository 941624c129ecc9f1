"""wheelops' benchmarks: wheelops against eager PyTorch and torch.compile (run), and what
importing wheelops and each op's first call cost (import_time, first_call). Each runs
from the checkout's root as `PYTHONPATH=specs python -m benchmarks.<module>`
(benchmarks/README.md), and measures the wheelops installed for that Python: the
checkout's own package is in src/, which is not on the import path unless asked for.
"""
