"""Dependencies point one way (docs/design.md "Layout"): ``import tapegrad`` loads neither rich
nor diagnostics, the engine imports only jax and NumPy, ``tape.py`` imports no tapegrad
module but its parts (``node``, ``census``) and leaf modules, and each tapegrad module
imports only modules below it. Imports are read with ``ast`` (function-level ones too;
``if TYPE_CHECKING:`` blocks never run)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import tapegrad

PACKAGE = Path(tapegrad.__file__).parent

# Rank of every tapegrad module: a module may import only modules of a lower rank.
RANK = {
    "tapegrad.errors": 0,
    "tapegrad.grad_mode": 0,
    "tapegrad._arrays": 1,
    "tapegrad._placement": 1,
    "tapegrad.launch": 1,  # starts processes; imports only jax
    "tapegrad.compilation_cache": 0,
    "tapegrad.kernels": 0.5,  # jax.jit with a store in the compilation cache's folder
    "tapegrad._dtypes": 0.25,  # warns (errors, origin) about a float64 with x64 off
    "tapegrad._args": 0.5,  # raises through errors.raise_instead
    "tapegrad.anomaly": 1,
    "tapegrad.origin": 0,
    "tapegrad.records": 0,
    "tapegrad.random": 1,
    "tapegrad.node": 1,
    "tapegrad.census": 2,
    "tapegrad.compiled_backward": 2,
    "tapegrad.tape": 4,
    "tapegrad.current": 5,
    "tapegrad._tensor": 6,
    "tapegrad._compare": 6,
    "tapegrad.op": 7,
    "tapegrad.creation": 7,
    "tapegrad.ops._window": 7,
    "tapegrad.derived": 7.5,  # builds Ops (rank 7); op families (rank 8) take VJPs from it
    "tapegrad.devices": 8,
    "tapegrad.ops.activation": 8,
    "tapegrad.ops.adaptive_pool": 8,
    "tapegrad.ops.attention": 8,
    "tapegrad.ops.bag": 8.5,  # embedding_bag, on indexing's checks
    "tapegrad.ops.binary": 8,
    "tapegrad.ops.conv": 8,
    "tapegrad.ops.indexing": 8,
    "tapegrad.ops.linalg": 8,
    "tapegrad.ops.matrix": 8,
    "tapegrad.ops.loss": 8.5,  # composites of the op families (rank 8) and ops.nn's advice
    "tapegrad.ops.nn": 8,
    "tapegrad.ops.nondiff": 8,
    "tapegrad.ops.norm": 8,
    "tapegrad.ops.pool": 8,
    "tapegrad.ops.random": 8,
    "tapegrad.ops.recurrent": 8,
    "tapegrad.ops.reduce": 8,
    "tapegrad.ops.resize": 8.5,  # area mode: the adaptive pools (rank 8)
    "tapegrad.ops.shape": 8,
    "tapegrad.ops.special": 8,
    "tapegrad.ops.unary": 8,
    "tapegrad.jax_op": 9,
    "tapegrad.higher": 9,
    "tapegrad.ops": 9,
    "tapegrad.backward": 10,
    "tapegrad.functional": 11,
    "tapegrad._gradcheck": 11,
    "tapegrad.testing": 12,
    "tapegrad.serialization": 10,
    # tapegrad.nn: the Module protocol and initialisers, layers, composite layers.
    "tapegrad.nn._cast": 9.5,  # below nn.module, outside the engine
    "tapegrad.nn._state": 9.5,
    "tapegrad.nn._inputs": 9.5,  # how layers take their inputs (op.as_operand)
    "tapegrad.nn._init": 10,
    "tapegrad.nn.init": 10,
    "tapegrad.nn.module": 10,
    "tapegrad.nn.utils.clip_grad": 10,
    "tapegrad.nn.utils.rnn": 10,
    "tapegrad.nn.utils": 10.5,
    "tapegrad.nn.activation": 11,
    "tapegrad.nn.container": 11,
    "tapegrad.nn.conv": 11,
    "tapegrad.nn.dropout": 11,
    "tapegrad.nn.linear": 11,
    "tapegrad.nn.loss": 11,
    "tapegrad.nn.margin_loss": 11.5,  # on nn.loss's _Loss
    "tapegrad.nn.ctc": 11.5,  # on nn.loss's _Loss
    "tapegrad.nn.distance": 11,
    "tapegrad.nn.normalization": 11,
    "tapegrad.nn.param_containers": 11,
    "tapegrad.nn.pooling": 11,
    "tapegrad.nn.shape": 11,
    "tapegrad.nn.sparse": 11,
    "tapegrad.nn.upsampling": 11,
    "tapegrad.nn.attention": 12,
    "tapegrad.nn.rnn": 12,
    "tapegrad.nn.transformer": 13,
    "tapegrad.nn": 14,
    # tapegrad.optim: the optimizer machinery, the rules and the schedules on it.
    "tapegrad.optim.optimizer": 10,
    "tapegrad.optim.rules": 11,
    "tapegrad.optim.lr_scheduler": 11,
    "tapegrad.optim": 12,
    "tapegrad._discover": 12,  # walks modules, optimizers and schedulers
    "tapegrad.jit": 13,
    "tapegrad": 15,
}
ENGINE = {name for name, rank in RANK.items() if rank <= 9} | {"tapegrad.backward"}
# Tensor's methods delegate to ops and backward, which build on Tensor: _tensor.py imports
# them last, after the class is defined (the one documented cycle).
LATE = {("tapegrad._tensor", "tapegrad.backward"), ("tapegrad._tensor", "tapegrad.op")}
LATE |= {("tapegrad._tensor", "tapegrad.ops")}
THIRD_PARTY = {"jax", "jaxlib", "numpy"}
# The well-kept libraries a module outside the engine builds on (by its top-level package).
OUTSIDE_ENGINE = {"optim": {"optax"}, "serialization": {"safetensors"}, "nn": {"optax"}}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def runtime_imports(path: Path) -> list[tuple[str, int]]:
    """(imported module, line) for every import that runs (skips ``if TYPE_CHECKING:``)."""
    tree = ast.parse(path.read_text(), str(path))
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    found: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "__future__":
                continue
            for alias in node.names:  # `from tapegrad import op` imports tapegrad.op
                sub = f"{node.module}.{alias.name}"
                found.append((sub if sub in RANK else node.module, node.lineno))
        elif isinstance(node, ast.ImportFrom) and node.level:
            pytest.fail(f"{path}:{node.lineno}: relative import; use absolute imports")
    return found


MODULES = sorted(PACKAGE.rglob("*.py"))


def test_every_module_has_a_rank() -> None:
    names = {module_name(p) for p in MODULES}
    assert names == set(RANK), "new or removed tapegrad module: give it a rank in RANK"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: module_name(p))
def test_imports_point_down(path: Path) -> None:
    me = module_name(path)
    stdlib = sys.stdlib_module_names
    for imported, line in runtime_imports(path):
        top = imported.split(".")[0]
        where = f"{path.name}:{line} imports {imported}"
        assert top not in ("rich", "diagnostics"), f"{where}: tapegrad never imports it"
        if top == "tapegrad":
            target = imported if imported in RANK else imported.rsplit(".", 1)[0]
            assert target in RANK, where
            if (me, target) in LATE:
                continue
            assert RANK[target] < RANK[me], f"{where}: a module above it (or beside it)"
            if me in ENGINE:
                assert target in ENGINE, f"{where}: the engine imports only engine modules"
        elif top not in stdlib:
            allowed = THIRD_PARTY | OUTSIDE_ENGINE.get(me.split(".")[1] if "." in me else me, set())
            assert top in allowed, f"{where}: the engine imports only jax and NumPy"


def test_tape_imports_no_tapegrad_module_but_its_parts_and_leaves() -> None:
    imported = {m for m, _ in runtime_imports(PACKAGE / "tape.py") if m.startswith("tapegrad")}
    parts = {"tapegrad.node", "tapegrad.census"}
    assert imported == {"tapegrad.errors", "tapegrad.origin", "tapegrad.records"} | parts
    for leaf in ("errors.py", "grad_mode.py", "origin.py", "records.py"):
        assert not [m for m, _ in runtime_imports(PACKAGE / leaf) if m.startswith("tapegrad")]


def test_tensor_late_imports_come_after_the_class() -> None:
    path = PACKAGE / "_tensor.py"
    tree = ast.parse(path.read_text())
    class_end = next(
        n.end_lineno for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Tensor"
    )
    assert class_end is not None
    late = [line for m, line in runtime_imports(path) if ("tapegrad._tensor", m) in LATE]
    assert late and all(line > class_end for line in late)


def test_import_tapegrad_loads_neither_rich_nor_diagnostics() -> None:
    code = (
        "import json, sys; import tapegrad; "
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    loaded = set(json.loads(out.stdout))
    assert "tapegrad" in loaded and "jax" in loaded
    assert not loaded & {"rich", "diagnostics", "matplotlib", "sklearn", "torch", "IPython"}


def test_the_import_reader_sees_function_level_imports_and_skips_type_checking(
    tmp_path: Path,
) -> None:
    source = tmp_path / "probe.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    import rich\n"
        "def late():\n"
        "    import diagnostics\n"
        "    from tapegrad import op\n"
    )
    assert runtime_imports(source) == [
        ("typing", 1),
        ("diagnostics", 5),
        ("tapegrad.op", 6),
    ]


def test_the_function_tg_tensor_is_not_shadowed_by_a_module() -> None:
    assert not (PACKAGE / "tensor.py").exists() and not (PACKAGE / "tensor").exists()
    assert callable(tapegrad.tensor) and tapegrad.tensor.__module__ == "tapegrad.creation"


# The Tensor's slots: only _tensor.py reads or writes them; the engine uses its interface.
SLOTS = {"_data", "_node", "_grad", "_tape"}
_BY_NAME = {"getattr", "setattr", "hasattr", "delattr", "attrgetter"}


def slot_accesses(path: Path) -> list[str]:
    """``file:line: expression`` for every access to an attribute named like a Tensor slot
    on anything but ``self`` (``t._data``, ``getattr(t, "_node")``, ``attrgetter("_grad")``)."""
    found: list[ast.expr] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Attribute) and node.attr in SLOTS:
            owner = node.value
            if not (isinstance(owner, ast.Name) and owner.id == "self"):  # a class's own
                found.append(node)
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            strings = {a.value for a in node.args if isinstance(a, ast.Constant)}
            if name in _BY_NAME and strings & SLOTS:
                found.append(node)
    return [f"{path.name}:{n.lineno}: {ast.unparse(n)}" for n in found]


def test_only_the_tensor_module_touches_the_tensor_slots() -> None:
    found = [a for p in MODULES if p.name != "_tensor.py" for a in slot_accesses(p)]
    assert not found, "use tapegrad._tensor's engine interface (ENGINE) instead:\n" + "\n".join(
        found
    )


def test_the_slot_check_sees_attributes_and_names(tmp_path: Path) -> None:
    source = tmp_path / "probe.py"
    source.write_text(
        "class A:\n"
        "    def f(self, t):\n"
        "        self._tape = t._node\n"
        "        t.x._grad = getattr(t, '_data')\n"
        "        return attrgetter('_tape'), self.other\n"
    )
    assert [a.split(": ", 1)[1] for a in slot_accesses(source)] == [
        "t._node",
        "t.x._grad",
        "getattr(t, '_data')",
        "attrgetter('_tape')",
    ]


def test_the_engine_interface_is_documented_and_internal() -> None:
    from tapegrad import _tensor

    for name in _tensor.ENGINE:
        doc = getattr(_tensor, name).__doc__
        assert doc and doc.startswith("Engine only: "), name
        assert name not in _tensor.__all__ and not hasattr(tapegrad, name), name
