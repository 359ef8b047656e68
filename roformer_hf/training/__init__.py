"""What run_mlm.py, run_classification.py and convert share; no checkpoint carries it."""
