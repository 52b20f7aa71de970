"""Benchmarks on real dialogue datasets (SGD, CrossWOZ): state accuracy, context size, speed.

`context-editor bench sgd|crosswoz` runs them (see `cli.register`); benchmarks/README.md has the
exact commands. Full runs are not part of the test suite; a few-dialogue smoke run is.
"""
