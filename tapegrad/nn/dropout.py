"""``Dropout``: zero activations at random while training (``tg.dropout``); ``Dropout1d`` and
``Dropout2d``, ``Dropout3d``: zero whole channels (``tg.dropout1d``/``2d``/``3d``)."""

from __future__ import annotations

from typing import Any

from tapegrad import ops
from tapegrad._args import fraction
from tapegrad._tensor import Tensor
from tapegrad.nn.module import Module
from tapegrad.random import key_of, split_key

__all__ = ["Dropout", "Dropout1d", "Dropout2d", "Dropout3d"]


def check_p(owner: str, p: float) -> float:
    """``p`` as a float when it is a number in ``[0, 1]`` (``_args.fraction``).

    Raises:
        TypeError: ``p`` is not a number (a string, ``None``, a bool), naming ``owner``.
        ValueError: ``p`` outside ``[0, 1]``, naming ``owner``.
    """
    return fraction(p, f"{owner}: dropout probability")


class Dropout(Module):
    """While ``training``, zero each element with probability ``p`` and scale the rest by
    ``1 / (1 - p)``; in ``eval()`` mode, the identity.

    Args:
        p: the probability of zeroing an element, in ``[0, 1]``.
        key: an int seed or a key for the masks: the layer keeps its own key (an array
            attribute) and splits it once per call, so the masks are reproducible and each
            call's is fresh, also inside a ``tg.jit`` step (which carries the key as state).
            ``None`` (the default) draws each mask from the process random state, so
            ``tg.manual_seed`` makes a run reproducible.
        inplace: accepted for PyTorch's signature (``nn.Dropout(p, inplace=True)``) and
            changes nothing: the input is never written into, use the returned value.

    Raises:
        ValueError: ``p`` outside ``[0, 1]``.
    """

    def __init__(self, p: float = 0.5, inplace: bool = False, *, key: Any = None) -> None:
        super().__init__()
        self.p = check_p(type(self).__name__, p)
        self.inplace = bool(inplace)
        self._key = None if key is None else key_of(key)

    def forward(self, x: Tensor) -> Tensor:
        """``x`` with dropout applied (unchanged in ``eval()`` mode or with ``p == 0``)."""
        if not self.training or self.p == 0.0:
            return x
        return ops.dropout(x, self.p, training=True, key=self._next_key())

    def _next_key(self) -> Any:
        """This call's mask key: the layer's own key split once, or ``None`` (process state)."""
        key = None
        if self._key is not None:
            self._key, key = split_key(self._key)
        return key

    def extra_repr(self) -> str:
        return f"p={self.p}" + (", inplace=True" if self.inplace else "")


class Dropout1d(Dropout):
    """While ``training``, zero each channel of x ``(N, C, L)`` or ``(C, L)`` whole with
    probability ``p`` and scale the rest by ``1 / (1 - p)``; in ``eval()`` mode, the identity
    (``tg.dropout1d``). Arguments as ``Dropout`` (``p`` the probability of zeroing a channel;
    ``key``; ``inplace`` accepted and ignored).

    Raises:
        ValueError: ``p`` outside ``[0, 1]``.
        ShapeError: at call time, an input that is not 2- or 3-D (in ``eval()`` mode too, as
            PyTorch).
    """

    def forward(self, x: Tensor) -> Tensor:
        """``x`` with whole channels dropped (unchanged in ``eval()`` mode or with ``p == 0``)."""
        training = self.training and self.p != 0.0
        return ops.dropout1d(
            x, self.p, training=training, key=self._next_key() if training else None
        )


class Dropout2d(Dropout):
    """While ``training``, zero each channel of x ``(N, C, H, W)`` or ``(C, H, W)`` whole with
    probability ``p`` and scale the rest by ``1 / (1 - p)``; in ``eval()`` mode, the identity
    (``tg.dropout2d``; a 3-D input is one image ``(C, H, W)``, where PyTorch 2.x still drops
    per ``(x.shape[0], x.shape[1])`` with a warning: use ``Dropout1d`` for that). Arguments
    as ``Dropout``.

    Raises:
        ValueError: ``p`` outside ``[0, 1]``.
        ShapeError: at call time, an input that is not 3- or 4-D (in ``eval()`` mode too).
    """

    def forward(self, x: Tensor) -> Tensor:
        """``x`` with whole channels dropped (unchanged in ``eval()`` mode or with ``p == 0``)."""
        training = self.training and self.p != 0.0
        return ops.dropout2d(
            x, self.p, training=training, key=self._next_key() if training else None
        )


class Dropout3d(Dropout):
    """While ``training``, zero each channel of x ``(N, C, D, H, W)`` or ``(C, D, H, W)`` whole
    with probability ``p`` and scale the rest by ``1 / (1 - p)``; in ``eval()`` mode, the
    identity (``tg.dropout3d``). Arguments as ``Dropout``.

    Raises:
        ValueError: ``p`` outside ``[0, 1]``.
        ShapeError: at call time, an input that is not 4- or 5-D (in ``eval()`` mode too).
    """

    def forward(self, x: Tensor) -> Tensor:
        """``x`` with whole channels dropped (unchanged in ``eval()`` mode or with ``p == 0``)."""
        training = self.training and self.p != 0.0
        return ops.dropout3d(
            x, self.p, training=training, key=self._next_key() if training else None
        )
