"""Tests of roformer_hf/training/data/ (sources.py and folders.py): the data of both scripts from every layout `datasets` reads, built
offline from the shipped CAIL and People's Daily samples (a Hub-layout folder of Parquet shards with a README's
configs, a Hub id in the datasets cache, Parquet, Arrow, save_to_disk folders, nested JSON, a JSON object with its rows
under a key), read to the same rows as the JSON-lines file they were made from, and fine-tuned on to completion."""

import json
import shutil
from pathlib import Path

import datasets
import huggingface_hub
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import PEOPLES_DAILY_SAMPLE, REPO_ROOT

import run_classification
import run_mlm
from roformer_hf.training.data.sources import json_rows_key, load_dataset_by_name, load_splits
from roformer_hf.training.errors import ScriptError

DEMO_VOCAB = REPO_ROOT / "data" / "demo_vocab.txt"
TINY_MODEL = "hidden_size=32,num_hidden_layers=1,num_attention_heads=2,intermediate_size=64"
# A Hub dataset's README: two configurations, the default of all rows, "first_half" of the first 12 training rows.
HUB_README = """---
configs:
- config_name: default
  data_files:
  - split: train
    path: data/train-*.parquet
  - split: validation
    path: data/validation-*.parquet
  - split: test
    path: data/test-*.parquet
- config_name: first_half
  data_files:
  - split: train
    path: first_half/train.parquet
---
# CAIL sample
"""


@pytest.fixture(scope="module")
def rows(cail_rows) -> dict[str, list[dict]]:
    """Short court texts of both classes: 24 to train on (sorted by label, as files often are), 8 and 4 more."""
    short = [{"id": row["id"], "text": row["text"][:160], "label": row["label"]} for row in cail_rows]
    return {
        "train": short[:12] + short[30:42],
        "validation": short[12:16] + short[42:46],
        "test": short[16:18] + short[46:48],
    }


def nested(row: dict) -> dict:
    """A row with its label and id in an object: `{"text": ..., "meta": {"label": ..., "id": ...}}`."""
    return {"text": row["text"], "meta": {"label": row["label"], "id": row["id"]}}


def write_jsonl(path: Path, rows: list[dict]) -> str:
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    return str(path)


def write_parquet(path: Path, rows: list[dict]) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)
    return str(path)


def write_arrow(path: Path, rows: list[dict]) -> str:
    """An Arrow IPC file (what pyarrow and pandas' to_feather write)."""
    table = pa.Table.from_pylist(rows)
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    return str(path)


def hub_folder(folder: Path, rows: dict[str, list[dict]]) -> Path:
    """A dataset folder in the Hub's layout: Parquet shards (the training split in two) and a README with configs."""
    write_parquet(folder / "data" / "train-00000-of-00002.parquet", rows["train"][:12])
    write_parquet(folder / "data" / "train-00001-of-00002.parquet", rows["train"][12:])
    for split in ("validation", "test"):
        write_parquet(folder / "data" / f"{split}-00000-of-00001.parquet", rows[split])
    write_parquet(folder / "first_half" / "train.parquet", rows["train"][:6] + rows["train"][12:18])
    (folder / "README.md").write_text(HUB_README, encoding="utf-8")
    return folder


def split_folder(folder: Path, rows_of_split: dict[str, list[dict]]) -> Path:
    """A Hub-layout folder of one Parquet file per split, by the splits' own names, and the README naming them."""
    for name, split_rows in rows_of_split.items():
        write_parquet(folder / "data" / f"{name}-00000-of-00001.parquet", split_rows)
    configs = "".join(f"  - split: {name}\n    path: data/{name}-*\n" for name in rows_of_split)
    (folder / "README.md").write_text(f"---\nconfigs:\n- config_name: default\n  data_files:\n{configs}---\n")
    return folder


def cached_hub_dataset(tmp: Path, rows: dict[str, list[dict]], repo_id: str = "someone/cail_small") -> Path:
    """
    A datasets cache holding the Hub dataset `repo_id` as `load_dataset(repo_id)` leaves it when online:
    `<cache>/<namespace>___<name>/<config>/<version>/<hash>/<name>-<split>.arrow`. Made offline by loading a Hub-layout
    folder of that name into the cache, then filing it under the namespace, as the Hub's loader files it.
    """
    namespace, name = repo_id.split("/")
    cache = tmp / "datasets_cache"
    datasets.load_dataset(str(hub_folder(tmp / "download" / name, rows)), cache_dir=str(cache))
    (cache / name).rename(cache / f"{namespace}___{name}")
    shutil.rmtree(tmp / "download")  # only the cache is left: the id cannot be read as a folder
    return cache


