"""Configuration of the RoFormer model family (model_type ``"roformer_hf"``)."""

import json
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from transformers import PreTrainedConfig
from transformers.activations import ACT2FN
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

# "default" and "ntk" are computed by roformer_hf.modeling; every other type by transformers' own functions.
ROPE_TYPES = ("default", "ntk", *sorted(ROPE_INIT_FUNCTIONS))
ROPE_TYPES_WITH_FACTOR = ("ntk", "linear", "dynamic", "yarn", "llama3")
ATTENTION_TYPES = ("softmax", "linear")
# transformers' problem types of a sequence classifier (its loss, and what the text-classification pipeline applies).
PROBLEM_TYPES = ("regression", "single_label_classification", "multi_label_classification")
# Sizes and counts that must be at least 1 (0 or less gives an empty model or a division by zero later).
POSITIVE_FIELDS = ("vocab_size", "hidden_size", "embedding_size", "num_hidden_layers", "num_attention_heads")
POSITIVE_FIELDS += ("intermediate_size", "type_vocab_size")
# Every Auto class and the class it loads, as `save_pretrained` copies the code (module file stem, class name). Every
# saved config names them all, whichever head was saved, so that `trust_remote_code=True` gives any head of ours from
# any checkpoint (e.g. a classifier from a pretrained MLM) instead of falling back on transformers' RoFormer.
AUTO_MAP = {
    "AutoConfig": "configuration.RoFormerConfig",
    "AutoModel": "modeling.RoFormerModel",
    "AutoModelForMaskedLM": "modeling.RoFormerForMaskedLM",
    "AutoModelForCausalLM": "modeling.RoFormerForCausalLM",
    "AutoModelForSequenceClassification": "modeling.RoFormerForSequenceClassification",
    "AutoModelForTokenClassification": "modeling.RoFormerForTokenClassification",
    "AutoModelForQuestionAnswering": "modeling.RoFormerForQuestionAnswering",
    "AutoModelForMultipleChoice": "modeling.RoFormerForMultipleChoice",
}
# The pipeline a classifier with `classification_inputs` names in its saved `custom_pipelines` (see
# `recipe_pipelines`): with `trust_remote_code=True`, `pipeline("text-classification", model=folder)` takes it from
# the checkpoint's code.
RECIPE_PIPELINE = "text_classification_pipeline.RoFormerTextClassificationPipeline"
# Its module, which imports nothing relatively: `save_pretrained` copies it beside the model's code.
RECIPE_PIPELINE_FILES = ("text_classification_pipeline.py",)
# Settings of a training run rather than of the model: never written to config.json, never read back from a saved
# config (older checkpoints of run_mlm.py say "sparse_prediction": true), so a loaded model answers every caller alike.
RUN_ONLY_FIELDS = ("sparse_prediction", "prediction_slot_rate")


