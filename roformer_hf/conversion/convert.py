"""Converts original RoFormer checkpoints into roformer_hf checkpoints.

Two sources are read:

- a transformers "roformer" checkpoint folder, the layout of the original checkpoints on the Hub
  (`config.json`, `model.safetensors` or `pytorch_model.bin`, `vocab.txt`). The parameter names are already ours;
  the sinusoidal position table (`roformer.encoder.embed_positions.weight`) is dropped, since roformer_hf computes
  RoPE from the config, and the config is rewritten with `model_type="roformer_hf"`. IDEA's Zhouwenwang, saved by
  fengshen (`bert.*` names, pre-norm layers), has its weights renamed and its architecture written into the config
  (`conversion_sources.fengshen_checkpoint`).
- an original TensorFlow checkpoint of the bert4keras RoFormer (`bert_config.json`, `bert_model.ckpt.*`,
  `vocab.txt`), a name-based TF1 checkpoint. Variables are renamed by the pure, mutually inverse functions
  `bert4keras_to_roformer_hf` and `roformer_hf_to_bert4keras` (in `conversion_sources`); kernels are transposed (TF stores `(in, out)`,
  `nn.Linear` keeps `(out, in)`). Reading it needs tensorflow: `pip install "roformer_hf[tf]"`.

A source that is not a local folder is read as a Hub model id (`junnyu/roformer_v2_chinese_char_base`): the files a
conversion needs are downloaded with huggingface_hub into its cache (`HF_HUB_OFFLINE=1` reads the cache only), at
`--revision` if given, and converted as a local transformers folder.

The output is a complete roformer_hf checkpoint: weights (safetensors), config (with the RoFormer-V2 and pooler
fields of the source: `norm_type`, `use_bias`, `pooler_activation`, `add_pooling_layer` when the source has pooler
weights; for RoFormer-Sim, a checkpoint with a pooler and an LM head, `RoFormerForCausalLM` with
`decoder_mask="unilm"`, a linear pooler and [SEP] as end of sequence), tokenizer, the model code with `auto_map` (for
`trust_remote_code=True`) and a model card. The tokenizer follows the vocabulary (see `is_word_level`):
`RoFormerJiebaTokenizer` for the word-level vocabularies, transformers' `BertTokenizer` for the char-level ones. It
is written to a temporary folder beside the output and
moved into place when whole; an existing output folder is only replaced with `--overwrite`, and only when it holds
an earlier conversion and nothing else (a user's other files are never deleted). A second conversion into the same
folder while one runs is refused (`lock_output`).

Usage:

    python -m roformer_hf.conversion.convert junnyu/roformer_v2_chinese_char_base path/to/output [--revision REV]
    python -m roformer_hf.conversion.convert path/to/chinese_roformer_L-12_H-768_A-12 path/to/output
    python -m roformer_hf.conversion.convert path/to/roformer_chinese_base path/to/output --overwrite
"""

import argparse
import json
import os
import pickle
import re
import shutil
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file
from transformers import BertTokenizer, PreTrainedTokenizerBase
from transformers.utils import logging

from .. import modeling
from ..configuration import RoFormerConfig
from ..hub.model_card import write_model_card
from ..tokenization import RoFormerJiebaTokenizer, load_vocab
from ..training.outputs.checkpoints import give_plain_modes
from ..training.outputs.locks import LOCK_FILE_NAME, FolderLock, FolderLockedError
from ..training.outputs.pickle_refusal import is_refused_pickle, refused_pickle_message
from .conversion_sources import (
    LM_HEAD,
    POOLER,
    POSITION_TABLE,
    TRANSFORMERS_WEIGHTS,
    ConversionError,
    config_from_dict,
    detect_source,
    fengshen_checkpoint,
    locate_source,
    read_bert4keras_checkpoint,
)
from .fengshen_layout import is_fengshen_layout

logger = logging.get_logger(__name__)


# ----------------------------------------------------------------------------------------------------------------
# Reading a transformers checkpoint (other sources: `conversion_sources`)
# ----------------------------------------------------------------------------------------------------------------


def read_transformers_checkpoint(folder: Path) -> tuple[RoFormerConfig, dict[str, torch.Tensor]]:
    """The config and weights of a transformers "roformer" checkpoint, without its position table."""
    settings = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    if settings.get("model_type") != "roformer":
        raise ConversionError(
            f"{folder / 'config.json'} has model_type {settings.get('model_type')!r}, not 'roformer': "
            "this converter reads transformers RoFormer checkpoints (a roformer_hf checkpoint needs no conversion)."
        )
    state_dict = read_transformers_weights(folder)
    if is_fengshen_layout(state_dict):  # IDEA's Zhouwenwang, as fengshen saves it
        settings, state_dict = fengshen_checkpoint(settings, state_dict)
        return config_from_dict(settings, folder), state_dict
    state_dict = {name: tensor for name, tensor in state_dict.items() if not name.endswith(POSITION_TABLE)}
    return config_from_dict(transformers_settings(settings, state_dict), folder), state_dict


