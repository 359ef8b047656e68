"""The bad inputs of the issue-44 table of docs/bad_inputs.md (output folders shared with the user's files, data
folders read as they are, resumes checked by content, configs checked where they are read): each gets the one line
the table shows, exit status 1, and leaves every file the user had byte-identical.

To add a case: one entry in `CASES`, one row in that table. The issue-51 table (one check for a config value whatever
its route, model files that cannot be read) has its own, `ROUTE_CASES`, at the end.
"""

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import huggingface_hub
import pytest
import transformers
from conftest import bad_input_rows, check_table_names_the_cases
from test_bad_inputs import (
    BOTH,
    DEMO_VOCAB,
    ROWS,
    SCRIPTS,
    TINY_MODEL,
    good_run,
    overrides_run,
    run_in_process,
    script_parameters,
    template_pattern,
    tiny_run,
    training_run,
    with_value,
    write_jsonl,
)
from test_bad_settings_and_data import file_digests

from roformer_hf import (
    RoFormerConfig,
    RoFormerForMaskedLM,
    RoFormerForSequenceClassification,
    RoFormerJiebaTokenizer,
    RoFormerModel,
)

TABLE_HEADER = "## Output folders shared with the user"


def user_file_in_output_dir(name: str, content: str, *extra: str) -> Callable:
    """A run into an --output_dir where the user keeps `name` (a file no run wrote there)."""

    def arguments(script: str, tmp: Path, monkeypatch) -> list[str]:
        (tmp / "out").mkdir()
        (tmp / "out" / name).write_text(content, encoding="utf-8")
        (tmp / "out" / "notes.txt").write_text("my notes\n", encoding="utf-8")
        return tiny_run(script, tmp, write_jsonl(tmp / "train.jsonl", ROWS), *extra)

    return arguments


def earlier_run_then(change: Callable[[Path], None], *extra: str) -> Callable:
    """A finished 2-step run (a checkpoint a step), then `change` to its output folder, then the run again with
    `extra`."""

    def arguments(script: str, tmp: Path, monkeypatch) -> list[str]:
        first = training_run(script, tmp, "--save_steps", "1", "--logging_steps", "1")
        first = with_value(first, "--save_strategy", "steps")
        first = with_value(first, "--max_steps", "2")
        SCRIPTS[script].main(first)
        change(tmp / "out")
        return [*first, *extra]

    return arguments


def add_notes_to_checkpoint(out: Path) -> None:
    (out / "checkpoint-1" / "my_notes.txt").write_text("what I saw at step 1\n", encoding="utf-8")


def add_user_checkpoint_folder(out: Path) -> None:
    (out / "checkpoint-7").mkdir()
    (out / "checkpoint-7" / "config.json").write_text(USER_CONFIG, encoding="utf-8")
    (out / "checkpoint-7" / "model.safetensors").write_bytes(b"a model of the user's")


def link_the_record(out: Path) -> None:
    other = out.parent / "other_record.json"
    other.write_text(json.dumps({"files": ["README.md", "rope.py"]}), encoding="utf-8")
    (out / ".roformer_hf_outputs.json").unlink()
    (out / ".roformer_hf_outputs.json").symlink_to(other)


def break_the_record(out: Path) -> None:
    (out / ".roformer_hf_outputs.json").write_text('{"files": ["README.md", ', encoding="utf-8")


def dataset_folder(files: dict[str, str]) -> Callable:
    """--dataset_name a folder of `files` (name -> content)."""

    def arguments(script: str, tmp: Path, monkeypatch) -> list[str]:
        (tmp / "data").mkdir()
        for name, content in files.items():
            (tmp / "data" / name).write_text(content, encoding="utf-8")
        arguments = tiny_run(script, tmp, tmp / "data")
        arguments[arguments.index("--train_file")] = "--dataset_name"
        return arguments

    return arguments


def cache_dir_in_dataset_folder(script: str, tmp: Path, monkeypatch) -> list[str]:
    arguments = dataset_folder({"train.jsonl": JSONL_ROWS})
    arguments = arguments(script, tmp, monkeypatch)
    cache = ["--cache_dir", str(tmp / "data" / "cache")]
    return with_value(arguments, "--cache_dir", cache[1]) if "--cache_dir" in arguments else [*arguments, *cache]


JSONL_ROWS = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in ROWS)
CSV_ROWS = "text,label\n" + "".join(f"{row['text']},{row['label']}\n" for row in ROWS)
TSV_ROWS = CSV_ROWS.replace(",", "\t")


def mixed_dataset_folder(script: str, tmp: Path, monkeypatch) -> list[str]:
    """--dataset_name a folder of a vocabulary .txt (the most common format) beside the documents' .jsonl."""
    (tmp / "mixed").mkdir()
    (tmp / "mixed" / "vocab.txt").write_text("".join(f"token{index}\n" for index in range(60)), encoding="utf-8")
    (tmp / "mixed" / "vocab-extra.txt").write_text("token\n", encoding="utf-8")
    write_jsonl(tmp / "mixed" / "train.jsonl", ROWS)
    arguments = tiny_run(script, tmp, tmp / "mixed")
    arguments[arguments.index("--train_file")] = "--dataset_name"
    return arguments


