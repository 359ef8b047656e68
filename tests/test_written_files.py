"""Tests of roformer_hf/training/outputs/written_files.py: which files of the output folder a run writes, and the
comparison of an input file with them (through symlinks and hard links). The refusals in the scripts are rows of
docs/bad_inputs.md (tests/test_bad_settings_and_data.py)."""

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path, PurePath

import pytest
from test_bad_inputs import ROWS, SCRIPTS, good_run, with_value, write_jsonl

from roformer_hf.training.errors import ScriptError
from roformer_hf.training.outputs.written_files import check_inputs_are_not_outputs, is_written, written_file_clash


@pytest.mark.parametrize(
    "name",
    [
        "predictions.jsonl",
        "eval_results.json",
        "all_results.json",
        "config.json",
        "model.safetensors",
        "vocab.txt",
        "README.md",
        "confusion_matrix_eval.csv",
        "confusion_matrix_test_labels.csv",
        "loss_curve.png",
        "checkpoint-4/trainer_state.json",
        "stage-2/checkpoint-1/optimizer.pt",
        ".roformer_hf.lock",
    ],
)
def test_the_files_a_run_writes(name):
    assert is_written(PurePath(name))


@pytest.mark.parametrize("name", ["train.jsonl", "test.jsonl", "data/predictions.jsonl", "notes.md", "corpus.txt"])
def test_the_files_a_run_leaves_alone(name):
    assert not is_written(PurePath(name))


def test_a_data_file_beside_the_outputs_is_no_clash(tmp_path):
    (tmp_path / "out").mkdir()
    test_file = write_jsonl(tmp_path / "out" / "test.jsonl", ROWS)
    write_jsonl(tmp_path / "out" / "predictions.jsonl", ROWS)  # an earlier run's, another file
    assert written_file_clash(test_file, tmp_path / "out") is None
    check_inputs_are_not_outputs({"--test_file": str(test_file), "--validation_file": None}, tmp_path / "out")


def test_links_are_seen_through(tmp_path):
    (tmp_path / "out").mkdir()
    predictions = write_jsonl(tmp_path / "out" / "predictions.jsonl", ROWS)
    os.link(predictions, tmp_path / "hard.jsonl")
    (tmp_path / "soft.jsonl").symlink_to(predictions)
    (tmp_path / "out-link").symlink_to(tmp_path / "out", target_is_directory=True)
    for input_file in ("hard.jsonl", "soft.jsonl"):
        assert written_file_clash(tmp_path / input_file, tmp_path / "out") == Path("predictions.jsonl")
    assert written_file_clash(predictions, tmp_path / "out-link") == Path("predictions.jsonl")
    # a path that does not exist yet but would be written: refused by name
    assert written_file_clash(tmp_path / "new" / "checkpoint-2" / "x.json", tmp_path / "new") is not None


def every_file_under(folder: Path) -> list[PurePath]:
    return [path.relative_to(folder) for path in folder.rglob("*") if path.is_file()]


@pytest.mark.parametrize("script", list(SCRIPTS))
def test_every_file_a_run_writes_is_known(script, tmp_path):
    """What a tiny run of each script leaves in its output folder (model, code, card, results, pictures, predictions,
    checkpoints, stages) is all in `WRITTEN_FILES` / `WRITTEN_FOLDERS`: a data file of any of those names is refused."""
    write_jsonl(tmp_path / "test.jsonl", ROWS[:4])
    if script == "run_mlm.py":
        extra = ["--stages", "16:2:1,16:2:1", "--line_by_line"]
    else:
        extra = ["--do_predict", "--test_file", str(tmp_path / "test.jsonl")]
    arguments = good_run("--save_strategy", "steps", "--save_steps", "1", *extra)(script, tmp_path)
    SCRIPTS[script].main(with_value(arguments, "--max_steps", "2"))
    written = every_file_under(tmp_path / "out")
    assert len(written) > 20
    assert [name for name in written if not is_written(name)] == []
    from roformer_hf.training.outputs.output_record import user_files_in_run_folders

    assert user_files_in_run_folders(tmp_path / "out") == []  # nothing in its checkpoints passes for the user's


# --- every input of a run against what it writes (issue 35) ---