def read_transformers_weights(folder: Path) -> dict[str, torch.Tensor]:
    """The weights of a transformers checkpoint (see `TRANSFORMERS_WEIGHTS`), safetensors first, shards joined."""
    weights_file = next(folder / name for name in TRANSFORMERS_WEIGHTS if (folder / name).is_file())
    if weights_file.name.endswith(".index.json"):
        weight_map = json.loads(weights_file.read_text(encoding="utf-8")).get("weight_map", {})
        shards = [folder / name for name in sorted(set(weight_map.values()))]
        missing = [shard.name for shard in shards if not shard.is_file()]
        if missing or not shards:
            raise ConversionError(
                f"{weights_file} names shards that are not in {folder}: {', '.join(missing) or 'none at all'}; "
                "download every shard of the checkpoint."
            )
    else:
        shards = [weights_file]
    state_dict = {}
    for shard in shards:
        if shard.suffix == ".safetensors":
            state_dict.update(load_file(shard))
        else:
            state_dict.update(_load_pickled_weights(shard))
    return state_dict


def transformers_settings(settings: dict, state_dict: dict[str, torch.Tensor]) -> dict:
    """The settings of an original config, plus what its weights and architecture imply for roformer_hf."""
    settings = dict(settings)
    has_pooler = any(name.startswith(POOLER) for name in state_dict)
    # AutoModel on the output keeps the pooler (RoFormer-Sim's sentence vector) only if the config says so.
    if has_pooler:
        settings["add_pooling_layer"] = True
    architecture = (settings.get("architectures") or [None])[0]
    if architecture == "RoFormerForMultipleChoice":  # transformers pools the last position, padding or not
        settings["multiple_choice_pooling"] = "last_position"
    has_lm_head = any(name.startswith(LM_HEAD) for name in state_dict)
    if has_pooler and has_lm_head:
        # RoFormer-Sim: a UniLM (bert4keras) with a linear pooler (with_pool="linear"), whose Hub configs say neither.
        architecture = "RoFormerForCausalLM"
        settings.update(architectures=[architecture], decoder_mask="unilm", pooler_activation="linear")
    if architecture == "RoFormerForCausalLM":  # our causal LM needs is_decoder, which Sim configs may lack
        settings["is_decoder"] = True
    return settings


# ----------------------------------------------------------------------------------------------------------------
# Building and writing the roformer_hf checkpoint
# ----------------------------------------------------------------------------------------------------------------


def build_model(config: RoFormerConfig, state_dict: dict[str, torch.Tensor]) -> modeling.RoFormerPreTrainedModel:
    """The head named by `config.architectures` (default: MLM when the weights have one), loaded with every weight."""
    has_mlm_head = any(name.startswith("cls.predictions.") for name in state_dict)
    architecture = (config.architectures or ["RoFormerForMaskedLM" if has_mlm_head else "RoFormerModel"])[0]
    model_class = getattr(modeling, architecture, None)
    if model_class is None or not architecture.startswith("RoFormer"):
        raise ConversionError(f"The checkpoint's architecture {architecture!r} is not a RoFormer model.")
    # ignore_mismatched_sizes: report wrong shapes below, with the other problems, instead of transformers' error.
    try:
        model, loading_info = model_class.from_pretrained(
            None, config=config, state_dict=state_dict, output_loading_info=True, ignore_mismatched_sizes=True
        )
    except ValueError as error:  # encoder weights that do not fit the config, explained by from_pretrained
        raise ConversionError(str(error)) from error
    problems = {
        "missing": sorted(loading_info["missing_keys"]),
        "unexpected": sorted(loading_info["unexpected_keys"]),
        "shape in the weights vs in the config": sorted(
            f"{name} {tuple(in_weights)} vs {tuple(in_config)}"
            for name, in_weights, in_config in loading_info["mismatched_keys"]
        ),
    }
    if any(problems.values()):
        details = "; ".join(f"{kind}: {', '.join(names)}" for kind, names in problems.items() if names)
        raise ConversionError(
            f"The weights do not fit a {architecture} built from the checkpoint's config ({details}): check that the "
            "config file belongs to these weights."
        )
    return model.eval()


