"""Evaluation stages: frozen-feature evaluation (feature extraction, linear probe, k-NN /
recall@k, STS) and the loss-level check of claim C9 (:mod:`weince.eval.special_case`)."""
