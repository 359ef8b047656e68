"""roformer_hf: the RoFormer model family for the Hugging Face ecosystem.

Importing the package registers every class with transformers' Auto classes under model_type "roformer_hf",
beside (never instead of) transformers' own "roformer". It also registers a pipeline for "text-classification" that
builds `RoFormerTextClassificationPipeline` for a classifier fine-tuned by run_classification.py (whose config has
`classification_inputs`: the pipeline reads a document as the script evaluated it) and transformers' own
`TextClassificationPipeline`, the same object as without roformer_hf, for every other model.
"""

from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForCausalLM,
    AutoModelForMaskedLM,
    AutoModelForMultipleChoice,
    AutoModelForQuestionAnswering,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
    AutoTokenizer,
)

from .configuration import RoFormerConfig
from .modeling import (
    RoFormerForCausalLM,
    RoFormerForMaskedLM,
    RoFormerForMultipleChoice,
    RoFormerForQuestionAnswering,
    RoFormerForSequenceClassification,
    RoFormerForTokenClassification,
    RoFormerModel,
    RoFormerPreTrainedModel,
)
from .text_classification_pipeline import RoFormerTextClassificationPipeline, serve_recipes
from .tokenization import RoFormerJiebaTokenizer

# exist_ok: transformers' own RoFormer config shares the class name; the mapping keys on the class, so both coexist.
AutoTokenizer.register(RoFormerConfig, tokenizer_class=RoFormerJiebaTokenizer, exist_ok=True)
RoFormerJiebaTokenizer.register_for_auto_class("AutoTokenizer")

AutoConfig.register(RoFormerConfig.model_type, RoFormerConfig)
RoFormerConfig.register_for_auto_class()
# register_for_auto_class: save_pretrained writes `auto_map` and copies the code, for trust_remote_code=True.
for auto_class, model_class in (
    (AutoModel, RoFormerModel),
    (AutoModelForMaskedLM, RoFormerForMaskedLM),
    (AutoModelForCausalLM, RoFormerForCausalLM),
    (AutoModelForSequenceClassification, RoFormerForSequenceClassification),
    (AutoModelForTokenClassification, RoFormerForTokenClassification),
    (AutoModelForQuestionAnswering, RoFormerForQuestionAnswering),
    (AutoModelForMultipleChoice, RoFormerForMultipleChoice),
):
    auto_class.register(RoFormerConfig, model_class, exist_ok=True)  # exist_ok: the same class-name clash as above
    model_class.register_for_auto_class(auto_class.__name__)

# pipeline("text-classification") reads a document as the classifier was fine-tuned to (config.classification_inputs).
serve_recipes()

__version__ = "0.1.0"

__all__ = [
    "RoFormerConfig",
    "RoFormerForCausalLM",
    "RoFormerForMaskedLM",
    "RoFormerForMultipleChoice",
    "RoFormerForQuestionAnswering",
    "RoFormerForSequenceClassification",
    "RoFormerForTokenClassification",
    "RoFormerJiebaTokenizer",
    "RoFormerModel",
    "RoFormerPreTrainedModel",
    "RoFormerTextClassificationPipeline",
]