def resumed_after(change: Callable[[Path, list[str]], list[str]]) -> Callable:
    """A resume of a finished 2-step run (a checkpoint a step) after `change` (given the folder and the first run's
    arguments, it edits what it edits and returns the resume's arguments)."""

    def arguments(script: str, tmp: Path, monkeypatch) -> list[str]:
        first = training_run(script, tmp, "--save_steps", "1", "--logging_steps", "1")
        first = with_value(first, "--save_strategy", "steps")
        first = with_value(first, "--max_steps", "2")
        SCRIPTS[script].main(first)
        return [*with_value(change(tmp, first), "--max_steps", "3"), "--resume_from_checkpoint", "true"]

    return arguments


def edit_train_file(tmp: Path, arguments: list[str]) -> list[str]:
    write_jsonl(tmp / "train.jsonl", [{**ROWS[0], "text": "被告人驾车撞人后逃逸。"}, *ROWS[1:]])
    return arguments


def other_max_train_samples(tmp: Path, arguments: list[str]) -> list[str]:
    return [*arguments, "--max_train_samples", "6"]


def resumed_with_early_stopping_on_edited_validation(script: str, tmp: Path, monkeypatch) -> list[str]:
    """A resume of a run that stops early on its --validation_file's evaluations, after that file was edited."""
    validation = ["--validation_file", str(write_jsonl(tmp / "validation.jsonl", ROWS[:4]))]
    evaluations = ["--early_stopping_patience", "3", "--eval_strategy", "steps", "--eval_steps", "1"]
    first = training_run(script, tmp, "--save_steps", "1", "--logging_steps", "1", *validation, *evaluations)
    first = with_value(with_value(first, "--save_strategy", "steps"), "--max_steps", "2")
    SCRIPTS[script].main(first)
    write_jsonl(tmp / "validation.jsonl", ROWS[1:5])
    return [*with_value(first, "--max_steps", "3"), "--resume_from_checkpoint", "true"]


def edited_config(**changes) -> Callable:
    """A run whose --config_name is a tiny config saved, then edited by hand in its config.json."""

    def arguments(script: str, tmp: Path, monkeypatch) -> list[str]:
        RoFormerConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2).save_pretrained(tmp / "config")
        saved = json.loads((tmp / "config" / "config.json").read_text(encoding="utf-8"))
        (tmp / "config" / "config.json").write_text(json.dumps({**saved, **changes}), encoding="utf-8")
        return [*tiny_run(script, tmp, write_jsonl(tmp / "train.jsonl", ROWS)), "--config_name", str(tmp / "config")]

    return arguments


def empty_parquet(script: str, tmp: Path, monkeypatch) -> list[str]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns = {"text": pa.array([], pa.string()), "label": pa.array([], pa.string())}
    pq.write_table(pa.table(columns), tmp / "train.parquet")
    return tiny_run(script, tmp, tmp / "train.parquet")


