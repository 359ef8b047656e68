"""The two files that make sentence-transformers encode texts with a saved RoFormer as its `pooler_output`.

A checkpoint whose config has `add_pooling_layer=True` is saved with the two files of a sentence-transformers (6.x)
model, so that `SentenceTransformer(folder)` encodes a text as the model's own `pooler_output`:

- `modules.json`: one module, sentence-transformers' `Transformer`, reading the folder itself: it loads the model with
  `AutoModel` (our `RoFormerModel`, with its pooler since the config says so) and the tokenizer with `AutoTokenizer`;
- `sentence_bert_config.json`: that module's settings: the text goes through `forward` and the field
  `pooler_output` of its output is the sentence embedding (sentence-transformers' own way of reading a pooled output,
  as for BLIP), so no pooling or dense layer repeats what the pooler does.

Without `config_sentence_transformers.json`, sentence-transformers compares vectors by cosine similarity, as
RoFormer-Sim does. (That file is also the one sentence-transformers' own `save` writes before saving its modules: a
pipeline of the user's that wraps a pooled RoFormer keeps its settings, and its `modules.json` and
`sentence_bert_config.json` are written after ours.)

These are plain JSON files: sentence-transformers is an optional dependency (`pip install "roformer_hf[st]"`) and
roformer_hf never imports it.
"""

import json
import os
from pathlib import Path

SENTENCE_TRANSFORMERS_FILES = {
    "modules.json": [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.base.modules.transformer.Transformer"}
    ],
    "sentence_bert_config.json": {
        "transformer_task": "feature-extraction",
        "modality_config": {"text": {"method": "forward", "method_output_name": "pooler_output"}},
        "module_output_name": "sentence_embedding",
    },
}


def write_sentence_transformers_files(folder: str | os.PathLike) -> list[Path]:
    """Writes the files that make `SentenceTransformer(folder)` encode texts as `pooler_output`.

    Args:
        folder (`str` or `os.PathLike`):
            A saved roformer_hf checkpoint whose config has `add_pooling_layer=True`.

    Returns:
        The paths written.
    """
    paths = []
    for name, content in SENTENCE_TRANSFORMERS_FILES.items():
        path = Path(folder) / name
        path.write_text(json.dumps(content, indent=2) + "\n", encoding="utf-8")
        paths.append(path)
    return paths