class RoFormerConfig(PreTrainedConfig):
    r"""
    Configuration of a RoFormer model. The defaults are those of the original Chinese base checkpoint
    (`chinese_roformer_L-12_H-768_A-12`), and the field names are those that transformers' RoFormer uses, so the
    `config.json` of an original checkpoint loads as it is.

    Args:
        vocab_size (`int`, defaults to 50000):
            Number of entries in the word-level vocabulary.
        embedding_size (`int`, *optional*):
            Width of the token embeddings. `None` means `hidden_size`; when they differ, a linear projection maps
            embeddings to `hidden_size` (as in the small checkpoints).
        hidden_size (`int`, defaults to 768):
            Width of the encoder layers.
        num_hidden_layers (`int`, defaults to 12):
            Number of encoder layers.
        num_attention_heads (`int`, defaults to 12):
            Number of attention heads; must divide `hidden_size` into an even head dimension (checked when a model
            is built: `check_attention_heads`).
        intermediate_size (`int`, defaults to 3072):
            Width of the feed-forward layer.
        hidden_act (`str`, defaults to `"gelu"`):
            Activation of the feed-forward layer and of the MLM head transform.
        hidden_dropout_prob (`float`, defaults to 0.1):
            Dropout after embeddings, attention output and feed-forward output.
        attention_probs_dropout_prob (`float`, defaults to 0.1):
            Dropout on the attention probabilities.
        max_position_embeddings (`int`, defaults to 1536):
            The longest length the model was trained on. Not a cap: RoPE has no position table. It is the hint for
            truncation and the reference length of the scaled RoPE types.
        type_vocab_size (`int`, defaults to 2):
            Number of token types (segments).
        initializer_range (`float`, defaults to 0.02):
            Standard deviation of the truncated normal initialiser of weights.
        layer_norm_eps (`float`, defaults to 1e-12):
            Epsilon of the layer norms (and of the RMS norms of RoFormer-V2).
        norm_type (`str`, defaults to `"layer_norm"`):
            `"layer_norm"` (RoFormer) or `"rms_norm"` (RoFormer-V2: x / sqrt(mean(x^2) + layer_norm_eps), with no
            weight and no bias, and an MLM head that is the tied decoder alone).
        norm_position (`str`, defaults to `"post"`):
            Where each layer normalises: `"post"`, after each residual sum (BERT, RoFormer V1, V2 and Sim), or
            `"pre"`, the input of attention and of the feed-forward, the residual going around the norm (Megatron's
            order, IDEA's Zhouwenwang; these norms are `attention.input_norm` and `intermediate.input_norm`).
        final_layer_norm (`bool`, defaults to `False`):
            Whether a norm follows the last layer (`encoder.final_norm`), as a pre-norm stack needs (Zhouwenwang).
        embedding_layer_norm (`bool`, defaults to `True`):
            Whether the summed embeddings are normalised (`embeddings.LayerNorm`); Zhouwenwang's are not.
        use_bias (`bool`, defaults to `True`):
            Whether the encoder's linear layers (query, key, value, attention output, feed-forward) have biases;
            RoFormer-V2 has none. Task heads and the pooler keep theirs.
        rotary_value (`bool`, defaults to `False`):
            Whether values are rotated too (as in the original's `rotary_value` option).
        rope_parameters (`dict`, *optional*):
            RoPE settings in transformers' form, `{"rope_type": "default", "rope_theta": 10000.0}` by default.
            `rope_type` is one of `"default"`, `"ntk"` (NTK-aware base scaling, needs `factor`) or any type of
            transformers' `ROPE_INIT_FUNCTIONS` (`"linear"`, `"dynamic"`, `"yarn"`, ...).
        attention_type (`str`, defaults to `"softmax"`):
            `"softmax"` for standard attention, `"linear"` for linear attention with RoPE (elu + 1 features).
        sparse_prediction (`bool`, defaults to `False`):
            Whether `RoFormerForMaskedLM`, given `labels`, runs its prediction head only at the labelled positions
            (ModernBERT's sparse prediction) and returns `logits` of shape `(num_labelled, vocab_size)`, the rows in
            the order of `labels[labels != -100]`. The loss is the same; the head over a 50,000-word vocabulary is the
            largest matrix product of small models, so pretraining gets faster. Without labels, logits are dense.
            A setting of the training run: not saved, and ignored in a saved config (give it to `from_pretrained` or
            set `model.config.sparse_prediction` to train sparse again), so a loaded model's logits are dense.
        prediction_slot_rate (`float`, *optional*):
            With `sparse_prediction`, score a fixed number of slots instead of the labelled tokens: the worst case of
            the batch's shape masked at this rate (`losses.slot_count`), the labelled tokens first, then
            ignored positions, so the head's shape never changes (`torch.compile`, CUDA graphs). Logits are then
            `(slots, vocab_size)`. The caller keeps the labelled tokens within the slots (run_mlm.py's collator does,
            under static shapes). A setting of the training run, like `sparse_prediction`.
        add_pooling_layer (`bool`, defaults to `False`):
            Whether `RoFormerModel` (and every head built on it) has a pooler, `roformer.pooler.dense`, whose
            `pooler_output` is activation(dense(first hidden state)). `RoFormerForCausalLM` with
            `decoder_mask="unilm"` and a bidirectional `encoder_mask` (RoFormer-Sim, whose pooler gives its sentence
            vectors) has one either way, and sets this field in its own copy of the config.
        pooler_activation (`str`, defaults to `"tanh"`):
            Activation of the pooler: `"tanh"` (BERT's) or `"linear"` (none, as in RoFormer-Sim).
        multiple_choice_pooling (`str`, defaults to `"last_token"`):
            What `RoFormerForMultipleChoice` scores: `"last_token"`, the last token that is not padding, or
            `"last_position"`, the last position whatever the padding (transformers' RoFormerForMultipleChoice, so
            that a classifier fine-tuned there gives the same logits here).
        pad_token_id (`int`, defaults to 0):
            Id of `[PAD]`.
        is_decoder (`bool`, defaults to `False`):
            Causal self-attention, for `RoFormerForCausalLM`.
        decoder_mask (`str`, defaults to `"causal"`):
            What a decoder (`is_decoder=True`) attends to. `"causal"`: every earlier token, as transformers'
            RoFormerForCausalLM. `"unilm"`: UniLM's sequence-to-sequence mask over token types, which RoFormer-Sim
            was trained with: token i sees token j when cumsum(token_type_ids)[j] <= cumsum(token_type_ids)[i], so
            the first segment (type 0: a prompt, or a sentence whose vector is wanted) reads itself in both
            directions, and the second (type 1, generated text) sees the whole first segment and itself causally.
            `generate` gives the tokens it generates type 1. To train, put -100 in `labels` at the type-0 tokens
            (the tokens before them see them). Needs softmax attention with the "eager" or "sdpa" backend.
        encoder_mask (`str`, defaults to `"bidirectional"`):
            What a model that is not a decoder attends to: `"bidirectional"`, every token but padding, or `"unilm"`,
            the UniLM mask of `decoder_mask="unilm"` (without `token_type_ids`, one segment: both directions), with
            which IDEA's Zhouwenwang attends in every head. Needs softmax attention with the "eager" or "sdpa"
            backend.
        use_cache (`bool`, defaults to `True`):
            Whether a decoder returns its key/value cache.
        tie_word_embeddings (`bool`, defaults to `True`):
            Whether the MLM / LM decoder shares its weight with the word embeddings.
        classification_inputs (`dict`, *optional*):
            How `run_classification.py` turned documents into model inputs when it fine-tuned this classifier:
            `max_seq_length`, `truncation_side`, `long_doc_strategy`, `chunk_stride` and `chunk_pooling`. The script
            reads them again when it evaluates or predicts with the checkpoint (options on its command line win), and
            the text-classification pipeline reads documents with them (`text_classification_pipeline.py`), so
            documents are read as in training. `None` for models it did not fine-tune. A config with them is saved
            with `custom_pipelines` naming that pipeline (see the `custom_pipelines` property).
        auto_map (`dict`, *optional*):
            The Auto classes of `trust_remote_code=True` and the classes they load. Every Auto class of roformer_hf
            is added to the given entries, so a saved checkpoint of any head loads as any other head.

    Example:

    ```python
    >>> from roformer_hf import RoFormerConfig, RoFormerModel
    >>> config = RoFormerConfig(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024)
    >>> model = RoFormerModel(config)
    ```
    """

    model_type = "roformer_hf"
    # The Trainer leaves the cache out of evaluation outputs: "cache" from transformers 5.24 on, "past_key_values" before.
    keys_to_ignore_at_inference: ClassVar[list[str]] = ["past_key_values", "cache"]

    vocab_size: int = 50000
    embedding_size: int | None = None
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 1536
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12
    rotary_value: bool = False
    rope_parameters: dict | None = None
    attention_type: str = "softmax"
    sparse_prediction: bool = False
    prediction_slot_rate: float | None = None
    norm_type: str = "layer_norm"
    norm_position: str = "post"
    final_layer_norm: bool = False
    embedding_layer_norm: bool = True
    use_bias: bool = True
    add_pooling_layer: bool = False
    pooler_activation: str = "tanh"
    multiple_choice_pooling: str = "last_token"
    pad_token_id: int | None = 0
    bos_token_id: int | None = None
    eos_token_id: int | list[int] | None = None
    is_decoder: bool = False
    decoder_mask: str = "causal"
    encoder_mask: str = "bidirectional"
    use_cache: bool = True
    tie_word_embeddings: bool = True
    classification_inputs: dict | None = None
    auto_map: dict[str, str] | None = None

    def __post_init__(self, **kwargs):
        if self.embedding_size is None:
            self.embedding_size = self.hidden_size
        # Before transformers reads the label maps (a list of labels, a key "a" are a traceback there), then on what
        # it made of the settings (rope_parameters in its form).
        self.check_fields(num_labels=kwargs.get("num_labels"))
        self.auto_map = {**AUTO_MAP, **(self.auto_map or {})}
        super().__post_init__(**kwargs)
        self.check_fields()

    def check_fields(self, **given: Any) -> None:
        """Raises a ValueError naming the first field that breaks a rule of `FIELD_RULES` (the one check of every
        route: the constructor, config.json, keyword arguments of `from_pretrained`, the scripts' `--config_overrides`).
        `given` holds values transformers takes as arguments rather than fields (`num_labels`)."""
        for rule in FIELD_RULES:
            value = given[rule.name] if given.get(rule.name) is not None else field_value(self, rule.name)
            if not rule.accepts(value, self):
                raise ValueError(rule.refusal(value, self))

    @classmethod
    def get_config_dict(cls, pretrained_model_name_or_path, **kwargs) -> tuple[dict[str, Any], dict[str, Any]]:
        """Reads a `config.json` written for transformers' own RoFormer (model_type "roformer") as ours: the fields
        are the same, so only the model type changes (instead of a warning about mismatched model types). A file that
        cannot be read or is not a JSON object, and a classifier folder served by `pipeline()` that lacks its recipe's
        code, are refused in one line."""
        serving_task = kwargs.get("_from_pipeline")  # what transformers' pipeline() passes when it reads a config
        check_model_files(pretrained_model_name_or_path, ("config.json",), kwargs.get("subfolder"))
        config_dict, kwargs = super().get_config_dict(pretrained_model_name_or_path, **kwargs)
        check_config_object(config_dict, pretrained_model_name_or_path)
        if serving_task == "text-classification" and config_dict.get("classification_inputs"):
            check_recipe_pipeline_files(Path(pretrained_model_name_or_path, kwargs.get("subfolder") or ""))
        if config_dict.get("model_type") == "roformer":
            config_dict = {**config_dict, "model_type": cls.model_type}
        return config_dict, kwargs

    @classmethod
    def from_dict(cls, config_dict: dict[str, Any], **kwargs) -> "RoFormerConfig":
        """As transformers' `from_dict`, without the saved value of a run-only field (`RUN_ONLY_FIELDS`); as a keyword
        argument (`from_pretrained(path, sparse_prediction=True)`) it still applies. Labels given as keyword arguments
        replace the saved ones (`without_replaced_labels`). A config read from a folder by `AutoConfig` (which passes
        `name_or_path`) checks the folder's model files: `pipeline()` reads it first, and then swallows the errors of
        the model classes it tries, falling back to transformers' own RoFormer class of the same name."""
        check_model_files(kwargs.get("name_or_path"), MODEL_FILES)
        config_dict = {key: value for key, value in config_dict.items() if key not in RUN_ONLY_FIELDS}
        loaded = super().from_dict(without_replaced_labels(config_dict, kwargs), **kwargs)
        config = loaded[0] if isinstance(loaded, tuple) else loaded  # (config, unused kwargs) when asked
        if "id2label" in kwargs and "label2id" not in kwargs:  # the saved label2id names the saved labels
            config.label2id = {label: index for index, label in config.id2label.items()}
        config.check_fields(num_labels=kwargs.get("num_labels"))  # transformers sets the keyword arguments unchecked
        return loaded

    @property
    def custom_pipelines(self) -> dict:
        """What transformers' `pipeline()` reads: the recipe-reading text-classification pipeline of the checkpoint's
        code, for a classifier with `classification_inputs`, unless `import roformer_hf` has already made it the
        task's pipeline (`text_classification_pipeline.serve_recipes`). Without that exception, `pipeline()` would
        ask for `trust_remote_code=True` even where roformer_hf is imported."""
        if not self.classification_inputs or recipe_pipeline_registered():
            return {}
        return recipe_pipelines()

    @custom_pipelines.setter
    def custom_pipelines(self, saved: dict) -> None:
        """A saved `custom_pipelines` is read back from `classification_inputs`, in the property above."""

    def to_dict(self) -> dict[str, Any]:
        """As transformers' `to_dict`, what `config.json` holds: without the run-only fields (`RUN_ONLY_FIELDS`), and
        with the `custom_pipelines` of a classifier with `classification_inputs`."""
        output = super().to_dict()
        for name in (*RUN_ONLY_FIELDS, "custom_pipelines"):
            output.pop(name, None)
        return {**output, "custom_pipelines": recipe_pipelines()} if self.classification_inputs else output

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    def check_attention_heads(self) -> None:
        """Raises a ValueError unless `num_attention_heads` splits `hidden_size` into an even head dimension (RoPE
        rotates pairs of dimensions). Every model checks it when it is built, as transformers' models do, rather than
        the config when it is made: transformers' configs accept any sizes, so that a config may be made, or edited
        field by field, in any order."""
        if self.hidden_size % self.num_attention_heads != 0:
            raise ValueError(
                f"hidden_size ({self.hidden_size}) is not divisible by num_attention_heads "
                f"({self.num_attention_heads}): choose a number of heads that divides hidden_size."
            )
        if self.head_dim % 2 != 0:
            raise ValueError(
                f"RoPE rotates pairs of dimensions, so the head dimension must be even, but "
                f"hidden_size / num_attention_heads = {self.hidden_size} / {self.num_attention_heads} = "
                f"{self.head_dim}: change hidden_size or num_attention_heads."
            )

    @property
    def attends_as_unilm(self) -> bool:
        """Whether the model attends with UniLM's mask over token types (`decoder_mask` or `encoder_mask`)."""
        return (self.decoder_mask if self.is_decoder else self.encoder_mask) == "unilm"

    def _validate_ntk_rope_parameters(self, rope_parameters: dict, ignore_keys: set[str] | None = None) -> None:
        """Called by transformers' `validate_rope` for `rope_type="ntk"`; the values are checked by `FIELD_RULES`."""
        self._check_received_keys(
            "ntk", set(rope_parameters), {"rope_type", "factor"}, optional_keys={"rope_theta"}, ignore_keys=ignore_keys
        )