def dataset_folder_with_an_empty_split(script: str, tmp: Path, monkeypatch) -> list[str]:
    """--dataset_name a Hub-layout folder whose validation Parquet file has columns and no rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp / "cail" / "data").mkdir(parents=True)
    for split, rows in (("train", ROWS), ("validation", []), ("test", ROWS[:4])):
        columns = {name: pa.array([row[name] for row in rows], pa.string()) for name in ("text", "label")}
        pq.write_table(pa.table(columns), tmp / "cail" / "data" / f"{split}-00000-of-00001.parquet")
    arguments = tiny_run(script, tmp, tmp / "cail")
    arguments[arguments.index("--train_file")] = "--dataset_name"
    return [argument for argument in arguments if argument not in ("--validation_split_percentage", "20")]


def header_only_csv(script: str, tmp: Path, monkeypatch) -> list[str]:
    (tmp / "train.csv").write_text("text,label\n", encoding="utf-8")
    return tiny_run(script, tmp, tmp / "train.csv")


def file_of(name: str, content: bytes) -> Callable:
    """A run whose --train_file `name` holds `content`."""

    def arguments(script: str, tmp: Path, monkeypatch) -> list[str]:
        (tmp / name).write_bytes(content)
        return tiny_run(script, tmp, tmp / name)

    return arguments


# Traditional Chinese (Taiwan, Hong Kong) is usually saved as Big5.
BIG5_ROWS = [
    {"text": "被告人張三駕車逃逸，應承擔刑事責任。", "label": "criminal"},
    {"text": "原告與被告簽訂借款合同。", "label": "civil"},
]


USER_CONFIG = json.dumps({"model_type": "bert", "hidden_size": 768})

# id -> (where, as in the table's second column; the arguments, given the script, a temporary folder and monkeypatch)
CASES: dict[str, tuple[str, Callable]] = {
    "user_readme_in_output_dir": (BOTH, user_file_in_output_dir("README.md", "# my dataset\n")),
    "user_readme_with_overwrite": (
        BOTH,
        user_file_in_output_dir("README.md", "# my dataset\n", "--overwrite_output_dir"),
    ),
    "user_modeling_py_in_output_dir": ("run_classification.py", user_file_in_output_dir("modeling.py", "x = 1\n")),
    "user_vocab_txt_with_overwrite": (
        "run_mlm.py",
        user_file_in_output_dir("vocab.txt", "[PAD]\n[UNK]\n", "--overwrite_output_dir"),
    ),
    "user_config_json_with_overwrite": (
        "run_classification.py",
        user_file_in_output_dir("config.json", USER_CONFIG, "--overwrite_output_dir"),
    ),
    "dataset_folder_of_mixed_formats": (BOTH, mixed_dataset_folder),
    "resume_on_an_edited_train_file": (BOTH, resumed_after(edit_train_file)),
    "resume_with_other_max_train_samples": (BOTH, resumed_after(other_max_train_samples)),
    "user_trainer_state_without_a_model": (
        "run_classification.py",
        user_file_in_output_dir("trainer_state.json", "{}", "--overwrite_output_dir"),
    ),
    "user_file_inside_an_earlier_checkpoint": (
        BOTH,
        earlier_run_then(add_notes_to_checkpoint, "--overwrite_output_dir"),
    ),
    "user_checkpoint_folder_beside_a_run": (
        "run_classification.py",
        earlier_run_then(add_user_checkpoint_folder, "--overwrite_output_dir"),
    ),
    "output_record_a_symbolic_link": (
        "run_classification.py",
        earlier_run_then(link_the_record, "--overwrite_output_dir"),
    ),
    "output_record_broken_by_hand": ("run_mlm.py", earlier_run_then(break_the_record, "--overwrite_output_dir")),
    "dataset_folder_of_csv_and_tsv": (
        BOTH,
        dataset_folder({"train.csv": CSV_ROWS, "validation.tsv": TSV_ROWS}),
    ),
    "dataset_folder_with_a_compressed_csv": (
        "run_classification.py",
        dataset_folder({"train.jsonl": JSONL_ROWS, "validation.jsonl": JSONL_ROWS, "old.csv.gz": ""}),
    ),
    "cache_dir_inside_the_dataset_folder": (BOTH, cache_dir_in_dataset_folder),
    "resume_on_an_edited_validation_file_with_early_stopping": (
        "run_classification.py",
        resumed_with_early_stopping_on_edited_validation,
    ),
    "empty_parquet_file": (BOTH, empty_parquet),
    "csv_of_a_header_only": (BOTH, header_only_csv),
    "csv_of_only_a_byte_order_mark": (BOTH, file_of("train.csv", b"\xef\xbb\xbf")),
    "json_of_an_empty_array": (BOTH, file_of("train.json", b"[]\n")),
    "json_object_of_columns": (
        BOTH,
        file_of("train.json", json.dumps({name: [row[name] for row in ROWS] for name in ("text", "label")}).encode()),
    ),
    "dataset_folder_with_an_empty_split": (BOTH, dataset_folder_with_an_empty_split),
    "big5_jsonl": (
        "run_classification.py",
        file_of(
            "train.jsonl", "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in BIG5_ROWS * 5).encode("big5")
        ),
    ),
    "config_boolean_as_a_string": (BOTH, edited_config(use_bias="false")),
    "config_negative_layer_norm_eps": (BOTH, edited_config(layer_norm_eps=-1e-12)),
    "config_dropout_as_a_string": ("run_mlm.py", edited_config(hidden_dropout_prob="0.1")),
    "config_id2label_a_list": ("run_classification.py", edited_config(id2label=["civil", "criminal"])),
    "config_is_decoder_as_a_string": ("run_mlm.py", edited_config(is_decoder="false")),
    "config_label2id_disagrees": (
        "run_classification.py",
        edited_config(id2label={"0": "civil", "1": "criminal"}, label2id={"civil": 1, "criminal": 0}),
    ),
    "config_id2label_keys_not_ids": ("run_classification.py", edited_config(id2label={"civil": "civil"})),
    "config_pad_token_id_out_of_vocabulary": (BOTH, edited_config(pad_token_id=50000)),
    "config_hidden_act_unknown": ("run_mlm.py", edited_config(hidden_act="gelu_fancy")),
    "config_rope_theta_as_a_string": (
        "run_classification.py",
        edited_config(rope_parameters={"rope_type": "default", "rope_theta": "10000"}),
    ),
}


def test_the_table_and_the_cases_name_the_same_bad_inputs():
    check_table_names_the_cases(TABLE_HEADER, CASES)


@pytest.fixture(autouse=True)
def hub_offline(monkeypatch):
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)


@pytest.mark.parametrize(("case", "script"), script_parameters(CASES))
def test_bad_input_gets_one_line_and_keeps_the_files(case, script, tmp_path, capsys, monkeypatch):
    arguments = CASES[case][1](script, tmp_path, monkeypatch)
    before = file_digests(tmp_path)
    message = run_in_process(script, arguments, capsys)
    pattern = template_pattern(bad_input_rows(TABLE_HEADER)[case][2])
    assert pattern.fullmatch(message), f"{script} {case}:\n  got      {message}\n  expected {pattern.pattern}"
    if case.startswith("user_"):  # the flag would replace the user's files too
        assert "--overwrite_output_dir" not in message
    after = file_digests(tmp_path)
    assert {name: after.get(name) for name in before} == before  # every file the user had, byte-identical


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"final_layer_norm": "true"}, "final_layer_norm must be true or false, got 'true' (of type str)"),
        ({"embedding_layer_norm": 1}, "embedding_layer_norm must be true or false, got 1 (of type int)"),
        ({"layer_norm_eps": 0}, "layer_norm_eps must be a positive number "),
        (
            {"attention_probs_dropout_prob": float("nan")},
            "attention_probs_dropout_prob is a probability, so it must lie in [0, 1], got nan",
        ),
        ({"max_position_embeddings": 512.5}, "max_position_embeddings must be a whole number"),
        ({"label2id": "civil"}, "label2id must be a mapping"),
        ({"rope_parameters": ["default"]}, "rope_parameters must be a mapping"),
        ({"use_cache": "no"}, "use_cache must be true or false, got 'no' (of type str)"),
        ({"tie_word_embeddings": 0}, "tie_word_embeddings must be true or false, got 0 (of type int)"),
        (
            {"pad_token_id": -1},
            "pad_token_id must be the vocabulary id of [PAD] (0 to 49999), got -1.",
        ),
        ({"pad_token_id": "0"}, "pad_token_id must be the vocabulary id of [PAD] (0 to 49999), got '0'."),
        ({"hidden_act": 3}, "hidden_act must be one of transformers' ACT2FN (gelu, relu, ...), got 3."),
        ({"rope_parameters": {"rope_type": "ntk", "factor": "2"}}, "rope_parameters factor must be > 0"),
        (
            {"id2label": {"0": "civil", "2": "criminal"}},
            "id2label's keys must be the classifier's outputs 0, 1, ..., n - 1 (at least one), got ['0', '2']",
        ),
        ({"id2label": {"-1": "civil", "0": "criminal"}}, "got ['-1', '0']"),
        ({"id2label": {}}, "(at least one), got []"),
        (
            {"id2label": {"0": "civil", "1": "criminal"}, "label2id": {"x": 0, "y": 1}},
            'label2id ({"x": 0, "y": 1}) disagrees with id2label',
        ),
        ({"label2id": {"x": 0, "y": 1}}, "label2id is given without id2label"),
        ({"num_labels": -1}, "num_labels must be a whole number of at least 1, got -1"),
        ({"num_labels": "3"}, "num_labels must be a whole number of at least 1, got '3'"),
    ],
)
def test_a_config_json_with_a_bad_field_is_refused_when_read(change, named, tmp_path):
    """from_pretrained of a folder whose config.json was edited by hand: a ValueError naming the field."""
    RoFormerModel(RoFormerConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2)).save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text(encoding="utf-8"))
    (tmp_path / "config.json").write_text(json.dumps({**saved, **change}), encoding="utf-8")
    with pytest.raises(ValueError, match=re.escape(named)):
        RoFormerModel.from_pretrained(tmp_path)


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"use_bias": "false"}, "use_bias must be true or false"),
        ({"is_decoder": 1}, "is_decoder must be true or false"),
        ({"prediction_slot_rate": -0.1}, "prediction_slot_rate is a share of tokens"),
        ({"prediction_slot_rate": 1.5}, "prediction_slot_rate is a share of tokens"),
        ({"vocab_size": 10, "pad_token_id": 10}, "(0 to 9), got 10."),
        ({"label2id": {"civil": 0, "criminal": 1}}, "label2id is given without id2label"),
        ({"num_labels": 0}, "num_labels must be a whole number of at least 1, got 0"),
    ],
)
def test_a_config_made_in_python_with_a_bad_field_is_refused(fields, named):
    with pytest.raises(ValueError, match=re.escape(named)):
        RoFormerConfig(**fields)


def test_new_labels_given_to_from_pretrained_replace_both_maps(tmp_path):
    """id2label alone, given to from_pretrained of a classifier of other labels: label2id follows it (the saved one,
    which named the old labels, was kept beside the new id2label)."""
    saved = RoFormerConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, id2label={0: "a", 1: "b"})
    saved.label2id = {"a": 0, "b": 1}
    saved.save_pretrained(tmp_path)
    config = RoFormerConfig.from_pretrained(tmp_path, id2label={0: "x", 1: "y", 2: "z"})
    assert config.id2label == {0: "x", 1: "y", 2: "z"} and config.label2id == {"x": 0, "y": 1, "z": 2}


def test_a_keyword_of_from_pretrained_is_checked_too(tmp_path):
    """transformers sets from_pretrained's keyword arguments after the config is made: they are checked as well."""
    RoFormerConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="use_bias must be true or false, got 'false'"):
        RoFormerConfig.from_pretrained(tmp_path, use_bias="false")
    with pytest.raises(ValueError, match="num_labels must be a whole number of at least 1, got -1"):
        RoFormerConfig.from_pretrained(tmp_path, num_labels=-1)
    config, unused = RoFormerConfig.from_pretrained(tmp_path, num_labels=3, return_unused_kwargs=True, foo=1)
    assert config.num_labels == 3 and unused == {"foo": 1}


