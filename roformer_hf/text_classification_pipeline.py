"""
The text-classification pipeline of a classifier fine-tuned by run_classification.py: it reads a document as the
script did when it evaluated and predicted, so what was evaluated is what is served.

The recipe is the config's `classification_inputs` (`document_inputs.DocumentRecipe`): `truncate` keeps the head,
the tail or both of `max_seq_length` tokens; `chunk` sends every window of the document through the model and pools
their logits (mean or max) into one row before `function_to_apply` and `top_k`, as evaluation does. A model whose
config has no recipe (a classifier fine-tuned with a plain `Trainer`, or any other model) is served exactly as
transformers' `TextClassificationPipeline` serves it.

`import roformer_hf` registers `RecipeOrPlainPipeline` for the task "text-classification" (`serve_recipes`): it builds
this pipeline for a model with a recipe and transformers' own `TextClassificationPipeline`, the very object transformers
builds without roformer_hf, for any other model (BERT included). A checkpoint with a recipe also names this pipeline
in its config's `custom_pipelines`, for `trust_remote_code=True` where roformer_hf is missing.
"""

import torch
from transformers import TextClassificationPipeline
from transformers.pipelines import PIPELINE_REGISTRY

from .document_inputs import DocumentRecipe, document_model_inputs, pool_chunk_logits, tokenize_texts

TASK = "text-classification"
# Tokenizer options the recipe makes moot: it truncates (or cuts into windows) by itself, and the pipeline pads.
RECIPE_TOKENIZER_OPTIONS = ("truncation", "padding")
# Under the chunk strategy, how many windows of a document go through the model together at least (`batch_size`
# raises it).
WINDOWS_PER_FORWARD = 8


class RoFormerTextClassificationPipeline(TextClassificationPipeline):
    r"""
    transformers' `TextClassificationPipeline` (same call arguments: `top_k`, `function_to_apply`, `batch_size`, text
    pairs as `{"text": ..., "text_pair": ...}`), reading documents with the model's `classification_inputs`.

    Example:

    ```python
    >>> from transformers import pipeline
    >>> classifier = pipeline("text-classification", model="outputs/run_classification")  # after import roformer_hf
    >>> classifier("原告与被告签订借款合同，约定借款十万元。" * 100, top_k=None)
    [{'label': 'civil', 'score': 0.97}, {'label': 'criminal', 'score': 0.03}]
    ```
    """

    # How roformer_hf's config recognises this pipeline in transformers' registry (see `serve_recipes`).
    reads_classification_inputs = True

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        # Built directly (not through the registry), it may be given any model: only ours declare a recipe.
        settings = getattr(self.model.config, "classification_inputs", None)
        self.recipe = DocumentRecipe.from_settings(settings) if settings else None

    @property
    def reads_in_windows(self) -> bool:
        return self.recipe is not None and self.recipe.reads_in_windows

    def get_iterator(self, inputs, num_workers, batch_size, preprocess_params, forward_params, postprocess_params):
        if not self.reads_in_windows:
            return super().get_iterator(
                inputs, num_workers, batch_size, preprocess_params, forward_params, postprocess_params
            )
        # One document at a time: its windows are the batch (see _forward), so there is nothing to pad or regroup.
        forward_params = {**forward_params, "windows_per_forward": max(batch_size, WINDOWS_PER_FORWARD)}
        return (self.run_single(text, preprocess_params, forward_params, postprocess_params) for text in inputs)

    def preprocess(self, inputs, **tokenizer_kwargs):
        if self.recipe is None:
            return super().preprocess(inputs, **tokenizer_kwargs)
        check_tokenizer_options(tokenizer_kwargs, self.recipe)
        text, text_pair = text_and_pair(inputs)
        encoded = self.encode_document(text, text_pair)
        if not self.reads_in_windows:
            return encoded[0]
        # The windows of a document are equally long (split_into_windows), so they stack without padding.
        return {name: torch.cat([window[name] for window in encoded]) for name in encoded[0]}  # (windows, length)

    def encode_document(self, text: str, text_pair: str | None) -> list[dict[str, torch.Tensor]]:
        """The model inputs of one document (one, or one per window), each of batch size 1, as run_classification.py
        makes them (`long_documents.encode_batch`)."""
        if text_pair is not None and self.reads_in_windows:
            raise ValueError(
                "this classifier was fine-tuned with long_doc_strategy 'chunk', which reads single texts: give one "
                "text, not a text_pair."
            )
        first_ids = tokenize_texts(self.tokenizer, [text])[0]
        second_ids = tokenize_texts(self.tokenizer, [text_pair])[0] if text_pair is not None else None
        model_inputs = document_model_inputs(
            first_ids, second_ids, self.recipe, self.tokenizer.cls_token_id, self.tokenizer.sep_token_id
        )
        return [{name: torch.tensor([ids]) for name, ids in model_input.items()} for model_input in model_inputs]

    def _forward(self, model_inputs, windows_per_forward: int = WINDOWS_PER_FORWARD):
        if not self.reads_in_windows:
            return super()._forward(model_inputs)
        num_windows = len(model_inputs["input_ids"])
        window_logits = []
        for start in range(0, num_windows, windows_per_forward):
            windows = {name: rows[start : start + windows_per_forward] for name, rows in model_inputs.items()}
            window_logits.append(super()._forward(windows).logits.float().cpu())
        # pooled as run_classification.py pools them (in float64), back to one row: the document's logits
        pooled = pool_chunk_logits(torch.cat(window_logits).numpy(), [0] * num_windows, self.recipe.chunk_pooling)
        return {"logits": torch.from_numpy(pooled)}  # (1, num_labels)