# --- every layout reads to the rows of the JSON-lines file it was made from ---


def layout_arguments(layout: str, tmp: Path, rows: dict[str, list[dict]]) -> list[str]:
    """The options that give the train, validation and test rows in `layout`."""
    if layout == "hub_folder":
        return ["--dataset_name", str(hub_folder(tmp / "cail_small", rows))]
    if layout == "hub_id_in_cache":
        return ["--dataset_name", "someone/cail_small", "--cache_dir", str(cached_hub_dataset(tmp, rows))]
    if layout == "dataset_dict_folder":
        datasets.DatasetDict({split: datasets.Dataset.from_list(part) for split, part in rows.items()}).save_to_disk(
            tmp / "saved"
        )
        return ["--dataset_name", str(tmp / "saved")]
    writers = {
        "parquet": lambda path, part: write_parquet(path.with_suffix(".parquet"), part),
        "arrow": lambda path, part: write_arrow(path.with_suffix(".arrow"), part),
        "dataset_folder": lambda path, part: datasets.Dataset.from_list(part).save_to_disk(path) or str(path),
        "data_keyed_json": lambda path, part: write_json(path.with_suffix(".json"), {"version": 1, "data": part}),
        "json_array": lambda path, part: write_json(path.with_suffix(".json"), part),
        "csv": lambda path, part: write_csv(path.with_suffix(".csv"), part),
        "tsv": lambda path, part: write_csv(path.with_suffix(".tsv"), part, sep="\t"),
        "headerless_txt": lambda path, part: write_csv(path.with_suffix(".txt"), part, sep="\t", header=False),
    }
    if layout == "tsv_folder":  # datasets reads a folder of .tsv files by their names
        (tmp / "tsv").mkdir()
        for split, part in rows.items():
            write_csv(tmp / "tsv" / f"{split}.tsv", part, sep="\t")
        return ["--dataset_name", str(tmp / "tsv")]
    columns = ["--columns", "id,text,label"] if layout == "headerless_txt" else []  # label<TAB>text lines, with an id
    return columns + [
        option for split in rows for option in (f"--{split}_file", writers[layout](tmp / split, rows[split]))
    ]


def write_json(path: Path, document) -> str:
    path.write_text(json.dumps(document, ensure_ascii=False, indent=1), encoding="utf-8")
    return str(path)


def write_csv(path: Path, rows: list[dict], sep: str = ",", header: bool = True) -> str:
    import pandas as pd

    pd.DataFrame(rows).to_csv(path, index=False, sep=sep, header=header)
    return str(path)


LAYOUTS = [
    "hub_folder",
    "hub_id_in_cache",
    "dataset_dict_folder",
    "dataset_folder",
    "parquet",
    "arrow",
    "data_keyed_json",
    "json_array",
    "csv",
    "tsv",
    "headerless_txt",
    "tsv_folder",
]


def classification_arguments(tmp: Path, *options: str) -> list[str]:
    return [
        *("--tokenizer_name", str(DEMO_VOCAB), "--config_overrides", TINY_MODEL, "--max_seq_length", "32"),
        *("--output_dir", str(tmp / "out"), "--cache_dir", str(tmp / "cache"), "--max_steps", "2"),
        *("--per_device_train_batch_size", "8"),
        *("--save_strategy", "no", "--report_to", "none", "--disable_tqdm", "true", "--bf16", "false"),
        *options,
    ]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_layout_reads_the_rows_of_the_file_it_was_made_from(layout, rows, tmp_path):
    arguments = classification_arguments(tmp_path, *layout_arguments(layout, tmp_path, rows))
    model_args, data_args, training_args = run_classification.parse_classification_arguments(
        [*arguments, "--do_train", "--do_eval", "--do_predict"]
    )
    raw_datasets, label_info, _ = run_classification.load_labelled_documents(model_args, data_args, training_args)
    for split, expected in rows.items():
        read = raw_datasets[split].select_columns(["id", "text", "label"]).to_list()
        assert read == expected, f"{layout}: the {split} rows differ from those written"
    assert label_info.label_names == ["civil", "criminal"]


