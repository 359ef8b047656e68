"""int8 serving on the CPU: every Linear layer of a model with int8 weights (one scale per output row) and its
activations quantized to int8 per call (one scale per token), so the matrix products run on int8 instructions
(`avx512_vnni`, `amx_int8`).

The supported route is torchao's `Int8DynamicActivationInt8WeightConfig` (`pip install "roformer_hf[int8]"`), in
two forms: `load_int8(path)` loads a checkpoint through transformers' `TorchAoConfig`, whose model `save_pretrained`
saves and `from_pretrained` reloads to the same logits; `quantize_int8(model)` quantizes a model in memory with
torchao's `quantize_` (the same int8 layers, the same logits), which transformers cannot save (`save_pretrained`
refuses it in one line, naming `load_int8`). torch's own `torch.ao.quantization.quantize_dynamic` is deprecated ("will
be removed") and is kept only as the fallback where torchao is not installed: both functions then say so in one
warning, instead of torch's several lines. docs/serving.md compares both with float32.
"""

import logging
import os
import warnings

import torch
from torch import nn

FALLBACK_WARNING = (
    "torchao is not installed: int8 through torch.ao.quantization.quantize_dynamic, which torch deprecates and will "
    "remove; `pip install 'roformer_hf[int8]'` (torchao) for the supported route."
)


def quantize_int8(model: nn.Module) -> nn.Module:
    """Quantize the Linear layers of `model` for int8 serving on the CPU, in place.

    Args:
        model (`nn.Module`):
            A float32 model on the CPU, for inference (`model.eval()`); a quantized model does not train.

    Returns:
        `nn.Module`: `model`, its Linear layers quantized (torchao's int8 weights and per-call int8 activations; without
        torchao, torch's deprecated dynamic quantization, with a warning that says so).
    """
    quantize, int8_config = torchao_int8()
    if quantize is None:
        warnings.warn(FALLBACK_WARNING, UserWarning, stacklevel=2)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch's deprecation lines: ours above says it once
            return torch.ao.quantization.quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8, inplace=True)
    quantize(model, int8_config())
    return model


def load_int8(
    pretrained_model_name_or_path: str | os.PathLike, model_class: type | None = None, **kwargs
) -> nn.Module:
    """Load a checkpoint with int8 Linear layers for serving on the CPU, in a form that saves: through transformers'
    `TorchAoConfig(Int8DynamicActivationInt8WeightConfig())` where torchao is installed (`save_pretrained` writes it,
    `from_pretrained` reads it back to the same logits); without torchao, the float32 model through `quantize_int8`'s
    fallback, which does not save.

    Args:
        pretrained_model_name_or_path (`str` or `os.PathLike`):
            A checkpoint (a folder or a Hub id) in float32.
        model_class (`type`, *optional*):
            The class to load it as (`RoFormerForSequenceClassification`, `AutoModelForMaskedLM`, ...); by default
            transformers' `AutoModelForSequenceClassification`.
        kwargs:
            Passed to `from_pretrained` (`trust_remote_code`, `revision`, ...).

    Returns:
        `nn.Module`: the model in eval mode, its Linear layers int8.
    """
    if model_class is None:
        from transformers import AutoModelForSequenceClassification as model_class
    quantize, int8_config = torchao_int8()
    if quantize is None:
        model = model_class.from_pretrained(pretrained_model_name_or_path, **kwargs).eval()
        return quantize_int8(model)
    from transformers import TorchAoConfig

    quantization = TorchAoConfig(int8_config())
    return model_class.from_pretrained(
        pretrained_model_name_or_path, quantization_config=quantization, **kwargs
    ).eval()


def torchao_int8():
    """torchao's `quantize_` and `Int8DynamicActivationInt8WeightConfig`, or `(None, None)` without torchao.

    A CPU build of torch cannot load torchao's CUDA libraries, which torchao logs as a warning on import: nothing a
    CPU user can act on, so it is not shown.
    """
    torchao_logger = logging.getLogger("torchao")
    level = torchao_logger.level
    torchao_logger.setLevel(logging.ERROR)
    try:
        from torchao.quantization import Int8DynamicActivationInt8WeightConfig, quantize_
    except ImportError:
        return None, None
    finally:
        torchao_logger.setLevel(level)
    return quantize_, Int8DynamicActivationInt8WeightConfig


__all__ = ["FALLBACK_WARNING", "load_int8", "quantize_int8"]
