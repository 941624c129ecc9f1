"""wheelops' benchmarks: wheelops against eager PyTorch and torch.compile (run), and what
importing wheelops and each op's first call cost (import_time, first_call). Each runs
from the checkout's root as `PYTHONPATH=specs python -m benchmarks.<module>`
(benchmarks/README.md).

They measure the installed wheelops, never the source tree beside them: `python -m`
puts the checkout's root first on sys.path, where its wheelops/ would shadow the wheel's,
so wheelops is imported here, before any module of the package or the op descriptions
(specs/opspecs) imports it, from sys.path without the checkout (installed.py).
"""

from .installed import import_wheelops

import_wheelops()
