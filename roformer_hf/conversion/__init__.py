"""Checkpoints in their authors' layouts made roformer_hf checkpoints: the command (`convert`,
`python -m roformer_hf.conversion.convert`), where a checkpoint comes from and how it is read (`conversion_sources`),
and the published layouts that `from_pretrained` also reads as they are (`published_layouts`, with IDEA's Zhouwenwang
in fengshen's layout, `fengshen_layout`). No checkpoint carries them: the model imports `published_layouts` by name,
and only where roformer_hf is installed."""
