"""The built-in ops, one module per family; each op is a forward/VJP pair (docs/style.md)."""

from tapegrad.ops.activation import *  # noqa: F403
from tapegrad.ops.adaptive_pool import *  # noqa: F403
from tapegrad.ops.attention import *  # noqa: F403
from tapegrad.ops.bag import *  # noqa: F403
from tapegrad.ops.binary import *  # noqa: F403
from tapegrad.ops.conv import *  # noqa: F403
from tapegrad.ops.indexing import *  # noqa: F403
from tapegrad.ops.linalg import *  # noqa: F403
from tapegrad.ops.loss import *  # noqa: F403
from tapegrad.ops.matrix import *  # noqa: F403
from tapegrad.ops.nn import *  # noqa: F403
from tapegrad.ops.nondiff import *  # noqa: F403
from tapegrad.ops.norm import *  # noqa: F403
from tapegrad.ops.pool import *  # noqa: F403
from tapegrad.ops.random import *  # noqa: F403
from tapegrad.ops.recurrent import *  # noqa: F403
from tapegrad.ops.reduce import *  # noqa: F403
from tapegrad.ops.resize import *  # noqa: F403
from tapegrad.ops.shape import *  # noqa: F403
from tapegrad.ops.special import *  # noqa: F403
from tapegrad.ops.unary import *  # noqa: F403