@pytest.mark.parametrize(
    "fields",
    [
        # transformers' own tests (tests/utils/test_configuration_utils.py's config_common_kwargs): ids as strings
        {"id2label": {0: "label"}, "label2id": {"label": "0"}, "problem_type": "regression"},
        {"id2label": {"0": "civil", "1": "criminal"}, "label2id": {"civil": 0, "criminal": 1}},
        {"num_labels": 5},
        {"layer_norm_eps": 1.0, "initializer_range": 0, "hidden_dropout_prob": 1, "attention_probs_dropout_prob": 0},
        {"pad_token_id": None, "hidden_act": "silu", "is_decoder": True, "use_cache": False},
        {"vocab_size": 99, "pad_token_id": 98, "prediction_slot_rate": 1.0, "tie_word_embeddings": False},
        {"rope_parameters": {"rope_type": "linear", "rope_theta": 10000, "factor": 2}},
    ],
)
def test_valid_configs_are_not_refused(fields, tmp_path):
    config = RoFormerConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, **fields)
    config.save_pretrained(tmp_path)
    assert RoFormerConfig.from_pretrained(tmp_path).to_dict() == config.to_dict()


@pytest.mark.parametrize("script", list(SCRIPTS))
def test_a_resume_on_the_same_data_at_another_path_goes_on(script, tmp_path):
    """Resumes compare the data by content: the same train file copied elsewhere (or only touched) is resumed from,
    as the content is what decides the rows (before, the other path was refused)."""
    arguments = resumed_after(lambda tmp, first: first)(script, tmp_path, None)
    (tmp_path / "moved").mkdir()
    (tmp_path / "moved" / "train.jsonl").write_bytes((tmp_path / "train.jsonl").read_bytes())
    (tmp_path / "train.jsonl").unlink()
    SCRIPTS[script].main(with_value(arguments, "--train_file", str(tmp_path / "moved" / "train.jsonl")))
    state = json.loads((tmp_path / "out" / "trainer_state.json").read_text(encoding="utf-8"))
    assert state["global_step"] == 3


