"""The table of data formats (roformer_hf/training/data/files.py `DATA_FORMATS`), tab-separated corpora, the one
boundary through which data is read (`read_data`), and labels checked against the config a run builds: the bad inputs
of the issue-50-to-52 table of docs/bad_inputs.md each get the one line the table shows, exit status 1, and leave
every file the user had byte-identical; the layouts the table adds are read and trained on.

To add a case: one entry in `CASES`, one row in that table.
"""

import json
from collections.abc import Callable
from pathlib import Path

import datasets
import huggingface_hub
import pytest
from conftest import check_table_names_the_cases
from test_bad_inputs import (
    BOTH,
    DEMO_VOCAB,
    ROWS,
    TINY_MODEL,
    script_parameters,
    tiny_run,
    with_value,
    write_jsonl,
)
from test_bad_settings_and_data import check_one_line_and_files_kept

import run_classification
from roformer_hf.training.data.files import DATA_FORMATS, FILE_KINDS, data_format
from roformer_hf.training.data.sources import load_data_file, load_splits
from roformer_hf.training.errors import ScriptError

TABLE_HEADER = "## Data formats, tab-separated corpora, unreadable dataset files and label overrides"


def label_tab_text(path: Path, rows: list[dict] = ROWS) -> Path:
    """The THUCNews / cnews layout: a line a row, `label<TAB>text`, no header line."""
    path.write_text("".join(f"{row['label']}\t{row['text']}\n" for row in rows), encoding="utf-8")
    return path


def run_on(make_file: Callable[[Path], Path], *extra: str) -> Callable:
    """A tiny run whose --train_file is `make_file(tmp)`."""
    return lambda script, tmp, monkeypatch: tiny_run(script, tmp, make_file(tmp), *extra)


def with_extra_tab(tmp: Path) -> Path:
    path = label_tab_text(tmp / "cnews.txt")
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[2] = lines[2].replace("。", "。\t来源：裁判文书网", 1)  # a third field on line 3
    path.write_text("".join(lines), encoding="utf-8")
    return path


def dataset_folder(tmp: Path, files: dict[str, bytes]) -> Path:
    (tmp / "cail").mkdir()
    for name, content in files.items():
        (tmp / "cail" / name).write_bytes(content)
    return tmp / "cail"


def jsonl_bytes(rows: list[dict], encoding: str = "utf-8") -> bytes:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode(encoding)


def named_dataset(make_folder: Callable[[Path], Path]) -> Callable:
    """A tiny run on `--dataset_name make_folder(tmp)` instead of a train file."""

    def arguments(script: str, tmp: Path, monkeypatch) -> list[str]:
        folder = make_folder(tmp)
        arguments = tiny_run(script, tmp, folder)
        arguments[arguments.index("--train_file")] = "--dataset_name"
        return arguments

    return arguments


BAD_CARD = "---\nconfigs:\n- config_name: default\n  data_files: [train.jsonl\n---\n# CAIL\n"


def saved_with_a_cut_state(tmp: Path) -> Path:
    datasets.Dataset.from_list(ROWS).save_to_disk(tmp / "saved")
    state = tmp / "saved" / "state.json"
    state.write_text(state.read_text(encoding="utf-8")[:40], encoding="utf-8")  # a copy cut short
    return tmp / "saved"


def three_labels_on_two_label_data(script: str, tmp: Path, monkeypatch) -> list[str]:
    arguments = tiny_run(script, tmp, write_jsonl(tmp / "train.jsonl", ROWS))
    return with_value(arguments, "--config_overrides", f"{TINY_MODEL},num_labels=3")


def saved_without_its_arrow_file(tmp: Path) -> Path:
    datasets.Dataset.from_list(ROWS).save_to_disk(tmp / "saved")
    next((tmp / "saved").glob("*.arrow")).unlink()  # a copy in part
    return tmp / "saved"


