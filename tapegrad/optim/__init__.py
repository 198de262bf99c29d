"""tapegrad.optim: PyTorch-style optimizers and learning-rate schedules on optax.

``SGD``, ``Adam``, ``AdamW`` and ``RMSprop`` follow PyTorch's update rules and defaults;
``Optimizer`` applies any ``optax.GradientTransformation``. ``lr_scheduler`` holds
``StepLR``, ``MultiStepLR``, ``ExponentialLR``, ``CosineAnnealingLR``, ``LambdaLR`` and
``LinearWarmup``.
"""

from tapegrad.optim import lr_scheduler
from tapegrad.optim.optimizer import Optimizer
from tapegrad.optim.rules import SGD, Adam, AdamW, RMSprop

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "lr_scheduler"]
