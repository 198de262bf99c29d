"""Issue 17: well-known public programs, re-expressed in tapegrad and in PyTorch, timed.

``python -m bench.programs`` runs every program in both systems, checks that their losses agree
step by step, and times them warm (steady state, per step) and cold (the first run in a fresh
process: building the model and the first ``STEPS`` steps). See ``bench/programs/__main__.py``.

Each program module holds both versions side by side and provides:

- ``SOURCE``: the public program it re-expresses (same layers, loss, optimizer and loop, at
  sizes that run in seconds on 2 cores);
- ``STEPS``: the steps of the first run (timed cold, and compared between the systems);
- ``data() -> dict``: the inputs and initial weights as NumPy arrays, made locally from a seed
  (nothing is downloaded: stand-ins of the original shapes);
- ``tapegrad(d)`` and ``torch(d, dtype)``: build the program from ``d`` (model, optimizer) and
  return its ``step()``, one iteration of the loop that returns the loss as a tensor.

Each builder imports its system inside the function, so a worker process loads only one.
"""

PROGRAMS = (
    "pt_tensors",
    "pt_nn",
    "pt_optim",
    "pt_custom_function",
    "pt_dynamic_net",
    "autograd_tutorial",
    "autograd_mechanics",
    "micrograd_readme",
    "micrograd_moons",
    "d2l_autodiff",
    "makemore_mlp",
    "min_char_rnn",
    "gpt_head",
    "nn_scratch",
    "nn_refactored",
    "nanogpt",
)
"""The program modules of ``bench.programs``, in table order."""