# --- The rules of the config's fields: one table, `FIELD_RULES`, checked by one loop (`RoFormerConfig.check_fields`)
# wherever a config is made or read, so that a value gets the same line whatever its route.


@dataclass(frozen=True)
class FieldRule:
    """A rule of one field: `accepts(value, config)` says whether the field's value keeps it. `message` is the line of
    a refusal: a template of `name`, `value`, `kind` (the value's type), `default` (the class default) and `config`, or
    a function of the value and the config where the line names more than a template can (the label named twice)."""

    name: str  # a field, or "field.key" for a key of a mapping field ("rope_parameters.factor")
    accepts: Callable[[Any, PreTrainedConfig], bool]
    message: str | Callable[[Any, PreTrainedConfig], str]

    def refusal(self, value: Any, config: PreTrainedConfig) -> str:
        if callable(self.message):
            return self.message(value, config)
        default = getattr(type(config), self.name, None)
        return self.message.format(
            name=self.name, value=value, kind=type(value).__name__, default=default, config=config
        )


def field_value(config: PreTrainedConfig, name: str) -> Any:
    """The value a rule reads: a field, or a key of a mapping field (None where the mapping or the key is absent)."""
    field, _, key = name.partition(".")
    value = getattr(config, field, None)
    if not key:
        return value
    return value.get(key) if isinstance(value, Mapping) else None


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _is_whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _optional(accepts: Callable[[Any], bool]) -> Callable[[Any, PreTrainedConfig], bool]:
    return lambda value, config: value is None or accepts(value)