# id -> (where, as in the table's second column; the arguments, given the script, a temporary folder and monkeypatch)
CASES: dict[str, tuple[str, Callable]] = {
    "txt_of_label_tab_text_lines": ("run_classification.py", run_on(lambda tmp: label_tab_text(tmp / "cnews.txt"))),
    "tsv_without_its_header_line": ("run_classification.py", run_on(lambda tmp: label_tab_text(tmp / "cnews.tsv"))),
    "columns_of_a_line_with_another_tab": (
        "run_classification.py",
        run_on(with_extra_tab, "--columns", "label,text"),
    ),
    "columns_given_to_a_jsonl": (BOTH, run_on(lambda tmp: write_jsonl(tmp / "train.jsonl", ROWS), "--columns", "a,b")),
    "columns_naming_one_twice": (
        "run_classification.py",
        run_on(lambda tmp: label_tab_text(tmp / "cnews.txt"), "--columns", "text,text"),
    ),
    "dataset_card_of_bad_yaml": (
        BOTH,
        named_dataset(
            lambda tmp: dataset_folder(tmp, {"train.jsonl": jsonl_bytes(ROWS), "README.md": BAD_CARD.encode()})
        ),
    ),
    "saved_dataset_of_a_cut_state_json": (BOTH, named_dataset(saved_with_a_cut_state)),
    "saved_dataset_without_its_arrow_file": (BOTH, named_dataset(saved_without_its_arrow_file)),
    "dataset_folder_of_gbk_json_lines": (
        BOTH,
        named_dataset(
            lambda tmp: dataset_folder(
                tmp, {"train.jsonl": jsonl_bytes(ROWS, "gbk"), "validation.jsonl": jsonl_bytes(ROWS)}
            )
        ),
    ),
    "dataset_folder_of_a_damaged_parquet": (
        "run_classification.py",
        named_dataset(lambda tmp: dataset_folder(tmp, {"train.parquet": b"PAR1" + b"cut short" * 4 + b"PAR1"})),
    ),
    "num_labels_override_of_two_label_data": ("run_classification.py", three_labels_on_two_label_data),
}


def test_the_table_and_the_cases_name_the_same_bad_inputs():
    check_table_names_the_cases(TABLE_HEADER, CASES)


@pytest.fixture(autouse=True)
def hub_offline(monkeypatch):
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)


@pytest.mark.parametrize(("case", "script"), script_parameters(CASES))
def test_bad_input_gets_one_line_and_keeps_the_files(case, script, tmp_path, capsys, monkeypatch):
    check_one_line_and_files_kept(TABLE_HEADER, CASES, case, script, tmp_path, capsys, monkeypatch)


# --- one table of formats ---


def test_every_format_of_the_table_is_read_by_its_suffix_and_says_its_columns(tmp_path):
    """Each row of DATA_FORMATS: a file of each of its suffixes (in any case) loads to the rows written, its schema
    names the columns read, and the list of kinds every message shows names the suffix."""
    table = datasets.Dataset.from_list(ROWS)
    writers = {
        "csv": lambda path: table.to_csv(str(path), index=False),
        "tsv": lambda path: table.to_csv(str(path), index=False, sep="\t"),
        "json": lambda path: table.to_json(str(path), force_ascii=False),
        "parquet": lambda path: table.to_parquet(str(path)),
        "arrow": lambda path: table.to_pandas().to_feather(str(path)),
        "text": lambda path: path.write_text("".join(row["text"] + "\n" for row in ROWS), encoding="utf-8"),
    }
    assert sorted(writers) == sorted(found.name for found in DATA_FORMATS)
    for found in DATA_FORMATS:
        for suffix in found.suffixes:
            path = tmp_path / f"train{suffix.upper()}"
            writers[found.name](path)
            assert data_format(path) is found and suffix in FILE_KINDS
            rows = load_data_file(str(path), "--train_file", str(tmp_path / "cache"))
            expected = [row["text"] for row in ROWS]
            assert rows["text"] == expected, f"{path.name}: other rows than written"
            assert list(found.schema(path)) == rows.column_names, f"{path.name}: the schema names other columns"


# --- tab-separated corpora ---


def test_a_label_tab_text_file_trains_with_one_option(tmp_path):
    """THUCNews' layout, `label<TAB>text` lines without a header, trains with --columns label,text alone: the labels
    are the file's, and a text that begins with a quotation mark is read as it is (a tab-separated file quotes
    nothing)."""
    rows = [{**row, "text": f'"{row["text"]}' if index == 0 else row["text"]} for index, row in enumerate(ROWS)]
    train = label_tab_text(tmp_path / "cnews.train.txt", rows)
    arguments = [
        *("--train_file", str(train), "--columns", "label,text", "--do_train", "--do_eval"),
        *("--validation_file", str(train), "--tokenizer_name", str(DEMO_VOCAB)),
        *("--config_overrides", TINY_MODEL, "--max_seq_length", "16", "--max_steps", "2"),
        *("--per_device_train_batch_size", "4", "--output_dir", str(tmp_path / "out"), "--save_strategy", "no"),
        *("--cache_dir", str(tmp_path / "cache"), "--report_to", "none", "--bf16", "false"),
    ]
    model_args, data_args, training_args = run_classification.parse_classification_arguments(arguments)
    raw_datasets, label_info, _ = run_classification.load_labelled_documents(model_args, data_args, training_args)
    assert raw_datasets["train"].to_list() == [{"label": row["label"], "text": row["text"]} for row in rows]
    assert label_info.label_names == ["civil", "criminal"]
    run_classification.main(arguments)
    config = json.loads((tmp_path / "out" / "config.json").read_text(encoding="utf-8"))
    assert config["id2label"] == {"0": "civil", "1": "criminal"}
    assert (tmp_path / "out" / "eval_results.json").is_file()


