"""The data of both scripts: where it comes from and how it becomes the run's splits (`sources`), a local dataset folder
read as it is and never written into (`folders`: its formats, its ClassLabel names, the cache it is prepared in),
what is wrong with a data file (`files`), and how much of the training text the tokenizer knows (`vocabulary_coverage`:
the share of `[UNK]` tokens)."""