def test_a_resume_on_a_dataset_folder_given_a_hidden_file_goes_on(tmp_path):
    """A .DS_Store (or any hidden file) added to a --dataset_name folder between runs changes no row datasets reads:
    the resume goes on (before, the folder's digest counted it, and the resume was refused as on changed data)."""
    script = "run_classification.py"
    (tmp_path / "data").mkdir()
    write_jsonl(tmp_path / "data" / "train.jsonl", ROWS)
    first = with_value(training_run(script, tmp_path, "--save_steps", "1"), "--save_strategy", "steps")
    first = [*with_value(first, "--max_steps", "2")[2:], "--dataset_name", str(tmp_path / "data")]  # no --train_file
    SCRIPTS[script].main(first)
    (tmp_path / "data" / ".DS_Store").write_bytes(b"Bud1\0\0")
    SCRIPTS[script].main([*with_value(first, "--max_steps", "3"), "--resume_from_checkpoint", "true"])
    state = json.loads((tmp_path / "out" / "trainer_state.json").read_text(encoding="utf-8"))
    assert state["global_step"] == 3


# ----------------------------------------------------------------------------------------------------------------
# Issue 51: one check for a config value whatever its route, and model files that cannot be read
# ----------------------------------------------------------------------------------------------------------------

ROUTE_TABLE_HEADER = "## One check for a config value whatever its route"
SMALL = {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 64}


def saved_model(folder: Path, model_class: type = RoFormerModel, **fields) -> Path:
    model_class(RoFormerConfig(**SMALL, **fields)).save_pretrained(folder)
    return folder


def saved_tokenizer(folder: Path) -> Path:
    RoFormerJiebaTokenizer(vocab_file=str(DEMO_VOCAB)).save_pretrained(folder)
    return folder