def test_a_dataset_configuration_and_split_names_choose_the_rows(rows, tmp_path):
    folder = str(hub_folder(tmp_path / "cail_small", rows))
    options = ["--dataset_name", folder, "--dataset_config_name", "first_half", "--do_train"]
    model_args, data_args, training_args = run_classification.parse_classification_arguments(
        classification_arguments(tmp_path, *options)
    )
    raw_datasets, _, _ = run_classification.load_labelled_documents(model_args, data_args, training_args)
    assert raw_datasets["train"]["id"] == [row["id"] for row in rows["train"][:6] + rows["train"][12:18]]
    options = ["--dataset_name", folder, "--train_split_name", "test", "--validation_split_name", "train"]
    model_args, data_args, training_args = run_classification.parse_classification_arguments(
        classification_arguments(tmp_path, *options, "--do_train", "--do_eval")
    )
    raw_datasets, _, _ = run_classification.load_labelled_documents(model_args, data_args, training_args)
    assert raw_datasets["train"]["id"] == [row["id"] for row in rows["test"]]
    assert raw_datasets["validation"]["id"] == [row["id"] for row in rows["train"]]


def test_a_file_replaces_the_split_of_the_named_dataset(rows, tmp_path):
    folder = str(hub_folder(tmp_path / "cail_small", rows))
    test_file = write_jsonl(tmp_path / "mine.jsonl", rows["validation"][:3])
    options = ["--dataset_name", folder, "--test_file", test_file, "--do_train", "--do_predict"]
    model_args, data_args, training_args = run_classification.parse_classification_arguments(
        classification_arguments(tmp_path, *options)
    )
    raw_datasets, _, _ = run_classification.load_labelled_documents(model_args, data_args, training_args)
    assert raw_datasets["test"]["id"] == [row["id"] for row in rows["validation"][:3]]
    assert len(raw_datasets["train"]) == len(rows["train"])


def test_nested_fields_are_named_with_dots(rows, tmp_path):
    files = {
        split: write_jsonl(tmp_path / f"{split}.jsonl", [nested(row) for row in part]) for split, part in rows.items()
    }
    options = [f"--{split}_file={path}" for split, path in files.items()]
    model_args, data_args, training_args = run_classification.parse_classification_arguments(
        classification_arguments(tmp_path, *options, "--label_column_name", "meta.label", "--do_train", "--do_predict")
    )
    raw_datasets, label_info, _ = run_classification.load_labelled_documents(model_args, data_args, training_args)
    assert raw_datasets["train"]["meta.label"] == [row["label"] for row in rows["train"]]
    assert raw_datasets["test"]["meta.id"] == [row["id"] for row in rows["test"]]
    assert label_info.label_names == ["civil", "criminal"]


def test_the_rows_key_of_a_json_file_is_found_in_each_form(rows, tmp_path):
    document = {"version": 1, "data": rows["test"]}
    one_line = tmp_path / "one_line.json"
    one_line.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
    assert json_rows_key(str(one_line), "--train_file", None) == "data"
    assert json_rows_key(write_json(tmp_path / "indented.json", document), "--train_file", None) == "data"
    assert json_rows_key(write_jsonl(tmp_path / "lines.json", rows["test"]), "--train_file", None) is None
    assert json_rows_key(write_jsonl(tmp_path / "one_row.json", [{"text": "x", "label": "civil"}]), "-", None) is None
    assert json_rows_key(write_json(tmp_path / "array.json", rows["test"]), "--train_file", None) is None


def test_text_column_names_of_transformers_reads_a_text_pair(rows, tmp_path):
    pairs = [{"first": row["text"][:40], "second": row["text"][40:80], "label": row["label"]} for row in rows["train"]]
    train_file = write_jsonl(tmp_path / "pairs.jsonl", pairs)
    _, data_args, _ = run_classification.parse_classification_arguments(
        classification_arguments(
            tmp_path, "--do_train", "--train_file", train_file, "--text_column_names", "first,second"
        )
    )
    assert (data_args.text_column_name, data_args.text_pair_column_name) == ("first", "second")
    with pytest.raises(ScriptError, match="give one text column, or two for a text pair"):
        run_classification.parse_classification_arguments(
            classification_arguments(
                tmp_path, "--do_train", "--train_file", train_file, "--text_column_names", "a,b,c"
            )
        )