# A vocabulary is word-level when at least this share of its entries are words of two or more Chinese characters:
# 80% of the 50k RoFormer vocabulary, none of BERT-Chinese's or of the char-level RoFormers' (single characters,
# ## pieces and English word pieces).
WORD_LEVEL_SHARE = 0.1
CHINESE_WORD = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]{2,}")
# What a tokenizer keeps of the source's tokenizer_config.json.
TOKENIZER_SETTINGS = ("do_lower_case", "strip_accents", "tokenize_chinese_chars", "model_max_length")
# What transformers writes as model_max_length when a tokenizer has none.
NO_MAX_LENGTH = int(1e29)


def is_word_level(vocab: list[str]) -> bool:
    """Whether `vocab` is a word-level vocabulary (jieba words as tokens) rather than a char-level one (BERT's)."""
    words = sum(1 for token in vocab if CHINESE_WORD.fullmatch(token))
    return words >= WORD_LEVEL_SHARE * len(vocab)


def tokenizer_settings(folder: Path, config: RoFormerConfig) -> dict:
    """The source's tokenizer settings (do_lower_case, ...), with its length limit or else the config's."""
    config_file = folder / "tokenizer_config.json"
    saved = json.loads(config_file.read_text(encoding="utf-8")) if config_file.is_file() else {}
    settings = {key: saved[key] for key in TOKENIZER_SETTINGS if saved.get(key) is not None}
    if settings.get("model_max_length", NO_MAX_LENGTH) >= NO_MAX_LENGTH:
        settings["model_max_length"] = config.max_position_embeddings
    return settings


def build_tokenizer(folder: Path, config: RoFormerConfig) -> PreTrainedTokenizerBase:
    """The tokenizer of the checkpoint's vocab.txt (see `is_word_level`); its size must match the embeddings."""
    vocab_file = folder / "vocab.txt"
    try:
        vocab = load_vocab(vocab_file)  # refuses a repeated token, which would shift the ids of every later one
    except ValueError as error:
        raise ConversionError(str(error)) from None
    settings = tokenizer_settings(folder, config)
    if is_word_level(list(vocab)):
        jieba_settings = {key: settings[key] for key in ("do_lower_case", "model_max_length") if key in settings}
        tokenizer = RoFormerJiebaTokenizer(vocab_file=str(vocab_file), **jieba_settings)
    else:  # the char-level checkpoints were trained with BERT's tokenization
        tokenizer = BertTokenizer(vocab=vocab, **settings)
    if len(tokenizer) != config.vocab_size:
        raise ConversionError(
            f"{vocab_file} has {len(tokenizer)} entries but the model has {config.vocab_size} token "
            "embeddings: give the vocab.txt the checkpoint was trained with."
        )
    return tokenizer


def convert(source: str | Path, output: str | Path, *, revision: str | None = None, overwrite: bool = False) -> Path:
    """Converts the checkpoint in `source` to a roformer_hf checkpoint in `output`.

    Args:
        source (`str` or `Path`):
            A transformers "roformer" checkpoint folder, an original bert4keras TF checkpoint folder, or the Hub id
            of a transformers "roformer" checkpoint (e.g. `"junnyu/roformer_v2_chinese_char_base"`).
        output (`str` or `Path`):
            The folder to write. It must not exist, unless `overwrite`.
        revision (`str`, *optional*):
            The branch, tag or commit of a Hub id; the default branch when not given.
        overwrite (`bool`, defaults to `False`):
            Replace an earlier conversion in `output`. A folder holding anything else is refused, naming it.

    Returns:
        The path of the written checkpoint.
    """
    hub_id = None if Path(source).exists() else str(source)  # the model card links a Hub source as base_model
    source_name = hub_id or Path(source).name
    source, output = locate_source(source, revision), Path(output).resolve()
    kind = detect_source(source)
    if output == source or output in source.parents:
        raise ConversionError(f"The output {output} would replace the source {source}: choose another folder.")
    with lock_output(output):
        if output.exists() and not overwrite:
            raise ConversionError(f"{output} exists: choose another output folder or pass --overwrite to replace it.")
        check_only_conversion_files(output)
        reader = read_transformers_checkpoint if kind == "transformers" else read_bert4keras_checkpoint
        config, state_dict = reader(source)
        model = build_model(config, state_dict)
        tokenizer = build_tokenizer(source, config)
        if config.is_decoder and config.eos_token_id is None:  # a decoder (RoFormer-Sim) generates up to [SEP]
            model.config.eos_token_id = model.generation_config.eos_token_id = tokenizer.sep_token_id
        # made as a plain mkdir makes it (tempfile.mkdtemp's 0o700 would become the output folder's mode)
        staging = output.with_name(f".{output.name}.{os.getpid()}-{os.urandom(4).hex()}")
        staging.mkdir()
        try:
            model.save_pretrained(staging)
            tokenizer.save_pretrained(staging)
            write_model_card(staging, config=model.config, base_model=hub_id, converted_from=source_name)
            give_plain_modes(staging)
            replace_folder(output, staging)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return output