def cut_in_half(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def exception_line(load: Callable[[], object]) -> str:
    with pytest.raises(Exception) as error_info:
        load()
    return f"{type(error_info.value).__name__}: {error_info.value}"


def edited_classifier(change: dict, **keywords) -> Callable[[Path], str]:
    """from_pretrained of a classifier whose config.json was edited by `change`, given `keywords`."""

    def case(tmp: Path) -> str:
        folder = saved_model(tmp / "classifier", RoFormerForSequenceClassification, id2label={0: "civil", 1: "crime"})
        settings = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        (folder / "config.json").write_text(json.dumps({**settings, **change}), encoding="utf-8")
        return exception_line(lambda: RoFormerForSequenceClassification.from_pretrained(folder, **keywords))

    return case


def damaged_model(damage: Callable[[Path], None]) -> Callable[[Path], str]:
    def case(tmp: Path) -> str:
        folder = saved_model(tmp / "model")
        damage(folder)
        return exception_line(lambda: RoFormerModel.from_pretrained(folder))

    return case


def damaged_tokenizer(damage: Callable[[Path], None]) -> Callable[[Path], str]:
    def case(tmp: Path) -> str:
        folder = saved_tokenizer(tmp / "tokenizer")
        damage(folder / "tokenizer_config.json")
        return exception_line(lambda: RoFormerJiebaTokenizer.from_pretrained(folder))

    return case


def served_with_weights_cut_short(task: str, model_class: type) -> Callable[[Path], str]:
    """pipeline(task) of a saved model and tokenizer whose model.safetensors was cut in half."""

    def case(tmp: Path) -> str:
        folder = saved_tokenizer(saved_model(tmp / "model", model_class))
        cut_in_half(folder / "model.safetensors")
        return exception_line(lambda: transformers.pipeline(task, model=str(folder)))

    return case


def regressor_asked_for_one_class(tmp: Path) -> str:
    folder = saved_model(tmp / "regressor", RoFormerForSequenceClassification, num_labels=1, problem_type="regression")
    load = RoFormerForSequenceClassification.from_pretrained
    return exception_line(lambda: load(folder, problem_type="single_label_classification"))


def tokenizer_cut_short_run(script: str, tmp: Path, monkeypatch) -> list[str]:
    folder = saved_tokenizer(tmp / "tokenizer")
    cut_in_half(folder / "tokenizer_config.json")
    return with_value(good_run()(script, tmp), "--tokenizer_name", str(folder))


ROUTE_CASES = {
    "rope_parameters_keyword_a_string": (
        "from_pretrained",
        lambda tmp: exception_line(lambda: RoFormerModel.from_pretrained(saved_model(tmp), rope_parameters="ntk")),
    ),
    "id2label_names_a_class_twice": ("from_pretrained", edited_classifier({"id2label": {"0": "civil", "1": "civil"}})),
    "problem_type_unknown": ("from_pretrained", edited_classifier({"problem_type": "multi_label"})),
    "single_label_of_one_output_keyword": ("from_pretrained", regressor_asked_for_one_class),
    "model_safetensors_cut_short": (
        "from_pretrained",
        damaged_model(lambda folder: cut_in_half(folder / "model.safetensors")),
    ),
    "model_safetensors_garbled": (
        "from_pretrained",
        damaged_model(lambda folder: (folder / "model.safetensors").write_bytes(b"<!DOCTYPE html><html>...</html>")),
    ),
    "config_json_cut_short": ("from_pretrained", damaged_model(lambda folder: cut_in_half(folder / "config.json"))),
    "pipeline_model_safetensors_cut_short": (
        "pipeline()",
        served_with_weights_cut_short("text-classification", RoFormerForSequenceClassification),
    ),
    "tokenizer_config_json_cut_short": ("from_pretrained", damaged_tokenizer(cut_in_half)),
    "tokenizer_config_json_not_utf8": (
        "from_pretrained",
        damaged_tokenizer(lambda path: path.write_bytes(b"\xff\xfe{")),
    ),
    "tokenizer_config_json_a_list": ("from_pretrained", damaged_tokenizer(lambda path: path.write_text("[1, 2]"))),
    "tokenizer_name_config_cut_short": (BOTH, tokenizer_cut_short_run),
    "num_labels_override_against_the_data": (
        "run_classification.py",
        lambda script, tmp, monkeypatch: overrides_run(f"{TINY_MODEL},num_labels=3")(script, tmp),
    ),
    "label2id_key_override_against_the_data": (
        "run_classification.py",
        lambda script, tmp, monkeypatch: overrides_run(f"{TINY_MODEL},label2id.civil=1")(script, tmp),
    ),
}
LIBRARY_ROUTE_CASES = [case for case, (where, _) in ROUTE_CASES.items() if where in ("from_pretrained", "pipeline()")]


def test_the_route_table_and_the_cases_name_the_same_bad_inputs():
    check_table_names_the_cases(ROUTE_TABLE_HEADER, ROUTE_CASES)


@pytest.mark.parametrize("case", LIBRARY_ROUTE_CASES)
def test_a_bad_config_value_or_model_file_gets_one_line_in_the_library(case, tmp_path):
    message = ROUTE_CASES[case][1](tmp_path)
    pattern = template_pattern(bad_input_rows(ROUTE_TABLE_HEADER)[case][2])
    assert pattern.fullmatch(message), f"{case}:\n  got      {message}\n  expected {pattern.pattern}"


@pytest.mark.parametrize(
    ("case", "script"),
    script_parameters({case: ROUTE_CASES[case] for case in ROUTE_CASES if case not in LIBRARY_ROUTE_CASES}),
)
def test_a_bad_config_value_or_model_file_gets_one_line_in_the_scripts(case, script, tmp_path, capsys, monkeypatch):
    message = run_in_process(script, ROUTE_CASES[case][1](script, tmp_path, monkeypatch), capsys)
    pattern = template_pattern(bad_input_rows(ROUTE_TABLE_HEADER)[case][2])
    assert pattern.fullmatch(message), f"{script} {case}:\n  got      {message}\n  expected {pattern.pattern}"


@pytest.mark.parametrize(
    "load",
    [
        lambda folder: RoFormerConfig.from_pretrained(folder, rope_parameters="ntk"),
        lambda folder: RoFormerConfig(**SMALL, rope_parameters="ntk"),
        lambda folder: RoFormerConfig.from_dict({**SMALL, "rope_parameters": "ntk"}),
    ],
    ids=["config_from_pretrained_keyword", "constructor", "config_json"],
)
def test_a_config_value_gets_the_same_line_whatever_its_route(load, tmp_path):
    RoFormerConfig(**SMALL).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match=re.escape("rope_parameters must be a mapping (a JSON object such as")):
        load(tmp_path)


