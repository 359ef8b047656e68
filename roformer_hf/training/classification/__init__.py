"""What only run_classification.py needs: its labelled documents, their splits and checks (`documents`), labels and
problem types (`labels`), long documents read as head, tail or
windows and their chunks pooled (`long_documents`), metrics, predictions and the confusion matrix
(`classification_scores`), the font a picture's label names are drawn in (`picture_fonts`), the checks across its
arguments and the settings a resume repeats (`run_settings`), and its phases from the classifier built to the model
card (`fine_tuning`)."""
