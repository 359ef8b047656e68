"""Where a run's config, tokenizer and model come from: a local folder or file, or a Hub id. A source that is not there
is refused in one line (transformers' own messages for a missing path or an offline Hub id are misleading), before
torch loads (`first_answers`) and again where the run loads it (`building`). Standard library and huggingface_hub
only."""

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .errors import ScriptError

# "name" or "namespace/name": what the Hub accepts as a repository id.
HUB_ID_PATTERN = re.compile(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?")


def check_model_source(
    source: str, option: str, filename: str, cache_dir: str | None = None, revision: str | None = None
) -> None:
    """
    Check that `source` is a local folder or file, or a Hub id that can be loaded: refuse a missing local path and,
    when the Hub is offline, a Hub id that is not in the cache.

    Args:
        source (`str`): the folder, file or Hub id given.
        option (`str`): the argument that named it, for the message.
        filename (`str`): a file every such source holds (`"vocab.txt"`, `"config.json"`), looked up in the cache.
        cache_dir (`str`, *optional*): `--cache_dir`.
        revision (`str`, *optional*): `--model_revision`.
    """
    if Path(source).exists():
        return
    if not HUB_ID_PATTERN.fullmatch(source) or source.startswith("."):
        raise ScriptError(f"{option} {source}: no such folder or file.")
    from huggingface_hub import constants, try_to_load_from_cache  # a Hub id: 0.2 s of imports a local path saves

    if not constants.HF_HUB_OFFLINE:
        return
    cached = try_to_load_from_cache(source, filename, cache_dir=cache_dir, revision=revision)
    if not isinstance(cached, str):
        raise ScriptError(
            f"{option} {source}: there is no such local folder, and the Hub model {source} is not in the cache while "
            "the Hub is offline (HF_HUB_OFFLINE=1): give a local folder, or download it once with the network on."
        )


def check_tokenizer_source(values: Mapping[str, Any]) -> str:
    """
    The tokenizer a run loads (`--tokenizer_name`: a folder, a vocab.txt or a Hub id; else `--model_name_or_path`),
    checked: a `.txt` that is not a file, a source that is not there (`check_model_source`), a folder without a
    vocab.txt are refused. `values` holds the model arguments.
    """
    source = values["tokenizer_name"] or values["model_name_or_path"]
    option = "--tokenizer_name" if values["tokenizer_name"] else "--model_name_or_path"
    if source.endswith(".txt") and not Path(source).is_file():
        raise ScriptError(f"{option} {source}: no such file.")
    check_model_source(source, option, "vocab.txt", values.get("cache_dir"), values.get("model_revision"))
    if Path(source).is_dir() and not (Path(source) / "vocab.txt").is_file():
        raise ScriptError(
            f"{option} {source} holds no vocab.txt, so it is not a tokenizer folder: give the folder a tokenizer "
            "was saved in, or a vocab.txt."
        )
    return source


def check_config_source(values: Mapping[str, Any]) -> str | None:
    """The config a run starts from (`--config_name`, else `--model_name_or_path`, else none: from scratch), checked
    by `check_model_source`. `values` holds the model arguments."""
    source = values["config_name"] or values["model_name_or_path"]
    if source is not None:
        option = "--config_name" if values["config_name"] else "--model_name_or_path"
        check_model_source(source, option, "config.json", values.get("cache_dir"), values.get("model_revision"))
    return source