# --- fine-tuning and pretraining to completion ---


@pytest.mark.parametrize(
    "layout", ["hub_folder", "hub_id_in_cache", "dataset_folder", "parquet", "arrow", "data_keyed_json"]
)
def test_run_classification_fine_tunes_on_the_layout(layout, rows, tmp_path):
    arguments = classification_arguments(tmp_path, *layout_arguments(layout, tmp_path, rows))
    metrics = run_classification.main([*arguments, "--do_train", "--do_eval", "--do_predict"])
    assert metrics["train_samples"] == len(rows["train"]) and metrics["eval_samples"] == len(rows["validation"])
    assert 0.0 <= metrics["test_accuracy"] <= 1.0
    predictions = (tmp_path / "out" / "predictions.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["id"] for line in predictions] == [row["id"] for row in rows["test"]]
    config = json.loads((tmp_path / "out" / "config.json").read_text(encoding="utf-8"))
    assert config["id2label"] == {"0": "civil", "1": "criminal"}


def test_run_classification_fine_tunes_on_nested_json(rows, tmp_path):
    files = {
        split: write_jsonl(tmp_path / f"{split}.jsonl", [nested(row) for row in part]) for split, part in rows.items()
    }
    options = [option for split, path in files.items() for option in (f"--{split}_file", path)]
    metrics = run_classification.main(
        classification_arguments(
            tmp_path, *options, "--label_column_name", "meta.label", "--do_train", "--do_eval", "--do_predict"
        )
    )
    assert metrics["train_samples"] == len(rows["train"]) and "test_accuracy" in metrics
    predictions = [json.loads(line) for line in (tmp_path / "out" / "predictions.jsonl").read_text().splitlines()]
    assert [prediction["label"] for prediction in predictions] == [row["label"] for row in rows["test"]]


@pytest.fixture(scope="module")
def news(tmp_path_factory) -> tuple[Path, list[str]]:
    """The first 120 paragraphs of the People's Daily sample, as a Hub-layout folder and a save_to_disk folder."""
    with open(PEOPLES_DAILY_SAMPLE, encoding="utf-8") as file:
        lines = [next(file).strip() for _ in range(120)]
    folder = tmp_path_factory.mktemp("news")
    write_parquet(folder / "peoples_daily" / "data" / "train-00000-of-00001.parquet", [{"text": t} for t in lines])
    readme = "---\nconfigs:\n- config_name: default\n  data_files:\n  - split: train\n    path: data/train-*\n---\n"
    (folder / "peoples_daily" / "README.md").write_text(readme, encoding="utf-8")
    nested_rows = [{"body": {"text": line}} for line in lines]
    datasets.Dataset.from_list(nested_rows).save_to_disk(folder / "saved")
    return folder, lines


@pytest.mark.parametrize(
    "layout", [("peoples_daily", "--text_column_name", "text"), ("saved", "--text_column_name", "body.text")]
)
def test_run_mlm_pretrains_on_a_hub_folder_and_a_saved_dataset(layout, news, tmp_path):
    folder, lines = news
    name, *options = layout
    arguments = [
        *("--dataset_name", str(folder / name), *options, "--tokenizer_name", str(DEMO_VOCAB)),
        *("--config_overrides", TINY_MODEL, "--stages", "32:4:2", "--per_device_train_batch_size", "4"),
        *("--validation_split_percentage", "10", "--max_eval_samples", "8", "--output_dir", str(tmp_path / "out")),
        *("--report_to", "none", "--disable_tqdm", "true", "--bf16", "false", "--save_steps", "2"),
    ]
    model_args, data_args, _, _ = run_mlm.parse_mlm_arguments(arguments)
    corpus, _ = run_mlm.load_corpus(data_args, model_args)
    assert [*corpus["train"]["text"], *corpus["validation"]["text"]] == lines  # the last 10% held out, in order
    table = run_mlm.main(arguments)
    assert table[-1]["steps"] == 2 and "eval_accuracy" in table[-1] and "train_loss" in table[-1]
    assert (tmp_path / "out" / "model.safetensors").is_file()


def test_load_splits_streams_nested_fields(news, tmp_path):
    folder, lines = news
    _, data_args, _, _ = run_mlm.parse_mlm_arguments(
        ["--dataset_name", str(folder / "saved"), "--text_column_name", "body.text", "--streaming", "--max_steps", "1"]
    )
    streamed, sources = load_splits(data_args, {"train": None, "validation": None}, ["body.text"], streaming=True)
    assert [row["body.text"] for row in streamed["train"]] == lines
    assert sources == {"train": f"--dataset_name {folder / 'saved'} (split 'train')"}


# --- refusals: one line naming the source, the field and the fix ---


def empty_folder(tmp: Path) -> Path:
    """A folder beside the run's output folder (not around it, which the scripts refuse first)."""
    folder = tmp / "empty"
    folder.mkdir(exist_ok=True)
    return folder


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            lambda tmp, rows: ["--dataset_name", "someone/not-cached"],
            "no Hub dataset of that id in the datasets cache",
        ),
        (
            lambda tmp, rows: ["--dataset_name", str(hub_folder(tmp / "d", rows)), "--dataset_config_name", "nope"],
            "has no configuration 'nope'",
        ),
        (
            lambda tmp, rows: ["--dataset_name", str(hub_folder(tmp / "d", rows)), "--train_split_name", "dev"],
            r"has no split 'dev' \(its splits: train, validation, test\): name the train split with --train_split_name",
        ),
        (
            lambda tmp, rows: ["--dataset_name", str(empty_folder(tmp))],
            "holds no data files datasets reads",
        ),
        (
            lambda tmp, rows: [
                "--train_file",
                write_json(tmp / "t.json", {"data": rows["train"], "more": rows["test"]}),
            ],
            r"holds lists of rows under several keys \(data, more\): name the one to read with --json_field",
        ),
        (
            lambda tmp, rows: [
                *("--train_file", write_json(tmp / "t.json", {"rows": rows["train"]}), "--json_field", "data"),
            ],
            r"the key 'data' is not there, not a list of rows \(its keys: rows\): name the key",
        ),
        (
            lambda tmp, rows: ["--train_file", write_jsonl(tmp / "t.jsonl", rows["train"]), "--json_field", "data"],
            "is not one JSON object with rows under a key .*: leave out --json_field data",
        ),
        (
            lambda tmp, rows: [
                "--train_file",
                str(
                    datasets.DatasetDict(train=datasets.Dataset.from_list(rows["train"])).save_to_disk(tmp / "dd")
                    or tmp / "dd"
                ),
            ],
            r"holds a DatasetDict \(splits: train\), not one split: give it as --dataset_name",
        ),
        (lambda tmp, rows: ["--train_file", str(empty_folder(tmp))], "is a folder, not a data file"),
        (
            lambda tmp, rows: [
                *("--train_file", write_jsonl(tmp / "t.jsonl", [nested(row) for row in rows["train"]])),
                *("--label_column_name", "meta.lable"),
            ],
            r"no column 'meta.lable' \(its columns: text, meta.label, meta.id\): name the right one with --label_column",
        ),
    ],
)
def test_a_bad_source_gets_one_line(options, message, rows, tmp_path):
    arguments = classification_arguments(tmp_path / "run", *options(tmp_path, rows), "--do_train")
    with pytest.raises(ScriptError, match=message) as refusal:
        model_args, data_args, training_args = run_classification.parse_classification_arguments(arguments)
        run_classification.load_labelled_documents(model_args, data_args, training_args)
    assert "\n" not in str(refusal.value)


