"""Frozen-feature evaluation: feature extraction, linear probe, k-NN / recall@k, STS."""
