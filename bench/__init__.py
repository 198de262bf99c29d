"""Benchmarks of tapegrad against raw JAX and the peers users would pick instead.

Each module is one command: ``python -m bench.engine`` (issue 2: op and backward overhead),
``python -m bench.tape`` (issue 3: seed loop, cleanup speed, graph memory) and
``python -m bench.peers`` (issue 6: tapegrad against PyTorch, JAX, HIPS autograd and MyGrad,
each system in its own process). ``--quick`` runs every case once at tiny sizes (a smoke run,
not a measurement); ``--json PATH`` writes the figures for ``bench/bench_report.py``.
Importing this package imports nothing else.
"""