def _one_of(name: str, allowed: tuple) -> FieldRule:
    return FieldRule(
        name,
        lambda value, config: value in allowed,
        f"Unknown {name} {{value!r}}: use one of {', '.join(map(repr, allowed))}.",
    )


def _mapping(name: str, example: str) -> FieldRule:
    """A field that holds a mapping (a JSON object) or nothing: transformers fails on anything else with a traceback,
    or keeps it as it is."""
    example = example.replace("{", "{{").replace("}", "}}")
    return FieldRule(
        name,
        _optional(lambda value: isinstance(value, Mapping)),
        f"{name} must be a mapping (a JSON object such as {example}) or null, got {{kind}} {{value!r:.60}}: give a "
        "mapping.",
    )


def _unilm(name: str, plain_mask: str, applies: Callable[[PreTrainedConfig], bool]) -> tuple[FieldRule, ...]:
    """UniLM's mask (`decoder_mask` or `encoder_mask` "unilm") tells segments apart by token type."""
    return (
        FieldRule(
            name,
            lambda mask, config: not (applies(config) and mask == "unilm" and config.attention_type == "linear"),
            f"{name}='unilm' masks attention by token type, which linear attention cannot do (it takes only a padding "
            f"mask): use attention_type='softmax', or {name}={plain_mask!r}.",
        ),
        FieldRule(
            name,
            lambda mask, config: not (applies(config) and mask == "unilm" and config.type_vocab_size < 2),
            f"{name}='unilm' tells segments apart by token type (generated tokens have type 1), but type_vocab_size "
            f"is {{config.type_vocab_size}}: set type_vocab_size=2, or {name}={plain_mask!r}.",
        ),
    )


