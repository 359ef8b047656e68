"""What only run_mlm.py needs: the multi-stage length schedule (`stages`), cleaning and packing text (`text_corpus`),
whole-word masking and the MLM metrics (`whole_word_masking`), the training phases (`pretraining`), and what a run
saves and prints at its end (`results`)."""
