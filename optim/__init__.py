"""optim: Muon, Scion and SR-AdamW for PyTorch (see optim/README.md). Never imports scalelab."""

__version__ = "0.1.0"

from . import lmo, norms
from ._validate import check_saved_settings
from .adamw import AdamW
from .distributed import ddp_matrix_apply, fsdp_matrix_apply
from .muon import Muon
from .newton_schulz import newton_schulz
from .routing import muon_param_groups
from .scion import Scion, scion_param_groups
from .stochastic_rounding import stochastic_round_

__all__ = ["AdamW", "Scion", "scion_param_groups", "stochastic_round_", "lmo", "norms"]
__all__ += ["newton_schulz", "Muon", "muon_param_groups", "ddp_matrix_apply", "fsdp_matrix_apply"]
__all__ += ["check_saved_settings"]