def test_a_folder_of_tsv_files_is_read_and_says_so(tmp_path, caplog):
    """--dataset_name a folder of .tsv files: read by datasets (a header line each), with one line saying so and
    naming --columns for files without a header."""
    (tmp_path / "cnews").mkdir()
    datasets.Dataset.from_list(ROWS).to_csv(str(tmp_path / "cnews" / "train.tsv"), index=False, sep="\t")
    _, data_args, _ = run_classification.parse_classification_arguments(
        ["--dataset_name", str(tmp_path / "cnews"), "--output_dir", str(tmp_path / "out"), "--do_train"]
    )
    with caplog.at_level("WARNING", logger="roformer_hf.training.data.folders"):
        splits, _ = load_splits(data_args, {"train": None}, ["text", "label"], str(tmp_path / "cache"))
    assert splits["train"]["label"] == [row["label"] for row in ROWS]
    assert [record.getMessage() for record in caplog.records] == [
        f"--dataset_name {tmp_path / 'cnews'}: reading its .tsv files as tab-separated columns named by their first "
        "line (text, label in train.tsv); for label<TAB>text lines without such a line, give each file as "
        "--train_file / --validation_file with --columns label,text."
    ]


# --- dataset splits and configurations (issue 52, point 5) ---


def test_the_dev_split_line_says_what_the_run_evaluates_on_instead(tmp_path, caplog):
    """A dataset of train/dev where run_classification.py looks for `validation`: the line says the run evaluates on
    --validation_split_percentage of train held out instead, and names --validation_split_name dev."""
    from test_data_sources import split_folder

    folder = split_folder(tmp_path / "cail_dev", {"train": ROWS, "dev": ROWS[:4]})
    arguments = ["--dataset_name", str(folder), "--output_dir", str(tmp_path / "out"), "--do_train", "--do_eval"]
    _, data_args, _ = run_classification.parse_classification_arguments(arguments)
    with caplog.at_level("WARNING", logger="roformer_hf.training.data.sources"):
        load_splits(data_args, {"train": None, "validation": None}, ["text", "label"], str(tmp_path / "cache"))
    assert [record.getMessage() for record in caplog.records] == [
        f"--dataset_name {folder} has no split 'validation', but has 'dev': the run evaluates on 10% of the train "
        "split, held out of training, instead; to read one as the validation split, pass --validation_split_name dev."
    ]


def test_the_configuration_proposed_offline_has_the_columns_the_run_reads(tmp_path):
    """Offline, a Hub dataset cached in two configurations, the alphabetically first without labels: the line
    proposes the one that has the text and label columns."""
    from test_data_sources import write_parquet

    folder = tmp_path / "download" / "cail_small"
    write_parquet(folder / "data" / "train.parquet", ROWS)
    write_parquet(folder / "all_text" / "train.parquet", [{"text": row["text"]} for row in ROWS])
    (folder / "README.md").write_text(
        "---\nconfigs:\n- config_name: labelled\n  data_files: data/train.parquet\n- config_name: all_text\n"
        "  data_files: all_text/train.parquet\n---\n",
        encoding="utf-8",
    )
    cache = tmp_path / "datasets_cache"
    for config in ("labelled", "all_text"):
        datasets.load_dataset(str(folder), config, cache_dir=str(cache))
    (cache / "cail_small").rename(cache / "someone___cail_small")
    _, data_args, _ = run_classification.parse_classification_arguments(
        ["--dataset_name", "someone/cail_small", "--output_dir", str(tmp_path / "out"), "--do_train"]
    )
    with pytest.raises(ScriptError) as refusal:
        load_splits(data_args, {"train": None}, ["text", None, "label"], str(cache))
    assert str(refusal.value) == (
        "--dataset_name someone/cail_small has several configurations in the datasets cache (all_text, labelled): "
        "name the one to read with --dataset_config_name (e.g. --dataset_config_name labelled, which has the columns "
        "text, label)."
    )


# --- labels against the config a run builds (issue 51, point 3) ---


def test_an_override_that_repeats_the_data_labels_is_no_contradiction(tmp_path):
    """`num_labels=2` on two-label data builds the classifier of the data's labels, as without it."""
    train = write_jsonl(tmp_path / "train.jsonl", ROWS)
    run_classification.main(
        [
            *("--train_file", str(train), "--tokenizer_name", str(DEMO_VOCAB)),
            *("--config_overrides", f"{TINY_MODEL},num_labels=2", "--max_seq_length", "16", "--max_steps", "1"),
            *("--do_train", "--output_dir", str(tmp_path / "out"), "--save_strategy", "no", "--report_to", "none"),
            *("--cache_dir", str(tmp_path / "cache"), "--bf16", "false"),
        ]
    )
    config = json.loads((tmp_path / "out" / "config.json").read_text(encoding="utf-8"))
    assert config["id2label"] == {"0": "civil", "1": "criminal"}