def _label_ids_are_outputs(id2label: Any, config: PreTrainedConfig) -> bool:
    return id2label is None or (
        bool(id2label) and sorted(map(str, id2label)) == sorted(map(str, range(len(id2label))))
    )


def _labels_named_twice(id2label: Mapping) -> dict[str, list[str]]:
    """The label names that `id2label` gives to more than one output, with those outputs."""
    outputs: dict[str, list[str]] = {}
    for index, label in id2label.items():
        outputs.setdefault(str(label), []).append(str(index))
    return {label: indices for label, indices in outputs.items() if len(indices) > 1}


def _named_twice_line(id2label: Mapping, config: PreTrainedConfig) -> str:
    label, outputs = next(iter(_labels_named_twice(id2label).items()))
    return (
        f"id2label names the outputs {', '.join(outputs)} alike ({label!r}), so the classifier's answers could not "
        "be told apart (and label2id keeps one of them): give each output its own name."
    )


def _label2id_inverts(label2id: Any, config: PreTrainedConfig) -> bool:
    named = {label: str(index) for index, label in (config.id2label or {}).items()}
    return label2id is None or {label: str(index) for label, index in label2id.items()} == named


def _label2id_line(label2id: Mapping, config: PreTrainedConfig) -> str:
    return (
        f"label2id ({json.dumps(label2id, ensure_ascii=False)[:80]}) disagrees with id2label "
        f"({json.dumps(config.id2label, ensure_ascii=False)[:80]}): make it the inverse of id2label, or leave it out."
    )


