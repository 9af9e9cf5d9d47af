"""Run a training script written for Amazon SageMaker smart sifting, unchanged, on sift_bench's sifter.

`python -m sift_bench.sagemaker SCRIPT [ARGS...]` (__main__.py): `import smart_sifting...` resolves to sift_bench
while the script runs (aliases.py), every SiftingDataloader it builds is recorded in one MLflow run (recording.py),
and `--sifter none|random`, `--seeds`, `--compare` give the script's verdict against the baseline and the random
control.
"""