@pytest.mark.parametrize(
    "keywords",
    [{"use_bias": "false"}, {"problem_type": "regresion"}, {"id2label": {0: "a", 1: "a"}}, {"layer_norm_eps": -1}],
)
def test_every_rule_holds_for_a_keyword_of_from_pretrained_as_for_the_constructor(keywords, tmp_path):
    """The keyword arguments of from_pretrained, which transformers sets after the config is made, meet the same rules
    with the same line as the constructor."""
    RoFormerConfig(**SMALL).save_pretrained(tmp_path)
    with pytest.raises(ValueError) as made:
        RoFormerConfig(**SMALL, **keywords)
    with pytest.raises(ValueError) as loaded:
        RoFormerConfig.from_pretrained(tmp_path, **keywords)
    assert str(loaded.value) == str(made.value)


def test_new_labels_replace_the_saved_ones_rather_than_contradict_them(tmp_path):
    """transformers' way to a new head, `from_pretrained(path, num_labels=n)`, still replaces a classifier's labels
    (LABEL_0, ...); the contradiction is refused where both are given at once."""
    RoFormerConfig(**SMALL, id2label={0: "civil", 1: "crime"}).save_pretrained(tmp_path)
    assert RoFormerConfig.from_pretrained(tmp_path, num_labels=3).id2label == {
        0: "LABEL_0",
        1: "LABEL_1",
        2: "LABEL_2",
    }
    assert RoFormerConfig.from_pretrained(tmp_path, num_labels=2).id2label == {0: "civil", 1: "crime"}
    assert RoFormerConfig.from_pretrained(tmp_path, id2label={0: "x"}).label2id == {"x": 0}
    with pytest.raises(ValueError, match="num_labels is 3, but id2label names 2 labels"):
        RoFormerConfig(**SMALL, num_labels=3, id2label={0: "civil", 1: "crime"})


def test_a_regressor_fine_tuned_from_a_classifier_takes_the_new_number_of_outputs(tmp_path):
    """The scripts' labels of the data (here a regression's one output) replace a checkpoint's other labels, as
    transformers' num_labels does, rather than being refused as a contradiction."""
    from roformer_hf.configuration import without_replaced_labels

    saved = {"id2label": {"0": "civil", "1": "crime"}, "label2id": {"civil": 0, "crime": 1}, "hidden_size": 32}
    given = {"num_labels": 1, "problem_type": "regression"}
    assert without_replaced_labels(saved, given) == {"hidden_size": 32}
    assert without_replaced_labels(saved, {"num_labels": 2}) == saved
    config = RoFormerConfig(**{**SMALL, **without_replaced_labels(saved, given), **given})
    assert config.num_labels == 1 and config.problem_type == "regression"