WHOLE_AT_LEAST_ONE = "{name} must be a whole number of at least 1, got {value!r}"
LABELS_EXAMPLE = '{{"0": "civil", "1": "criminal"}}'

FIELD_RULES: tuple[FieldRule, ...] = (
    # Mappings first: the rules below read into them.
    _mapping("id2label", '{"0": "civil", "1": "criminal"}'),
    _mapping("label2id", '{"civil": 0, "criminal": 1}'),
    _mapping("rope_parameters", '{"rope_type": "default"}'),
    _mapping("classification_inputs", '{"max_seq_length": 512, "truncation_side": "head", ...}'),
    # The labels: id2label names the outputs 0 to n - 1, each once; label2id is its inverse, never alone (transformers
    # would replace its labels by LABEL_0, ...); num_labels (an argument of transformers) and problem_type agree.
    FieldRule(
        "label2id",
        lambda label2id, config: label2id is None or config.id2label is not None,
        "label2id is given without id2label, whose labels transformers would replace by LABEL_0, LABEL_1, ...: give "
        f"id2label too (such as {LABELS_EXAMPLE}).",
    ),
    FieldRule(
        "id2label",
        _label_ids_are_outputs,
        lambda id2label, config: (
            f"id2label's keys must be the classifier's outputs 0, 1, ..., n - 1 (at least one), "
            f'got {list(id2label)}: number the labels from 0 without gaps, as in {{"0": "civil", "1": "criminal"}}.'
        ),
    ),
    FieldRule("id2label", _optional(lambda id2label: not _labels_named_twice(id2label)), _named_twice_line),
    FieldRule("label2id", _label2id_inverts, _label2id_line),
    FieldRule("num_labels", _optional(lambda count: _is_whole(count) and count >= 1), WHOLE_AT_LEAST_ONE + "."),
    FieldRule(
        "num_labels",
        lambda count, config: count is None or config.id2label is None or count == len(config.id2label),
        "num_labels is {value!r}, but id2label names {config.num_labels} labels: leave num_labels out (id2label "
        "gives it), or give id2label {value!r} labels.",
    ),
    FieldRule(
        "problem_type",
        _optional(lambda problem_type: problem_type in PROBLEM_TYPES),
        f"Unknown problem_type {{value!r}}: use one of {', '.join(map(repr, PROBLEM_TYPES))}, or null (then the type "
        "of the first labels decides).",
    ),
    FieldRule(
        "num_labels",
        lambda count, config: count != 1 or config.problem_type != "single_label_classification",
        "problem_type 'single_label_classification' picks one of several classes, but num_labels is 1: give 2 or "
        "more labels (two classes are 2), or use problem_type 'regression' for one score.",
    ),
    # The boolean fields the model reads, RoFormer's own, then the three of transformers' that change what it
    # computes: a string ("false") or a number would act as its truth value.
    *(
        FieldRule(
            name,
            lambda value, config: isinstance(value, bool),
            "{name} must be true or false, got {value!r} (of type {kind}): write it as a boolean (in config.json "
            "without quotes).",
        )
        for name in (
            *("rotary_value", "sparse_prediction", "final_layer_norm", "embedding_layer_norm", "use_bias"),
            *("add_pooling_layer", "is_decoder", "use_cache", "tie_word_embeddings"),
        )
    ),
    *(
        FieldRule(
            name,
            lambda value, config: _is_whole(value) and value >= 1,
            WHOLE_AT_LEAST_ONE + f": set {name} to 1 or "
            f"more (the default is {'hidden_size' if name == 'embedding_size' else '{default}'}).",
        )
        for name in POSITIVE_FIELDS
    ),
    FieldRule(
        "layer_norm_eps",
        lambda value, config: _is_number(value) and value > 0,
        "layer_norm_eps must be a positive number (it keeps the norm from dividing by 0), got {value!r}: set it in "
        "range (the default is {default}).",
    ),
    FieldRule(
        "initializer_range",
        lambda value, config: _is_number(value) and value >= 0,
        "initializer_range must be a finite number of at least 0, got {value!r}: set it in range (the default is "
        "{default}).",
    ),
    FieldRule(
        "max_position_embeddings",
        lambda value, config: _is_whole(value) and value >= 1,
        WHOLE_AT_LEAST_ONE + ": set it in range (the default is {default}).",
    ),
    *(
        FieldRule(
            name,
            lambda value, config: _is_number(value) and 0 <= value <= 1,
            "{name} is a probability, so it must lie in [0, 1], got {value!r}.",
        )
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob")
    ),
    FieldRule(
        "prediction_slot_rate",
        _optional(lambda rate: _is_number(rate) and 0 < rate <= 1),
        "prediction_slot_rate is a share of tokens in (0, 1], or None; got {value!r}.",
    ),
    FieldRule(
        "hidden_act",
        lambda activation, config: (isinstance(activation, str) and activation in ACT2FN) or callable(activation),
        "hidden_act must be one of transformers' ACT2FN (gelu, relu, ...), got {value!r}.",
    ),
    FieldRule(
        "pad_token_id",
        lambda pad, config: pad is None or (_is_whole(pad) and 0 <= pad < config.vocab_size),
        lambda pad, config: (
            f"pad_token_id must be the vocabulary id of [PAD] (0 to {config.vocab_size - 1}), got {pad!r}."
        ),
    ),
    _one_of("attention_type", ATTENTION_TYPES),
    # RoPE: a known type, the scaling factor of the types that scale, and both numbers finite and above 0.
    FieldRule(
        "rope_parameters.rope_type",
        _optional(lambda rope_type: rope_type in ROPE_TYPES),
        f"Unknown rope_type {{value!r}} in rope_parameters: use one of {', '.join(map(repr, ROPE_TYPES))}.",
    ),
    FieldRule(
        "rope_parameters.rope_type",
        lambda rope_type, config: rope_type not in ROPE_TYPES_WITH_FACTOR or "factor" in config.rope_parameters,
        'rope_type {value!r} needs a scaling factor: add "factor" to rope_parameters.',
    ),
    *(
        FieldRule(
            f"rope_parameters.{key}",
            _optional(lambda value: _is_number(value) and value > 0),
            f"rope_parameters {key} must be > 0 (a finite number), got {{value!r}}.",
        )
        for key in ("factor", "rope_theta")
    ),
    # The fields of a few named values.
    _one_of("norm_type", ("layer_norm", "rms_norm")),
    _one_of("pooler_activation", ("tanh", "linear")),
    _one_of("multiple_choice_pooling", ("last_token", "last_position")),
    _one_of("decoder_mask", ("causal", "unilm")),
    _one_of("encoder_mask", ("bidirectional", "unilm")),
    _one_of("norm_position", ("post", "pre")),
    *_unilm("decoder_mask", "causal", lambda config: config.is_decoder),
    *_unilm("encoder_mask", "bidirectional", lambda config: True),
)


