#!/usr/bin/env bash
# The packages that benchmarks/gpu_check.py needs and a lent GPU machine lacks (it has torch, transformers,
# tokenizers, safetensors, accelerate, pyarrow, pandas, xxhash, fsspec, scikit-learn and pytest, but no package
# registry), as wheels for its Python 3.12 in .whl/, plus the data the check reads in .gpu_data/. Both folders are
# git-ignored; the device tool carries them. Run from the repository root on a machine with the registry:
#
#     bash benchmarks/gpu_wheels.sh
#
# and on the GPU machine (the command of docs/gpu.md, which carries .whl and .gpu_data: about 35 MB with the repository):
#
#     python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:.
#     gunzip -k .gpu_data/*/*.gz
#     ROFORMER_HF_DATA=.gpu_data python3 benchmarks/gpu_check.py --out /tmp/gc
set -euo pipefail
cd "$(dirname "$0")/.."
data="${ROFORMER_HF_DATA:-../shared/data}"

rm -rf .whl && mkdir .whl
platforms=(--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64)
python -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    "${platforms[@]}" -d .whl rjieba==0.2.2 datasets==5.2.0 evaluate==0.4.6 dill==0.4.1 multiprocess==0.70.19
python -m pip wheel --quiet --no-deps -w .whl jieba==0.42.1  # jieba is published as a source archive only

# gzipped (13 MB instead of 31 MB): the check reads People's Daily and both Fudan files (the vocabulary is in data/)
rm -rf .gpu_data && mkdir -p .gpu_data/pretrain .gpu_data/cls
gzip -c "$data/pretrain/peoples_daily_199801.txt" > .gpu_data/pretrain/peoples_daily_199801.txt.gz
for name in fudan_longdoc_7cls fudan_longdoc_7cls_more; do
    gzip -c "$data/cls/$name.jsonl" > ".gpu_data/cls/$name.jsonl.gz"
done
ls -l .whl .gpu_data/*
grep -qx "/.whl/" .git/info/exclude || echo "/.whl/" >> .git/info/exclude
grep -qx "/.gpu_data/" .git/info/exclude || echo "/.gpu_data/" >> .git/info/exclude
