"""Benchmarks and GPU checks; a package so that the tests import them by name
(``from benchmarks import gpu_acceptance``)."""