def without_replaced_labels(saved: dict[str, Any], given: Mapping[str, Any]) -> dict[str, Any]:
    """The `saved` settings (a config.json) without their label maps where `given` (keyword arguments, a script's
    settings) says the labels anew: an `id2label`, or a `num_labels` other than the saved labels' number, as
    `from_pretrained(path, num_labels=n)` asks transformers for a new head of n outputs. What is given is then checked
    against itself, not against the labels it replaces."""
    saved_labels = saved.get("id2label")
    saved_count = len(saved_labels) if isinstance(saved_labels, Mapping) else None
    if given.get("id2label") is None and given.get("num_labels") in (None, saved_count):
        return saved
    return {name: value for name, value in saved.items() if name not in ("id2label", "label2id")}


def recipe_pipelines() -> dict:
    """A new `custom_pipelines` entry naming `RECIPE_PIPELINE` (new each time: transformers' `pipeline()` replaces the
    class names in the one it reads by the classes)."""
    return {"text-classification": {"impl": RECIPE_PIPELINE, "pt": ["AutoModelForSequenceClassification"]}}


def recipe_pipeline_registered() -> bool:
    """Whether the task "text-classification" of transformers' pipelines reads `classification_inputs` in this
    process (roformer_hf is imported), so that no checkpoint code is needed for it."""
    from transformers.pipelines import PIPELINE_REGISTRY

    served_by = PIPELINE_REGISTRY.supported_tasks["text-classification"]["impl"]  # a class, or its dotted path
    return getattr(served_by, "reads_classification_inputs", False)


def check_config_object(settings: object, source: object, name: str = "config.json") -> None:
    """Raises a ValueError where a checkpoint's config.json (or its JSON file `name`) holds another JSON value than an
    object of settings."""
    if not isinstance(settings, dict):
        json_type = {list: "array", str: "string", bool: "boolean", type(None): "null"}.get(type(settings), "number")
        raise ValueError(
            f"the {name} of {source} holds a JSON {json_type} ({json.dumps(settings)[:40]}), not an object of "
            "settings: restore it from the checkpoint it was saved with (save_pretrained writes one)."
        )


