"""roformer_hf: the RoFormer model family for the Hugging Face ecosystem.

Importing the package registers every class with transformers' Auto classes under model_type "roformer_hf",
beside (never instead of) transformers' own "roformer".
"""

from .configuration import RoFormerConfig

__version__ = "0.1.0"

__all__ = ["RoFormerConfig"]
