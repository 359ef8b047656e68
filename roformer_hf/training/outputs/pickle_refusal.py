"""One line for a pickle file that `torch.load(..., weights_only=True)` refuses to load.

Every `torch.load` of the project and of transformers' Trainer (optimizer, scheduler, RNG state of a checkpoint; a
`pytorch_model.bin` given to `convert`) passes `weights_only=True`: a file whose unpickling would call something
other than tensor and container constructors is refused before anything in it runs. torch reports it as a
`pickle.UnpicklingError` several paragraphs long that names neither the file nor what to do; this module turns it
into one line that does.
"""

import pickle
import re
from pathlib import Path
from types import TracebackType

# the start of torch's message for a file weights_only refuses
REFUSAL_MARK = "Weights only load failed"


def is_refused_pickle(error: BaseException) -> bool:
    """Whether `error` is torch's refusal of a file whose unpickling would run code."""
    return isinstance(error, pickle.UnpicklingError) and REFUSAL_MARK in str(error)


def refused_pickle_message(error: BaseException, path: str | Path | None = None, fix: str = "") -> str:
    """
    The one line for a refused file: which file (`path`, else the one `torch.load` was reading when it raised),
    what its unpickling would have called, that nothing ran, and `fix`.

    Args:
        error (`BaseException`): the refusal (`is_refused_pickle(error)`).
        path (`str` or `Path`, *optional*): the file, when the caller knows it.
        fix (`str`, *optional*): what to do instead, appended to the message.
    """
    path = path or _file_being_loaded(error.__traceback__) or "a checkpoint file"
    called = re.search(r"GLOBAL ([\w.]+)", str(error))
    what = f"would call {called.group(1)}" if called else "would run code"
    return (
        f"{path} is not a plain tensor file: unpickling it {what}, so it was not loaded and nothing in it ran; "
        f"{fix or 'use a file from a source you trust, saved with torch.save of tensors only, or safetensors.'}"
    )


def _file_being_loaded(traceback: TracebackType | None) -> str | None:
    # torch's message does not name the file: read it from the frame of torch.load that raised the error
    while traceback is not None:
        frame = traceback.tb_frame
        if frame.f_code.co_name == "load" and frame.f_globals.get("__name__") == "torch.serialization":
            loaded = frame.f_locals.get("f")
            return str(loaded) if isinstance(loaded, (str, Path)) else None
        traceback = traceback.tb_next
    return None


__all__ = ["is_refused_pickle", "refused_pickle_message"]