# --- splits of other names, and the two offline cases: several configurations cached, a dataset `hf download` fetched ---


def test_a_split_of_another_name_is_named_with_its_option(rows, tmp_path, caplog):
    """A dataset with train/dev/test read where `validation` is looked for: one line names `dev` and the option, and
    (issue 52) what the run evaluates on instead: 5% of train held out (run_mlm.py's default)."""
    folder = split_folder(
        tmp_path / "cail_dev", {"train": rows["train"], "dev": rows["validation"], "test": rows["test"]}
    )
    _, data_args, _, _ = run_mlm.parse_mlm_arguments(["--dataset_name", str(folder), "--max_steps", "1"])
    with caplog.at_level("WARNING", logger="roformer_hf.training.data.sources"):
        splits, _ = load_splits(data_args, {"train": None, "validation": None}, ["text"], str(tmp_path / "cache"))
    assert list(splits) == ["train"]
    assert [record.getMessage() for record in caplog.records] == [
        f"--dataset_name {folder} has no split 'validation', but has 'dev', 'test': the run evaluates on 5% of the "
        "train split, held out of training, instead; to read one as the validation split, pass --validation_split_name "
        "dev."
    ]
    caplog.clear()
    _, data_args, _, _ = run_mlm.parse_mlm_arguments(
        ["--dataset_name", str(folder), "--validation_split_name", "dev", "--max_steps", "1"]
    )
    splits, _ = load_splits(data_args, {"train": None, "validation": None}, ["text"], str(tmp_path / "cache"))
    assert splits["validation"]["text"] == [row["text"] for row in rows["validation"]] and not caplog.records


