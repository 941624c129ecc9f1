"""The compatibility core: which native library loads here, and why not when none can.

Data flows one way: facts (+ matrix) -> policy (its rules in rules/) -> loader / doctor;
docs/design.md's table of the core names each module, in that order.

Modules here import each other relatively and never import torch at module level
or anything outside this folder, so the build loads them without the package.
"""
