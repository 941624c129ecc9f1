"""Built wheels into checked artifacts: repair, relabel, native checks, SBOM, index, emulation."""