@pytest.mark.parametrize(
    ("option", "input_path", "trains", "refused"),
    [
        ("--model_name_or_path", "out", True, "are the same folder"),
        ("--model_name_or_path", "out", False, None),  # an evaluation writes its results beside the model
        ("--model_name_or_path", ".", True, "lies inside --model_name_or_path"),
        ("--model_name_or_path", ".", False, None),
        ("--model_name_or_path", "out/base", True, None),  # kept in the output folder, in no folder a run writes
        ("--model_name_or_path", "out/checkpoint-2", True, "lies in checkpoint-2"),
        ("--model_name_or_path", "out/checkpoint-2", False, None),  # an evaluation writes no checkpoint
        ("--tokenizer_name", "out/stage-1/checkpoint-2/vocab.txt", True, "lies in stage-1"),
        ("--resume_from_checkpoint", "out/checkpoint-2", True, None),  # how resuming works
        ("--resume_from_checkpoint", "out/stage-2/checkpoint-2", True, None),
        ("--resume_from_checkpoint", "out/.partial-model-1/checkpoint-2", True, "lies in .partial-model-1"),
        ("--resume_from_checkpoint", "out", True, None),  # a run's folder: refused as no checkpoint, by the resume
        ("--dataset_name", "out/runs/corpus", True, "lies in runs"),
        ("--model_name_or_path", "user/model", True, None),  # a Hub id: no folder of the run
    ],
)
def test_every_input_is_compared_with_what_the_run_writes(option, input_path, trains, refused, tmp_path, monkeypatch):
    from roformer_hf.training.outputs.written_files import overlap_refusal

    monkeypatch.chdir(tmp_path)
    (tmp_path / "out" / "checkpoint-1").mkdir(parents=True)  # a run's folder
    refusal = overlap_refusal(option, input_path, "out", trains)
    assert refusal is None if refused is None else refused in refusal
    if refusal is not None:
        assert "--overwrite_output_dir" not in refusal and "\n" not in refusal


def test_a_hub_id_spelled_as_the_output_folder_is_refused(tmp_path, monkeypatch):
    """`--model_name_or_path user/model --output_dir user/model`: the run would make the folder, then load it."""
    from roformer_hf.training.outputs.written_files import overlap_refusal

    monkeypatch.chdir(tmp_path)
    assert "are the same folder" in overlap_refusal("--model_name_or_path", "user/model", "user/model")


# --- a run owns only what it wrote (issue 44) ---


def test_a_run_records_what_it_wrote_and_overwrites_only_that(tmp_path):
    """After a run, its record names what it wrote; files the user adds later (of any name) are not in it, and a run
    with --overwrite_output_dir replaces the run's files and leaves the user's, or refuses the folder for them."""
    from roformer_hf.training.outputs.output_record import RECORD_NAME, read_record

    arguments = good_run("--save_strategy", "steps", "--save_steps", "1")("run_classification.py", tmp_path)
    SCRIPTS["run_classification.py"].main(with_value(arguments, "--max_steps", "2"))
    record = read_record(tmp_path / "out")
    assert "user_files" not in record  # closed
    written = {entry.name for entry in (tmp_path / "out").iterdir()} - {RECORD_NAME}
    assert set(record["files"]) == written and {"README.md", "modeling.py", "checkpoint-2"} <= written
    (tmp_path / "out" / "train.py").write_text("print('mine')\n")  # a name a run never writes
    SCRIPTS["run_classification.py"].main([*with_value(arguments, "--max_steps", "1"), "--overwrite_output_dir"])
    assert (tmp_path / "out" / "train.py").read_text() == "print('mine')\n"
    assert not (tmp_path / "out" / "checkpoint-2").exists()  # the earlier run's, deleted
    (tmp_path / "out" / "stage_results.json").write_text("{}")  # a name a run writes, put there by the user
    with pytest.raises(ScriptError, match=r"holds stage_results.json, which no run"):
        SCRIPTS["run_classification.py"].main([*arguments, "--overwrite_output_dir"])


def test_a_run_that_only_evaluates_writes_over_no_file_of_the_user_s(tmp_path):
    """A run without --do_train writes its results beside a model or an earlier run, never over a user's file of a
    result's name (before, an evaluation replaced a user's all_results.json without a word); what it wrote is
    recorded, so that the next evaluation replaces it."""
    from transformers import TrainingArguments

    from roformer_hf.training.outputs.output_record import close_record, read_record
    from roformer_hf.training.outputs.run_outputs import check_output_dir

    model = tmp_path / "model"  # a model folder without a record: its files are the user's
    model.mkdir()
    for name in ("config.json", "model.safetensors", "README.md", "vocab.txt"):
        (model / name).write_text("{}")
    args = TrainingArguments(model, report_to="none")
    with pytest.raises(ScriptError, match=r"holds README\.md, config\.json"):
        check_output_dir(args)  # a run that trains would write over the model
    check_output_dir(args, trains=False)  # one that evaluates writes beside it
    (model / "eval_results.json").write_text("{}")
    close_record(model)
    assert set(read_record(model)["files"]) == {"eval_results.json"} and "user_files" not in read_record(model)
    check_output_dir(args, trains=False)  # the next evaluation may replace it

    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "all_results.json").write_text('{"mine": 1}')
    with pytest.raises(ScriptError, match=r"holds all_results\.json, which no run"):
        check_output_dir(TrainingArguments(tmp_path / "mine", report_to="none"), trains=False)


