"""What only run_classification.py needs: its labelled documents, their splits and checks (`documents`), labels and
problem types (`labels`), long documents read as head, tail or
windows and their chunks pooled (`long_documents`), metrics, predictions and the confusion matrix
(`classification_scores`), and the font a picture's label names are drawn in (`picture_fonts`)."""
