"""Exception types raised by tapegrad; each subclasses the built-in type docs/api.md promises."""

from __future__ import annotations

__all__ = [
    "TapegradWarning",
    "GraphConsumedError",
    "NonScalarBackwardError",
    "NoGradError",
    "TracerError",
    "RetraceWarning",
    "InPlaceError",
    "ShapeError",
    "VJPShapeError",
    "DuplicateOpError",
    "MissingVJPError",
    "AnomalyError",
    "TapeMismatchError",
    "DeviceError",
]


class TapegradWarning(UserWarning):
    """A warning issued by tapegrad itself (the test suite turns these into errors)."""


class GraphConsumedError(RuntimeError):
    """A backward pass met a node whose VJP already ran without ``retain_graph=True``."""


class NonScalarBackwardError(RuntimeError):
    """``backward()`` was called without ``grad`` on a tensor that does not imply one: a
    multi-element or a complex tensor."""


class NoGradError(RuntimeError):
    """``backward()``/``grad()`` started from a tensor that does not require grad."""


class TracerError(RuntimeError):
    """An op that would be recorded on the tape received a JAX tracer (docs/design.md rule 9)."""


class InPlaceError(RuntimeError):
    """An in-place operator was applied to a tensor that requires grad under grad mode."""


class ShapeError(ValueError):
    """Operand shapes do not fit an op (broadcasting, matmul, reshape, gradient shape)."""


class VJPShapeError(RuntimeError):
    """A VJP rule returned a cotangent that cannot be reduced to its input's shape."""

    @classmethod
    def of(cls, op: str, got: tuple[int, ...], index: int, want: tuple[int, ...]) -> VJPShapeError:
        """The error for a cotangent of shape ``got`` for input ``index`` of shape ``want``."""
        return cls(
            f"VJP of {op!r} returned shape {tuple(got)} for input {index}, expected {want}; "
            "return one cotangent per input in the input's (or the output's broadcast) shape."
        )


class DuplicateOpError(ValueError):
    """Two built-in ops were registered under the same name."""


class MissingVJPError(NotImplementedError):
    """A differentiable op was recorded but has no VJP rule."""


class RetraceWarning(TapegradWarning):
    """A ``tg.jit`` step keeps compiling: an argument's shape or a static value keeps changing."""


class AnomalyError(RuntimeError):
    """Under ``tg.detect_anomaly()``, a backward produced NaN or inf (the message names the op)."""


class TapeMismatchError(RuntimeError):
    """An op or a backward mixed tensors recorded on different tapes."""


class DeviceError(ValueError):
    """A tensor was placed on a device this process does not have, with a sharding that does
    not fit its shape, or an op mixed tensors on devices no sharding relates."""


def donated_error(what: str) -> RuntimeError:
    """The error for using an array a ``tg.jit`` step donated (JAX deleted it): what
    happened and what to do, in place of JAX's bare "Array has been deleted"."""
    return RuntimeError(
        f"{what}: this tensor's array was donated to a tg.jit step (with donate=True a step "
        "reuses the memory of the parameter and optimizer arrays it replaces, as jax.jit "
        "donation does), so it holds no value any more. An array taken with .data, "
        ".detach() or state_dict() before the call is donated with its parameter: keep a "
        "copy first (t.clone(), copy.deepcopy(model.state_dict()), t.numpy(), or "
        "tg.save(model.state_dict(), path)), or compile the step with tg.jit(donate=False)."
    )


def raise_instead(error: BaseException | None) -> None:
    """Raise ``error`` in place of the exception being handled (``from None``), unless it is
    ``None``.

    Pass the error straight from the call that makes it, not from a local variable: a frame
    that keeps the error its traceback holds is a reference cycle, and what the frame holds
    (an op's inputs, a step's model) would live until the next garbage collection."""
    if error is None:
        return
    try:
        raise error from None
    finally:
        del error  # nor does this frame keep it