def test_a_killed_run_s_files_are_still_its_own(tmp_path):
    """A run killed while its record is open: what appeared since it opened counts as a run's, what was there before
    stays the user's; once closed, a file the user adds is the user's."""
    from roformer_hf.training.outputs.output_record import close_record, open_record, run_entries

    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    open_record(out)
    (out / "config.json").write_text("{}")
    (out / "checkpoint-1").mkdir()
    (out / "checkpoint-1" / "model.safetensors").write_bytes(b"cut off before its trainer state")
    assert run_entries(out) >= {"config.json", "checkpoint-1"} and "notes.txt" not in run_entries(out)
    close_record(out)
    (out / "README.md").write_text("# mine")
    assert "README.md" not in run_entries(out) and "config.json" in run_entries(out)


def test_the_lock_taken_between_two_listings_is_no_file_of_the_user_s(tmp_path, monkeypatch):
    """Under torchrun the main rank takes the folder's lock while another rank checks the folder: a lock file that
    appears after the run's entries were listed is still no file of the user's (it made rank 1 refuse the folder now
    and then in test_distributed.py)."""
    from roformer_hf.training.outputs import output_record
    from roformer_hf.training.outputs.locks import LOCK_FILE_NAME

    listed = output_record.run_entries

    def listed_before_the_lock(folder):
        entries = listed(folder)
        (Path(folder) / LOCK_FILE_NAME).write_text("")  # the main rank's lock, taken right after the listing
        return entries

    monkeypatch.setattr(output_record, "run_entries", listed_before_the_lock)
    assert output_record.user_file_clashes(tmp_path) == []


def overwriting(output_dir: Path):
    """The training arguments of a run into `output_dir` with --overwrite_output_dir (the scripts' own option)."""
    from transformers import TrainingArguments

    arguments = TrainingArguments(output_dir, report_to="none")
    arguments.overwrite_output_dir = True
    return arguments


def a_finished_run(out: Path, files: dict[str, str], folders: tuple[str, ...] = ()) -> Path:
    """`out` as a run leaves it: its record opened, `files` (name -> text) and `folders` (each with a trainer_state.json)
    written, the record closed."""
    from roformer_hf.training.outputs.output_record import close_record, open_record

    out.mkdir(parents=True, exist_ok=True)
    open_record(out)
    for name, text in files.items():
        (out / name).write_text(text)
    for folder in folders:
        (out / folder).mkdir(parents=True)
        (out / folder / "trainer_state.json").write_text('{"global_step": 2}')
        (out / folder / "model.safetensors").write_bytes(b"weights")
    close_record(out)
    return out


def test_a_folder_without_this_version_s_record_is_the_user_s(tmp_path):
    """Issue 50: no heuristics for folders older than the record: a Trainer's files beside a roformer_hf config.json,
    checkpoint folders holding a Trainer's state, are the user's where no record of this version proves them a run's
    (before, the folder was taken for a run's and --overwrite_output_dir deleted its README.md)."""

    from roformer_hf.training.outputs.output_folder import earlier_run_outputs
    from roformer_hf.training.outputs.output_record import run_entries
    from roformer_hf.training.outputs.run_outputs import check_output_dir

    (tmp_path / "checkpoint-4").mkdir()
    (tmp_path / "checkpoint-4" / "trainer_state.json").write_text("{}")
    (tmp_path / "training_args.bin").write_bytes(b"")
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "roformer_hf"}))
    (tmp_path / "README.md").write_text("# card")
    assert run_entries(tmp_path) == set() and earlier_run_outputs(tmp_path) == []
    with pytest.raises(
        ScriptError, match=r"holds README\.md, checkpoint-4, config\.json, training_args\.bin, which no"
    ):
        check_output_dir(overwriting(tmp_path))