def lock_output(output: Path) -> FolderLock:
    """
    The lock of the output folder (see `training.outputs.locks`), taken until the conversion ends, so that a second conversion into
    the same folder is refused instead of mixing its files with the first's. The lock file lies beside the folder,
    `.<name>.roformer_hf.lock`: the folder may not exist yet, and holds only what a conversion writes.
    """
    lock = FolderLock(output, "output folder", lock_file=output.with_name(f".{output.name}{LOCK_FILE_NAME}"))
    try:
        return lock.acquire()
    except FolderLockedError as error:
        raise ConversionError(str(error)) from None


# What a conversion writes besides the model code (the `.py` modules of roformer_hf, for `trust_remote_code=True`).
CONVERSION_FILES = (
    *("config.json", "generation_config.json", "model.safetensors", "README.md"),
    *("vocab.txt", "user_dict.txt", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.json"),
)


def conversion_files() -> set[str]:
    """The names of the files a conversion may write: `CONVERSION_FILES` and the modules of roformer_hf."""
    return {*CONVERSION_FILES, *(path.name for path in Path(modeling.__file__).parent.glob("*.py"))}


def check_only_conversion_files(output: Path) -> None:
    """
    Refuse to replace a folder holding anything an earlier conversion did not write (`--overwrite` replaces a
    converted checkpoint, never a user's files): a folder without a roformer_hf `config.json` is no earlier
    conversion, so all it holds is named.
    """
    if not output.exists():
        return
    if not output.is_dir():
        raise ConversionError(f"{output} is a file, not a folder: choose another output folder.")
    try:
        converted = json.loads((output / "config.json").read_text(encoding="utf-8")).get("model_type") == "roformer_hf"
    except (OSError, ValueError, AttributeError):
        converted = False
    ours = conversion_files() if converted else set()
    others = sorted(path.name for path in output.iterdir() if path.name not in ours or not path.is_file())
    if others:
        named = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
        raise ConversionError(
            f"{output} holds files that no conversion wrote ({named}): --overwrite replaces only an earlier "
            "conversion's files; move them away or choose another output folder."
        )


def replace_folder(output: Path, staging: Path) -> None:
    """
    Moves the files of the finished `staging` folder into `output` (renamed whole, if new): each file is the old or
    the new one, never half written, and the weights come last. Files of the earlier conversion that this one did
    not write are deleted; `check_only_conversion_files` made sure that there are no others.
    """
    if not output.exists():
        staging.rename(output)
        return
    written = sorted(staging.iterdir(), key=lambda path: path.suffix == ".safetensors")
    written_names = {path.name for path in written}
    for path in written:
        os.replace(path, output / path.name)
    for path in output.iterdir():
        if path.name not in written_names:
            path.unlink()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m roformer_hf.conversion.convert",
        description="Convert a transformers RoFormer checkpoint (folder or Hub id) or an original bert4keras "
        "TensorFlow checkpoint folder to a roformer_hf checkpoint (weights, config, tokenizer, code, model card).",
    )
    parser.add_argument(
        "source",
        help="checkpoint folder: config.json + weights + vocab.txt, or bert_config.json "
        "+ bert_model.ckpt.* + vocab.txt; or a Hub model id such as junnyu/roformer_v2_chinese_char_base",
    )
    parser.add_argument("output", help="folder to write; must not exist unless --overwrite")
    parser.add_argument("--revision", help="branch, tag or commit of a Hub model id (default: its main branch)")
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an earlier conversion in the output folder (a folder holding other files is refused)",
    )
    return parser.parse_args(argv)


def _load_pickled_weights(path: Path) -> dict[str, torch.Tensor]:
    """The tensors of a `pytorch_model.bin`; a file whose unpickling would run code is refused, with nothing run."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:
        if not is_refused_pickle(error):
            raise
        fix = "convert a checkpoint from a source you trust, or its .safetensors weights if it has them."
        raise ConversionError(refused_pickle_message(error, path, fix)) from error


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        output = convert(args.source, args.output, revision=args.revision, overwrite=args.overwrite)
    except ConversionError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"Wrote the roformer_hf checkpoint {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