# --- The files of a model folder, read before transformers' readers, which fail on a damaged file deep inside without
# naming it. The files each `from_pretrained` reads: the model's (the shards an index names too), the tokenizer's.
MODEL_FILES = ("config.json", "model.safetensors", "model.safetensors.index.json")
TOKENIZER_FILES = ("tokenizer_config.json", "special_tokens_map.json", "added_tokens.json")


def check_model_files(source: object, names: tuple[str, ...], subfolder: str | None = None) -> None:
    """
    Raises an OSError naming the first file that cannot be read as what its name says (a JSON file cut short, garbled
    or not UTF-8; a safetensors file cut short or of another format), and a ValueError for a JSON file that holds no
    object (`check_config_object`), before transformers reads them.

    Args:
        source: What `from_pretrained` was given: a local folder (its files `names` are read, in `subfolder`), a file
            (read itself), or anything else (a Hub id, None), left to transformers.
        names (`tuple[str, ...]`): The files to read where they exist (`MODEL_FILES`, `TOKENIZER_FILES`).
    """
    if not isinstance(source, (str, os.PathLike)):
        return
    folder = Path(source, subfolder or "")
    paths = [folder / name for name in names] if folder.is_dir() else [folder]
    for path in paths:
        if not path.is_file() or path.suffix not in (".json", ".safetensors"):
            continue
        settings = read_model_file(path)
        if path.suffix == ".json":
            check_config_object(settings, path.parent, path.name)
        if path.name.endswith(".index.json"):  # the shards it names are read too
            shards = settings.get("weight_map") if isinstance(settings.get("weight_map"), dict) else {}
            paths += [path.parent / shard for shard in sorted(set(map(str, shards.values())))]


def read_model_file(path: Path) -> Any:
    """The value of a JSON file, or the header of a safetensors file; an OSError naming the file and the fix where
    it cannot be read."""
    try:
        if path.suffix == ".json":
            return json.loads(path.read_bytes().decode("utf-8"))
        return safetensors_header(path)
    except ValueError as error:  # json.JSONDecodeError, UnicodeDecodeError and safetensors_header's are ValueErrors
        if isinstance(error, json.JSONDecodeError):
            reason = f"not JSON: {error.msg} at line {error.lineno}, column {error.colno}"
        elif isinstance(error, UnicodeDecodeError):
            reason = f"not UTF-8 text: byte {error.object[error.start]:#04x} at byte {error.start}"
        else:
            reason = str(error)
        raise OSError(
            f"{path} cannot be read ({'empty' if path.stat().st_size == 0 else reason}): it was cut short or damaged; "
            "download it again, or save it again with save_pretrained where it was made."
        ) from None


def safetensors_header(path: Path) -> dict:
    """The header of a safetensors file: 8 bytes giving the length of a JSON header, which gives each tensor's bytes;
    the tensors fill the rest of the file exactly (what safetensors checks before it reads a tensor)."""
    size = path.stat().st_size
    with path.open("rb") as file:
        header_size = int.from_bytes(file.read(8), "little")
        if size < 8 or header_size > size - 8:
            raise ValueError(f"not a safetensors file: its {size:,} bytes hold no header of the length it begins with")
        try:
            header = json.loads(file.read(header_size))
            ends = [entry["data_offsets"][1] for name, entry in header.items() if name != "__metadata__"]
            described = 8 + header_size + max(ends, default=0)
        except (ValueError, TypeError, KeyError, IndexError, AttributeError):
            raise ValueError("not a safetensors file: its header is not one") from None
    if described != size:
        raise ValueError(f"{size:,} bytes, where its header describes {described:,}")
    return header


def check_recipe_pipeline_files(folder: Path) -> None:
    """Raises an OSError naming the missing file where a local classifier folder served by `pipeline()` through its
    own code (roformer_hf not imported) lacks one of `RECIPE_PIPELINE_FILES`, instead of transformers' message about
    the Hub (for the pipeline's module) or a FileNotFoundError (for the module it imports)."""
    if not folder.is_dir() or recipe_pipeline_registered():  # a Hub repository: transformers downloads the files
        return
    for name in RECIPE_PIPELINE_FILES:
        if not (folder / name).is_file():
            raise OSError(
                f"{folder} lacks {name}, the code of the pipeline that reads its documents as the classifier was "
                "fine-tuned to (classification_inputs): restore it by loading the classifier and saving it again "
                "where roformer_hf is installed (from_pretrained, then save_pretrained), or import roformer_hf before "
                "pipeline() to serve it with roformer_hf's own."
            )


__all__ = ["RoFormerConfig"]
