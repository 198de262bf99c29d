"""tapegrad.optim: PyTorch-style optimizers and learning-rate schedules on optax.

``SGD``, ``Adam``, ``AdamW``, ``RMSprop`` and ``Adagrad`` follow PyTorch's update rules and
defaults; ``Optimizer`` applies any ``optax.GradientTransformation``. ``lr_scheduler`` holds
``StepLR``, ``MultiStepLR``, ``ExponentialLR``, ``CosineAnnealingLR``, ``LambdaLR``,
``LinearLR``, ``LinearWarmup``, ``OneCycleLR`` and ``ReduceLROnPlateau``.
"""

from tapegrad.optim import lr_scheduler
from tapegrad.optim.optimizer import Optimizer
from tapegrad.optim.rules import SGD, Adagrad, Adam, AdamW, RMSprop

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "lr_scheduler"]