def test_files_put_under_a_run_s_names_after_rm_rf_are_the_user_s(tmp_path, caplog):
    """Issue 51: `rm -rf OUT/*` leaves the hidden record; files the user then puts there under a run's names (even of
    the same size and time) do not match what it records: they are the user's, the record says it is stale, and
    --overwrite_output_dir, the earlier refusal's advice, deletes nothing (before, it deleted them)."""
    import logging

    from roformer_hf.training.outputs.output_record import RECORD_NAME, read_record, run_entries
    from roformer_hf.training.outputs.run_outputs import check_output_dir

    out = a_finished_run(
        tmp_path / "out", {"README.md": "# card", "config.json": "{}", "modeling.py": "# "}, ("checkpoint-2",)
    )
    assert run_entries(out) == {"README.md", "config.json", "modeling.py", "checkpoint-2", RECORD_NAME}
    recorded = read_record(out)["files"]
    for entry in out.iterdir():  # rm -rf OUT/*: the hidden record stays
        if entry.name != RECORD_NAME:
            (os.remove if entry.is_file() else __import__("shutil").rmtree)(entry)
    (out / "README.md").write_text("# mine")
    (out / "config.json").write_text("[]")  # the same size, and the same time as recorded
    os.utime(out / "config.json", ns=(recorded["config.json"]["mtime_ns"],) * 2)
    (out / "modeling.py").write_text("# my code")
    (out / "checkpoint-2").mkdir()
    (out / "checkpoint-2" / "notes.txt").write_text("mine")
    assert run_entries(out) == {RECORD_NAME}
    with caplog.at_level(logging.WARNING), pytest.raises(ScriptError, match=r"holds README\.md, checkpoint-2, config"):
        check_output_dir(overwriting(out))
    assert any("is stale" in record.getMessage() for record in caplog.records)
    assert (out / "config.json").read_text() == "[]" and (out / "checkpoint-2" / "notes.txt").is_file()


def test_a_record_copied_into_a_user_s_folder_proves_nothing(tmp_path):
    """Issue 51: another folder's record copied beside the user's files of the names it lists: they are the user's."""
    from roformer_hf.training.outputs.output_record import RECORD_NAME, run_entries

    run = a_finished_run(tmp_path / "run", {"README.md": "# card", "modeling.py": "# code"})
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "README.md").write_text("# my notes")
    (mine / "modeling.py").write_text("# my model")
    (mine / RECORD_NAME).write_bytes((run / RECORD_NAME).read_bytes())
    assert run_entries(mine) == {RECORD_NAME}
    assert run_entries(run) == {"README.md", "modeling.py", RECORD_NAME}


def test_results_an_evaluation_writes_into_a_checkpoint_join_its_record(tmp_path):
    """Issue 51: an evaluation whose --output_dir is a run's checkpoint writes its results there and records them
    there; the run's folder then holds no file "no run of these scripts wrote" (before, it was refused so)."""
    from transformers import TrainingArguments

    from roformer_hf.training.outputs.output_record import close_record, user_files_in_run_folders
    from roformer_hf.training.outputs.run_outputs import check_output_dir

    out = a_finished_run(tmp_path / "out", {"config.json": "{}"}, ("checkpoint-2",))
    checkpoint = out / "checkpoint-2"
    check_output_dir(TrainingArguments(checkpoint, report_to="none"), trains=False)  # opens its record
    for name in ("eval_results.json", "all_results.json"):
        (checkpoint / name).write_text("{}")
    close_record(checkpoint)
    assert user_files_in_run_folders(out) == []
    (checkpoint / "my_notes.txt").write_text("mine")
    assert user_files_in_run_folders(out) == ["checkpoint-2/my_notes.txt"]


def test_a_bind_mount_of_the_model_folder_is_the_same_folder(tmp_path):
    """Another path to the input folder (here a bind mount, which no path resolution sees through) is caught by
    identity: training into it would delete the model being trained."""
    (tmp_path / "model").mkdir()
    (tmp_path / "other").mkdir()
    program = (
        "import sys; from roformer_hf.training.outputs.written_files import overlap_refusal; "
        f"print(overlap_refusal('--model_name_or_path', '{tmp_path}/other', '{tmp_path}/model'))"
    )
    command = (
        f"mount --bind {tmp_path}/model {tmp_path}/other && {shlex.quote(sys.executable)} -c {shlex.quote(program)}"
    )
    result = subprocess.run(["unshare", "-rm", "sh", "-c", command], capture_output=True, text=True)
    if "are the same folder" not in result.stdout and result.returncode != 0:
        pytest.skip(f"no bind mount in a user namespace here: {result.stderr.strip()[:200]}")
    assert "are the same folder" in result.stdout


