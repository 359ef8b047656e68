"""What publishing a model writes and sends: its card (`model_card`) with the card's Hub metadata (`card_metadata`),
the files a push uploads in one commit (`hub_upload`), and the files that make a pooled encoder a sentence-transformers
model (`sentence_transformers_files`). No checkpoint carries them: the model imports `model_card` and
`sentence_transformers_files` by name, and only where roformer_hf is installed."""