class RecipeOrPlainPipeline(RoFormerTextClassificationPipeline):
    """
    What `serve_recipes` registers for "text-classification": building it builds `RoFormerTextClassificationPipeline`
    for a model whose config has a recipe (`classification_inputs`), and transformers' `TextClassificationPipeline`
    for any other model, so that importing roformer_hf changes nothing for them. A subclass of ours, so that
    `pipeline()` finds the class attributes it reads on the registered class.
    """

    def __new__(cls, *args, **kwargs):
        model = kwargs.get("model", args[0] if args else None)
        has_recipe = bool(getattr(getattr(model, "config", None), "classification_inputs", None))
        # An object of another class than `cls`: Python does not call __init__ on it again.
        return (RoFormerTextClassificationPipeline if has_recipe else TextClassificationPipeline)(*args, **kwargs)


def text_and_pair(inputs) -> tuple[str, str | None]:
    """The text (and second text) of one pipeline input: a string, or a dict with "text" and "text_pair"."""
    if isinstance(inputs, str):
        return inputs, None
    if isinstance(inputs, dict) and isinstance(inputs.get("text"), str) and set(inputs) <= {"text", "text_pair"}:
        return inputs["text"], inputs.get("text_pair")
    raise ValueError(
        f"cannot classify {type(inputs).__name__} {str(inputs)[:60]!r}: give a text, a list of texts, or "
        '{"text": ..., "text_pair": ...} for a pair of texts.'
    )


def check_tokenizer_options(tokenizer_kwargs: dict, recipe: DocumentRecipe) -> None:
    """Refuse tokenizer options that would read documents otherwise than the recipe the model was fine-tuned with.
    `truncation=False` asks for the whole document: the windows of `chunk` read it, `truncate` would not."""
    conflicting = sorted(set(tokenizer_kwargs) - set(RECIPE_TOKENIZER_OPTIONS))
    if tokenizer_kwargs.get("truncation") in (False, "do_not_truncate") and not recipe.reads_in_windows:
        conflicting.append(f"truncation={tokenizer_kwargs['truncation']!r}")
    if conflicting:
        raise ValueError(
            f"this classifier reads documents as it was fine-tuned ({recipe.long_doc_strategy}, max_seq_length "
            f"{recipe.max_seq_length}, truncation_side {recipe.truncation_side}), which {', '.join(conflicting)} "
            "would change: leave them out, or set model.config.classification_inputs = None to tokenize as "
            "transformers does."
        )


def serve_recipes() -> None:
    """
    Serve the task "text-classification" with `RecipeOrPlainPipeline`: a classifier with a recipe is read as it was
    fine-tuned, every other model by transformers' own pipeline. Called by `import roformer_hf`; keeps the task's
    model classes and default model.
    """
    entry = PIPELINE_REGISTRY.supported_tasks[TASK]
    PIPELINE_REGISTRY.supported_tasks[TASK] = {**entry, "impl": RecipeOrPlainPipeline}


__all__ = ["RoFormerTextClassificationPipeline", "serve_recipes"]