def test_the_record_and_the_checkpoint_folders_a_user_adds(tmp_path):
    """Where a record is kept, only what it proves is a run's: a notes.txt added to it by hand, a checkpoint-7 of the
    user's (a copy of a model) and an empty checkpoint-8 added after the run are not (before, --overwrite_output_dir
    deleted the first two); a checkpoint of the run with a file cut short since stays the run's (a damaged one), one
    none of whose files is as recorded is the user's."""
    from roformer_hf.training.outputs.checkpoints import write_json_atomically
    from roformer_hf.training.outputs.output_record import RECORD_NAME, fingerprint, read_record, run_entries

    out = a_finished_run(tmp_path / "out", {}, ("checkpoint-2", "checkpoint-4"))
    (out / "notes.txt").write_text("mine")
    record = read_record(out)
    record["files"]["notes.txt"] = fingerprint(out / "notes.txt")
    write_json_atomically(out / RECORD_NAME, record)
    (out / "checkpoint-7").mkdir()
    (out / "checkpoint-7" / "model.safetensors").write_bytes(b"the user's")
    (out / "checkpoint-8").mkdir()
    assert run_entries(out) == {"checkpoint-2", "checkpoint-4", RECORD_NAME}
    (out / "checkpoint-4" / "trainer_state.json").write_text('{"global_step": ')  # cut short: still the run's
    assert "checkpoint-4" in run_entries(out)
    (out / "checkpoint-4" / "model.safetensors").write_bytes(b"other weights")  # nothing left as recorded
    assert run_entries(out) == {"checkpoint-2", RECORD_NAME}


def test_a_cache_dir_inside_an_input_folder_is_refused(tmp_path):
    """datasets writes its caches and locks into --cache_dir: inside the model or a dataset folder they would be read
    as more data or change what a resume digests; beside a data file or in the output folder they harm nothing."""
    (tmp_path / "model").mkdir()
    (tmp_path / "train.jsonl").write_text("{}\n")
    inputs = {"--model_name_or_path": str(tmp_path / "model"), "--train_file": str(tmp_path / "train.jsonl")}
    for cache in (tmp_path / "model", tmp_path / "model" / "cache"):
        with pytest.raises(ScriptError, match=r"--cache_dir .* --model_name_or_path .*: datasets and the Hub"):
            check_inputs_are_not_outputs(inputs, tmp_path / "out", cache_dir=str(cache))
    for cache in (tmp_path, tmp_path / "out", tmp_path / "cache"):
        check_inputs_are_not_outputs(inputs, tmp_path / "out", cache_dir=str(cache))


@pytest.mark.parametrize(
    "content",
    [
        '{"version": 2, "files": [1, 2]}',
        '{"version": 2, "files": {"README.md": 1}}',
        "[]",
        '{"files": [',
        '{"files": ["README.md"]}',  # the record of an earlier version, a list of names
    ],
)
def test_a_record_that_is_not_one_of_ours_is_refused(tmp_path, content):
    """A record edited by hand into something these scripts never write (they write it whole) is refused in one line
    (before: names that were numbers ended in a traceback, the others made the folder one without a record)."""
    from transformers import TrainingArguments

    from roformer_hf.training.outputs.output_record import RECORD_NAME
    from roformer_hf.training.outputs.run_outputs import check_output_dir

    (tmp_path / "out").mkdir()
    (tmp_path / "out" / RECORD_NAME).write_text(content)
    with pytest.raises(ScriptError, match=r"holds \.roformer_hf_outputs\.json, not a record these scripts write"):
        check_output_dir(TrainingArguments(tmp_path / "out", report_to="none"))


def test_a_users_file_in_an_earlier_runs_tensorboard_folder_is_found(tmp_path):
    """`runs/` (TensorBoard's event files) is deleted whole with the run that wrote it: a file of the user's put into
    it is named, as one put into a checkpoint folder is (before, --overwrite_output_dir deleted it without a word)."""
    from roformer_hf.training.outputs.output_record import close_record, open_record, user_files_in_run_folders

    out = tmp_path / "out"
    out.mkdir()
    open_record(out)
    events = out / "runs" / "Nov29_01-00-00_host" / "1764378000.0"
    events.mkdir(parents=True)
    (events / "events.out.tfevents.1764378000.host.1.0").write_bytes(b"\0")
    (events.parent / "events.out.tfevents.1764377999.host.1.0").write_bytes(b"\0")
    close_record(out)
    assert user_files_in_run_folders(out) == []
    (out / "runs" / "my_plot.png").write_bytes(b"mine")
    (events / "notes.txt").write_text("mine")
    assert user_files_in_run_folders(out) == [
        "runs/Nov29_01-00-00_host/1764378000.0/notes.txt",
        "runs/my_plot.png",
    ]
