"""Resizing layers (PyTorch's names): ``Upsample``, ``UpsamplingNearest2d``,
``UpsamplingBilinear2d``, ``PixelShuffle``, ``PixelUnshuffle``; each calls its ``tg.``
function (``tg.interpolate``, ``tg.pixel_shuffle``, ``tg.pixel_unshuffle``) and has no
parameters."""

from __future__ import annotations

from typing import Any

from tapegrad import ops
from tapegrad._tensor import Tensor
from tapegrad.nn.module import Module

__all__ = [
    "Upsample",
    "UpsamplingNearest2d",
    "UpsamplingBilinear2d",
    "PixelShuffle",
    "PixelUnshuffle",
]


def _floats(value: Any) -> Any:
    """A scale factor as PyTorch's ``Upsample`` keeps it: a float, or a tuple of floats."""
    if value is None:
        return None
    return tuple(float(v) for v in value) if isinstance(value, (tuple, list)) else float(value)


class Upsample(Module):
    """Resize the spatial axes of ``(N, C, *S)`` inputs (PyTorch's ``nn.Upsample``):
    ``tg.interpolate(x, size, scale_factor, mode, align_corners, recompute_scale_factor)``.

    Args:
        size: the output's spatial sizes (an int or one per axis), or
        scale_factor: a multiplier (or one per axis).
        mode: ``"nearest"`` (default), ``"nearest-exact"``, ``"linear"``, ``"bilinear"``,
            ``"trilinear"``, ``"bicubic"`` or ``"area"``.
        align_corners: for the linear and cubic modes (see ``tg.interpolate``).
        recompute_scale_factor: see ``tg.interpolate``.

    Raises:
        ValueError: at call time, as ``tg.interpolate`` (both or neither of ``size`` and
            ``scale_factor``, ``align_corners`` with a nearest mode, ...).
        ShapeError: at call time, an input whose rank the mode does not take.
    """

    def __init__(
        self,
        size: int | tuple[int, ...] | None = None,
        scale_factor: float | tuple[float, ...] | None = None,
        mode: str = "nearest",
        align_corners: bool | None = None,
        recompute_scale_factor: bool | None = None,
    ) -> None:
        super().__init__()
        self.size = size
        self.scale_factor = _floats(scale_factor)
        self.mode = mode
        self.align_corners = align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, x: Tensor) -> Tensor:
        """``x`` resized (``tg.interpolate``)."""
        return ops.interpolate(
            x,
            self.size,
            self.scale_factor,
            self.mode,
            self.align_corners,
            self.recompute_scale_factor,
        )

    def extra_repr(self) -> str:
        if self.scale_factor is not None:
            info = f"scale_factor={self.scale_factor!r}"
        else:
            info = f"size={self.size!r}"
        return f"{info}, mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    """``Upsample(size, scale_factor, mode="nearest")`` for ``(N, C, H, W)`` inputs (PyTorch's
    ``nn.UpsamplingNearest2d``)."""

    def __init__(
        self,
        size: int | tuple[int, int] | None = None,
        scale_factor: float | tuple[float, float] | None = None,
    ) -> None:
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """``Upsample(size, scale_factor, mode="bilinear", align_corners=True)`` for
    ``(N, C, H, W)`` inputs (PyTorch's ``nn.UpsamplingBilinear2d``: corners aligned)."""

    def __init__(
        self,
        size: int | tuple[int, int] | None = None,
        scale_factor: float | tuple[float, float] | None = None,
    ) -> None:
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)


class PixelShuffle(Module):
    """``(*, C r^2, H, W)`` to ``(*, C, H r, W r)`` (PyTorch's ``nn.PixelShuffle``;
    ``tg.pixel_shuffle``).

    Args:
        upscale_factor: ``r``.
    """

    def __init__(self, upscale_factor: int) -> None:
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, x: Tensor) -> Tensor:
        """``x`` rearranged (``tg.pixel_shuffle``)."""
        return ops.pixel_shuffle(x, self.upscale_factor)

    def extra_repr(self) -> str:
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """``(*, C, H r, W r)`` to ``(*, C r^2, H, W)`` (PyTorch's ``nn.PixelUnshuffle``;
    ``tg.pixel_unshuffle``).

    Args:
        downscale_factor: ``r``.
    """

    def __init__(self, downscale_factor: int) -> None:
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, x: Tensor) -> Tensor:
        """``x`` rearranged (``tg.pixel_unshuffle``)."""
        return ops.pixel_unshuffle(x, self.downscale_factor)

    def extra_repr(self) -> str:
        return f"downscale_factor={self.downscale_factor}"
