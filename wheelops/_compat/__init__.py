"""The compatibility core: which native library loads here, and why not when none can.

Data flows one way: facts (+ matrix) -> policy -> loader / doctor.

    archs, elf     pure readers: TORCH_CUDA_ARCH_LIST and coverage; ELF headers
    links          what a library links and defines (the build, the doctor's probe)
    facts          the build facts (one record, one reader, one writer), this process
    probes         GPUs, driver, C++ compilers: read by the doctor (a GPU at its first use)
    matrix         the one model of matrix.json, shared with the build tooling
    dlerror        the loader's own words, classified
    policy         evaluate(build, runtime, matrix, gpus, load_failures) -> Report
    loader         finds libraries, asks policy, dlopens, keeps one state
    doctor         renders a Report (`python -m wheelops`)

Modules here import each other relatively and never import torch at module level
or anything outside this folder, so the build loads them without the package.
"""