def cache_of_two_configurations(tmp: Path, rows: dict[str, list[dict]]) -> Path:
    """A datasets cache holding both configurations of the Hub dataset someone/cail_small (see cached_hub_dataset)."""
    cache = tmp / "datasets_cache"
    folder = str(hub_folder(tmp / "download" / "cail_small", rows))
    for config in ("default", "first_half"):
        datasets.load_dataset(folder, config, cache_dir=str(cache))
    (cache / "cail_small").rename(cache / "someone___cail_small")
    shutil.rmtree(tmp / "download")
    return cache


def test_a_hub_dataset_fetched_with_hf_download_is_read_offline(rows, tmp_path, monkeypatch, caplog):
    """`hf download someone/cail_small --repo-type dataset` leaves the files in the Hub cache, not the datasets
    cache: offline, --dataset_name someone/cail_small reads them there, with a line naming the folder."""
    hub_cache = tmp_path / "hub"
    repo = hub_cache / "datasets--someone--cail_small"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("0123abcd")
    snapshot = hub_folder(repo / "snapshots" / "0123abcd", rows)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(hub_cache))
    _, data_args, _, _ = run_mlm.parse_mlm_arguments(["--dataset_name", "someone/cail_small", "--max_steps", "1"])
    with caplog.at_level("WARNING", logger="roformer_hf.training.data.sources"):
        splits, _ = load_splits(data_args, {"train": None}, ["text"], str(tmp_path / "datasets_cache"))
    assert splits["train"]["text"] == [row["text"] for row in rows["train"]]
    assert [record.getMessage() for record in caplog.records] == [
        f"--dataset_name someone/cail_small: not in the datasets cache, reading the copy `hf download` fetched, "
        f"{snapshot} (pass that folder as --dataset_name to read it so directly)"
    ]


# --- data read as it is, never written into (issue 44) ---


def folder_state(folder: Path) -> dict[str, bytes]:
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


@pytest.mark.parametrize("option", ["--dataset_name", "--train_file"])
def test_a_saved_dataset_is_never_written_into(option, rows, tmp_path):
    """`datasets` writes the cache files of `map` beside the data files it reads: a save_to_disk folder is read
    through a view in --cache_dir, so that the run adds no file to it (and a read-only one works)."""
    datasets.Dataset.from_list(rows["train"]).save_to_disk(tmp_path / "saved")
    before = folder_state(tmp_path / "saved")
    arguments = classification_arguments(tmp_path, option, str(tmp_path / "saved"), "--do_train")
    run_classification.main([*arguments, "--validation_split_percentage", "20", "--do_eval"])
    assert folder_state(tmp_path / "saved") == before
    assert list((tmp_path / "cache" / "saved_to_disk").glob("saved-*/cache-*.arrow"))  # the map's caches, here


