"""What RoFormer adds to transformers' loading, saving and uploading, for every model class of `modeling.py`."""

import inspect
import os

from .loading_check import check_encoder_weights_loaded, check_head_shapes, published_sim_settings
from .model_card import push_to_hub_with_model_card
from .sentence_vectors import write_sentence_transformers_files


class RoFormerHubMixin:
    """Placed before `PreTrainedModel` among the bases of `RoFormerPreTrainedModel`; each method keeps the arguments
    of the transformers method it extends."""

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *model_args, **kwargs):
        """As transformers' `from_pretrained` (same arguments), but encoder weights (everything under `roformer.`
        except the pooler) that the checkpoint lacks, or holds in another shape, raise a ValueError naming the likely
        cause instead of being initialised at random: a config that does not describe the checkpoint. New task heads
        and a new pooler are initialised as usual, and `ignore_mismatched_sizes` applies to them.

        A RoFormer-Sim checkpoint in the published layout (model_type "roformer") loads as a UniLM with its pooler
        (see `loading_check.published_sim_settings`) unless the arguments or a `config` say otherwise."""
        if kwargs.get("config") is None and isinstance(pretrained_model_name_or_path, (str, os.PathLike)):
            bare_model = "add_pooling_layer" in inspect.signature(cls.__init__).parameters
            for name, value in published_sim_settings(pretrained_model_name_or_path, kwargs, bare_model).items():
                kwargs.setdefault(name, value)
        output_loading_info = kwargs.pop("output_loading_info", False)
        ignore_mismatched_sizes = kwargs.pop("ignore_mismatched_sizes", False)
        # Mismatched shapes are collected rather than raised, so that the encoder's can be explained below.
        model, loading_info = super().from_pretrained(
            pretrained_model_name_or_path,
            *model_args,
            output_loading_info=True,
            ignore_mismatched_sizes=True,
            **kwargs,
        )
        check_encoder_weights_loaded(model, loading_info)
        if not ignore_mismatched_sizes:
            check_head_shapes(model, loading_info)
        return (model, loading_info) if output_loading_info else model

    def push_to_hub(self, repo_id: str, **kwargs):
        """As transformers' `push_to_hub` (same arguments), but the README.md uploaded is a RoFormer model card, to
        which the optional `training_summary` (a `model_card.TrainingSummary`) and `base_model` add."""
        return push_to_hub_with_model_card(self, repo_id, **kwargs)

    def save_pretrained(self, save_directory: str | os.PathLike, *args, **kwargs) -> None:
        """As transformers' `save_pretrained` (same arguments); with `config.add_pooling_layer`, also the files that
        make `SentenceTransformer(save_directory)` encode texts as `pooler_output` (see `sentence_vectors`)."""
        super().save_pretrained(save_directory, *args, **kwargs)
        if self.config.add_pooling_layer:
            write_sentence_transformers_files(save_directory)