@pytest.mark.parametrize("damage", ["cut", "appended", "header_garbled"])
def test_a_damaged_shard_of_a_sharded_checkpoint_is_named(damage, tmp_path):
    """The shards a safetensors index names are read like model.safetensors."""
    RoFormerModel(RoFormerConfig(**SMALL)).save_pretrained(tmp_path, max_shard_size="20KB")
    shards = sorted(tmp_path.glob("model-*.safetensors"))
    assert len(shards) > 1 and not (tmp_path / "model.safetensors").exists()
    data = shards[-1].read_bytes()
    changed = {"cut": data[:-1], "appended": data + b"\0", "header_garbled": data[:8] + b"[" + data[9:]}[damage]
    shards[-1].write_bytes(changed)
    with pytest.raises(OSError, match=re.escape(f"{shards[-1]} cannot be read (")):
        RoFormerModel.from_pretrained(tmp_path)


def test_whole_model_and_tokenizer_files_load_as_before(tmp_path):
    """The boundary reads the files first and changes nothing for whole ones (sharded weights too)."""
    model = RoFormerModel(RoFormerConfig(**SMALL))
    model.save_pretrained(tmp_path / "sharded", max_shard_size="20KB")
    loaded = RoFormerModel.from_pretrained(tmp_path / "sharded")
    assert all((a == b).all() for a, b in zip(model.state_dict().values(), loaded.state_dict().values(), strict=True))
    tokenizer = RoFormerJiebaTokenizer.from_pretrained(saved_tokenizer(tmp_path / "tokenizer"))
    assert tokenizer("今天天气")["input_ids"][0] == tokenizer.cls_token_id


def test_pipeline_names_a_damaged_weights_file_and_still_serves_transformers_roformer(tokenizer, tmp_path):
    """pipeline() tries transformers' own RoFormer class after ours fails, and swallows our error: the damaged file is
    named when pipeline() reads the config instead (for fill-mask as for text-classification), with the line
    from_pretrained gives; the folder's tokenizer still loads, and a checkpoint of transformers' own RoFormer is served
    as before in the same process."""
    line = served_with_weights_cut_short("fill-mask", RoFormerForMaskedLM)(tmp_path / "ours")
    folder = tmp_path / "ours" / "model"
    assert line == exception_line(lambda: RoFormerForMaskedLM.from_pretrained(folder))
    assert line.startswith(f"OSError: {folder / 'model.safetensors'} cannot be read (")
    assert type(transformers.AutoTokenizer.from_pretrained(folder)) is RoFormerJiebaTokenizer  # its files are whole
    theirs = transformers.RoFormerConfig(**SMALL, vocab_size=len(tokenizer))
    transformers.RoFormerForMaskedLM(theirs).save_pretrained(tmp_path / "theirs")
    fill_mask = transformers.pipeline("fill-mask", model=str(tmp_path / "theirs"), tokenizer=tokenizer)
    assert type(fill_mask.model) is transformers.RoFormerForMaskedLM
    assert len(fill_mask("今天天气很[MASK]。", top_k=2)) == 2


REMOTE_CODE_CHILD = """
import json
import sys

sys.modules["roformer_hf"] = None  # as if roformer_hf were not installed: the checkpoint's own code reads it
import transformers

lines = []
for load in (transformers.AutoConfig.from_pretrained, transformers.AutoModelForSequenceClassification.from_pretrained):
    try:
        load(sys.argv[1], trust_remote_code=True)
    except (ValueError, OSError) as error:
        lines.append(f"{type(error).__name__}: {error}")
print(json.dumps(lines))
"""


def test_the_rules_and_the_file_boundary_travel_with_the_checkpoints_code(tmp_path):
    """A checkpoint loaded with its own code where roformer_hf is not installed refuses a label named twice and names
    a damaged weights file, as roformer_hf does: both live in the configuration.py it carries. AutoConfig names the
    damaged weights file too (it loaded before), since pipeline() reads the config there first."""
    folder = saved_model(tmp_path / "classifier", RoFormerForSequenceClassification, id2label={0: "civil", 1: "crime"})
    settings = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    twice = {**settings, "id2label": {"0": "civil", "1": "civil"}, "label2id": None}
    (folder / "config.json").write_text(json.dumps(twice), encoding="utf-8")
    (tmp_path / "child.py").write_text(REMOTE_CODE_CHILD, encoding="utf-8")

    def lines_of_a_child() -> list[str]:
        environment = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_MODULES_CACHE": str(tmp_path / "modules")}
        command = [sys.executable, "child.py", str(folder)]
        child = subprocess.run(command, cwd=tmp_path, env=environment, capture_output=True, text=True, check=False)
        assert child.returncode == 0, child.stderr[-3000:]
        return json.loads(child.stdout.splitlines()[-1])

    named_twice = bad_input_rows(ROUTE_TABLE_HEADER)["id2label_names_a_class_twice"][2]
    assert lines_of_a_child() == [named_twice, named_twice]  # AutoConfig, then the model
    (folder / "config.json").write_text(json.dumps(settings), encoding="utf-8")
    cut_in_half(folder / "model.safetensors")
    config_line, model_line = lines_of_a_child()
    assert config_line == model_line
    assert model_line.startswith(f"OSError: {folder / 'model.safetensors'} cannot be read (")