def test_a_dataset_folder_of_mixed_formats_is_refused(rows, tmp_path):
    """datasets reads only the files of the most common format of a folder without configs: a vocabulary .txt beside
    the .jsonl of documents would be read as the corpus, the documents left out."""
    folder = tmp_path / "mixed"
    folder.mkdir()
    (folder / "vocab.txt").write_text("".join(f"token{index}\n" for index in range(50)), encoding="utf-8")
    (folder / "train.jsonl").write_text(
        "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows["train"]), encoding="utf-8"
    )
    with pytest.raises(ScriptError, match=r"holds data files of several formats \(1 json \(train.jsonl\); 1 text"):
        run_classification.load_labelled_documents(
            *run_classification.parse_classification_arguments(
                [*classification_arguments(tmp_path, "--dataset_name", str(folder)), "--do_train"]
            )
        )
    (folder / "README.md").write_text("---\nconfigs:\n- config_name: default\n  data_files: train.jsonl\n---\n")
    model_args, data_args, training_args = run_classification.parse_classification_arguments(
        [*classification_arguments(tmp_path, "--dataset_name", str(folder)), "--do_train"]
    )
    raw_datasets, _, _ = run_classification.load_labelled_documents(model_args, data_args, training_args)
    assert raw_datasets["train"]["text"] == [row["text"] for row in rows["train"]]


def test_a_hub_layout_folder_is_read_anew_by_place_and_content(rows, tmp_path):
    """datasets keys a folder with configs by its base name and configs alone: a second folder of the same name, or
    the same folder with new files, were read as the first one's rows from the cache."""
    cache = str(tmp_path / "cache")
    first, second = hub_folder(tmp_path / "a" / "cail", rows), tmp_path / "b" / "cail"
    other_rows = {split: part[::-1] for split, part in rows.items()}
    hub_folder(second, other_rows)
    assert load_dataset_by_name(str(first), None, cache, False)["validation"]["text"][:] == [
        row["text"] for row in rows["validation"]
    ]
    assert load_dataset_by_name(str(second), None, cache, False)["validation"]["text"][:] == [
        row["text"] for row in other_rows["validation"]
    ]
    write_parquet(first / "data" / "validation-00000-of-00001.parquet", rows["test"])  # the same folder, new data
    assert load_dataset_by_name(str(first), None, cache, False)["validation"]["text"][:] == [
        row["text"] for row in rows["test"]
    ]


@pytest.mark.parametrize("differs", ["order", "names"])
def test_class_labels_declared_differently_by_the_files_are_refused(differs, tmp_path):
    """A dev split saved with its own ClassLabel: datasets reads its ids by the train file's names, silently."""
    dev_names = ["civil", "criminal"] if differs == "order" else ["civil", "criminal", "theft"]
    folder = tmp_path / "cail"
    for split, names in (("train", ["criminal", "civil"]), ("dev", dev_names)):
        features = datasets.Features({"text": datasets.Value("string"), "label": datasets.ClassLabel(names=names)})
        part = datasets.Dataset.from_dict({"text": ["一", "二"], "label": [0, 1]}, features=features)
        (folder / "data").mkdir(parents=True, exist_ok=True)
        part.to_parquet(str(folder / "data" / f"{split}-00000-of-00001.parquet"))
    with pytest.raises(ScriptError) as refusal:
        load_dataset_by_name(str(folder), None, str(tmp_path / "cache"), False)
    assert str(refusal.value) == (
        f"--dataset_name {folder}: the files declare the classes of column 'label' differently "
        f"(data/dev-00000-of-00001.parquet: {dev_names}; data/train-00000-of-00001.parquet: ['criminal', 'civil']), "
        "and datasets would read every file's ids by one file's names: save every split with the same ClassLabel "
        "(cast_column with one ClassLabel), or give each split as its own file (--train_file, --validation_file), "
        "read by its own names."
    )


def test_the_line_for_a_missing_split_proposes_the_split_named_for_its_role(rows, tmp_path, caplog):
    """Splits train/dev/testing read where `test` is looked for: the line proposes `testing`, not the first, `dev`."""
    splits = {"train": rows["train"], "dev": rows["validation"], "testing": rows["test"]}
    folder = split_folder(tmp_path / "cail_testing", splits)
    arguments = ["--dataset_name", str(folder), "--output_dir", str(tmp_path / "out"), "--do_predict"]
    _, data_args, _ = run_classification.parse_classification_arguments(arguments)
    with caplog.at_level("WARNING", logger="roformer_hf.training.data.sources"):
        load_splits(data_args, {"train": None, "test": None}, ["text"], str(tmp_path / "cache"))
    assert [record.getMessage() for record in caplog.records] == [
        f"--dataset_name {folder} has no split 'test', but has 'dev', 'testing': to read one as the test split, pass "
        "--test_split_name testing."
    ]
