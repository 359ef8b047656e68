"""What the rewritten imports of transformers' RoFormer tests read: roformer_hf's class of each name.

`tests/run_transformers_suite.py` rewrites `from transformers import RoFormerModel` (and the imports of
`transformers.models.roformer.*`) into `from roformer_hf_imports import RoFormerModel`; this module, copied beside the
suite, answers each name with roformer_hf's object of that name. A name roformer_hf does not have (transformers'
internals such as `RoFormerSinusoidalPositionalEmbedding`) becomes a stand-in that raises when a test uses it, so
only the tests that use it fail, each with a message naming the missing piece, and the module still imports.
"""

import importlib
import os

# Where roformer_hf keeps its classes, searched in this order.
OUR_MODULES = ("roformer_hf", "roformer_hf.modeling", "roformer_hf.configuration")
# With the script's `--against transformers` (this variable set), every name is answered by transformers' RoFormer
# instead, so that the same tests measure theirs; our names that transformers spells otherwise are translated.
AGAINST_TRANSFORMERS = os.environ.get("ROFORMER_HF_SUITE_AGAINST") == "transformers"
THEIR_MODULES = ("transformers", "transformers.models.roformer.modeling_roformer")
THEIR_NAMES = {"RoFormerJiebaTokenizer": "RoFormerTokenizer"}


class MissingFromRoformerHF(NotImplementedError):
    """Raised when a test uses a transformers name that roformer_hf has no counterpart for."""


def missing_stand_in(name: str) -> type:
    """A class that raises `MissingFromRoformerHF` on construction and on any class attribute a test reads."""
    message = f"roformer_hf has no {name} (a transformers RoFormer internal; see tests/run_transformers_suite.py)"

    class StandInMeta(type):
        def __getattr__(cls, attribute):
            raise MissingFromRoformerHF(f"{message}: {name}.{attribute}")

    class StandIn(metaclass=StandInMeta):
        def __init__(self, *args, **kwargs):
            raise MissingFromRoformerHF(message)

    StandIn.__name__ = StandIn.__qualname__ = name
    return StandIn


def find_ours(name: str) -> object | None:
    """roformer_hf's object called `name` (transformers' with `--against transformers`), or None."""
    if AGAINST_TRANSFORMERS:
        modules, name = THEIR_MODULES, THEIR_NAMES.get(name, name)
    else:
        modules = OUR_MODULES
    for module_name in modules:
        module = importlib.import_module(module_name)
        if hasattr(module, name):
            return getattr(module, name)
    return None


def __getattr__(name: str) -> object:
    if name.startswith("__"):
        raise AttributeError(name)
    ours = find_ours(name)
    return ours if ours is not None else missing_stand_in(name)
