"""What the training scripts show on the console: a short grouped `--help` (and `--help-all`), a quiet default log
level that still prints the results, the demo's equivalent command, the closing "model saved to" lines whose Python
loads the model, the validation pass named for what it is, and the one line on bf16 that a CPU run may show.

Runs use the samples shipped in `data/`, so these tests need no other data."""

import dataclasses
import json
import logging
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from conftest import HANG_GUARD_S
from safetensors.torch import load_file
from transformers import TrainingArguments

import run_classification
import run_mlm
from roformer_hf.text_classification_pipeline import INPUT_SETTINGS
from roformer_hf.training.building import build_tokenizer
from roformer_hf.training.classification.long_documents import DEFAULT_RECIPE
from roformer_hf.training.cli import COMMON_TRAINING_OPTIONS, ModelArguments, ScriptTrainingArguments
from roformer_hf.training.errors import ScriptError
from roformer_hf.training.machine import cpu_precision
from roformer_hf.training.machine.cpu_arithmetic import CpuBf16
from roformer_hf.training.mlm.results import PROBE_COUNT
from roformer_hf.training.outputs.run_outputs import check_output_dir

REPO_ROOT = Path(__file__).resolve().parents[1]
DATA = REPO_ROOT / "data"
ENVIRONMENT = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO_ROOT), "OMP_NUM_THREADS": "1"}
TINY_MODEL = "hidden_size=32,num_hidden_layers=1,num_attention_heads=2,intermediate_size=64"
MLM_ARGUMENTS = [
    *("--train_file", str(DATA / "peoples_daily_sample.txt"), "--tokenizer_name", str(DATA / "demo_vocab.txt")),
    *("--config_overrides", TINY_MODEL, "--stages", "32:8:3,64:8:2", "--per_device_train_batch_size", "8"),
    *("--max_train_samples", "64", "--max_eval_samples", "16", "--save_steps", "2"),
]
CLASSIFICATION_ARGUMENTS = [
    *("--train_file", str(DATA / "cail_sample.jsonl"), "--test_file", str(DATA / "cail_sample.jsonl")),
    *("--tokenizer_name", str(DATA / "demo_vocab.txt"), "--config_overrides", TINY_MODEL),
    *("--max_seq_length", "32", "--max_train_samples", "32", "--max_predict_samples", "8"),
    *("--validation_split_percentage", "20", "--max_eval_samples", "8", "--max_steps", "2"),
    *("--do_train", "--do_eval", "--do_predict", "--save_strategy", "no"),
]
SCRIPTS = {
    "run_mlm.py": (run_mlm, run_mlm.parse_mlm_arguments, ["DataArguments", "MaskingArguments"]),
    "run_classification.py": (
        run_classification,
        run_classification.parse_classification_arguments,
        ["DataArguments"],
    ),
}
MAX_HELP_LINES = 200


# transformers sends its log records to the root logger too when CI is set; the scripts must still print each once.
ON_A_CI_MACHINE = {"CI": "true"}


def run_script(script: str, arguments: list[str], cwd: Path, environment: dict | None = None) -> tuple[str, str]:
    """Run a script as a user does; return what it printed on stdout, and on stdout and stderr together."""
    result = subprocess.run(
        [sys.executable, str(REPO_ROOT / script), *arguments],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
        env={**ENVIRONMENT, **(environment or {})},
        cwd=cwd,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    return result.stdout, result.stdout + result.stderr


def printed_help(script: str, option: str, monkeypatch, capsys) -> str:
    _, parse_args, _ = SCRIPTS[script]
    monkeypatch.setattr(sys, "argv", [script])
    with pytest.raises(SystemExit) as exit_info:
        parse_args([option])
    assert exit_info.value.code == 0
    return capsys.readouterr().out


def own_option_names(script: str) -> list[str]:
    module, _, dataclass_names = SCRIPTS[script]
    own = [run_mlm.ModelArguments, *(getattr(module, name) for name in dataclass_names)]
    return [item.name for dataclass_type in own for item in dataclasses.fields(dataclass_type)]


# --- help ---


@pytest.mark.parametrize("script", SCRIPTS)
def test_help_is_short_grouped_and_names_the_scripts_options(script, monkeypatch, capsys):
    extra_headings = ["masking"] if script == "run_mlm.py" else []
    text = printed_help(script, "--help", monkeypatch, capsys)
    lines = text.splitlines()
    assert len(lines) <= MAX_HELP_LINES
    assert lines[0].startswith(f"usage: python {script}")
    headings = [line for line in lines if " options - " in line and not line.startswith(" ")]
    assert [heading.split()[0] for heading in headings] == ["model", "data", *extra_headings, "training"]
    assert headings[-1].startswith("training options - the 23 most used")
    shown = set(re.findall(r"^  --(\w+)", text, flags=re.MULTILINE))
    assert set(own_option_names(script)) <= shown
    assert set(COMMON_TRAINING_OPTIONS) <= shown
    assert {"threads", "license"} <= shown  # the README names them (issue 52.5: they were in --help-all only)
    assert "lr_scheduler_type" not in shown and "--help-all" in text


def test_help_shows_the_input_settings_defaults(monkeypatch, capsys):
    """--help shows the defaults of run_classification.py's input settings, those a run takes that gives none and
    starts from a checkpoint that recorded none (a checkpoint's own win over them, `resolve_input_settings`)."""
    text = printed_help("run_classification.py", "--help", monkeypatch, capsys)
    options = re.split(r"^  (?=--)", text, flags=re.MULTILINE)  # one part per option, its help lines with it
    shown = {part.split()[0].removeprefix("--"): " ".join(part.split()) for part in options[1:]}
    assert DEFAULT_RECIPE.max_seq_length == 1024
    for name, default in dataclasses.asdict(DEFAULT_RECIPE).items():
        assert shown[name].endswith(f"(default: {default})"), shown[name]


def test_input_settings_keep_their_defaults_and_the_parser_says_which_were_given(tmp_path):
    """The parser reports the options given (`ParsedArguments.given`), so DataArguments holds the real defaults of the
    input settings, not None for "not given" (issue 50.5)."""
    arguments = [*CLASSIFICATION_ARGUMENTS, "--output_dir", str(tmp_path), "--chunk_pooling", "mean"]
    parsed = run_classification.parse_classification_arguments(arguments)
    data_args = parsed[1]
    assert data_args.recipe() == dataclasses.replace(DEFAULT_RECIPE, max_seq_length=32)
    assert parsed.given & set(INPUT_SETTINGS) == {"max_seq_length", "chunk_pooling"}  # mean: given, though the default


@pytest.mark.parametrize("script", SCRIPTS)
def test_help_all_lists_every_training_argument(script, monkeypatch, capsys):
    text = printed_help(script, "--help-all", monkeypatch, capsys)
    listed = set(re.findall(r"--(\w+)", text))
    assert {item.name for item in dataclasses.fields(ScriptTrainingArguments) if item.init} <= listed
    assert set(own_option_names(script)) <= listed
    assert len(text.splitlines()) > 500


def test_options_outside_the_short_help_and_argument_files_still_parse(tmp_path):
    less_used = ["--lr_scheduler_type", "cosine", "--adam_beta2", "0.98", "--max_grad_norm", "0.5"]
    _, _, _, training_args = run_mlm.parse_mlm_arguments([*MLM_ARGUMENTS, *less_used])
    assert (training_args.lr_scheduler_type.value, training_args.adam_beta2, training_args.max_grad_norm) == (
        "cosine",
        0.98,
        0.5,
    )
    (tmp_path / "args.json").write_text(json.dumps({"train_file": "x.jsonl", "do_eval": True, "adam_beta2": 0.9}))
    _, data_args, training_args = run_classification.parse_classification_arguments([str(tmp_path / "args.json")])
    assert (data_args.train_file, training_args.adam_beta2, training_args.log_level) == ("x.jsonl", 0.9, "warning")


# --- defaults: output folders, console, pinned memory ---


def test_demo_outputs_go_to_their_own_folders():
    assert run_mlm.parse_mlm_arguments(MLM_ARGUMENTS)[3].output_dir == "outputs/run_mlm"
    assert run_mlm.DEMO_ARGUMENTS[run_mlm.DEMO_ARGUMENTS.index("--output_dir") + 1] == "outputs/run_mlm"
    classification_args = run_classification.parse_classification_arguments(CLASSIFICATION_ARGUMENTS)[2]
    assert classification_args.output_dir == "outputs/run_classification"
    demo = run_classification.DEMO_ARGUMENTS
    assert demo[demo.index("--output_dir") + 1] == "outputs/run_classification"


def test_console_defaults_to_warnings_and_no_pinned_memory_without_an_accelerator():
    training_args = run_mlm.parse_mlm_arguments(MLM_ARGUMENTS)[3]
    assert training_args.log_level == "warning"
    assert training_args.dataloader_pin_memory is torch.accelerator.is_available()
    assert run_mlm.parse_mlm_arguments([*MLM_ARGUMENTS, "--log_level", "info"])[3].log_level == "info"


@pytest.mark.parametrize("script", SCRIPTS)
def test_demo_prints_an_equivalent_command(script, monkeypatch, capsys):
    _, parse_args, _ = SCRIPTS[script]
    monkeypatch.chdir(REPO_ROOT)
    monkeypatch.setattr(sys, "argv", [script])
    demo_arguments = parse_args([])
    printed = capsys.readouterr().out
    assert printed.startswith(f"No arguments: running the demo, i.e. python {script} --")
    command = shlex.split(printed.split("i.e. ", 1)[1])
    assert command[:2] == ["python", script]
    assert "data/demo_vocab.txt" in command  # shown relative to the current folder
    given = [str(REPO_ROOT / argument) if (REPO_ROOT / argument).is_file() else argument for argument in command[2:]]
    assert parse_args(given) == demo_arguments


# --- bf16 on a CPU ---

WITH_BF16 = CpuBf16(True, "this CPU has bf16 instructions (avx512_bf16)")
WITHOUT_BF16 = CpuBf16(False, "this CPU has no bf16 instructions (none of ...)")


def parsed_with_cpu(monkeypatch, caplog, cpu: CpuBf16, *extra: str) -> TrainingArguments:
    """The training arguments of run_classification.py on a CPU (--use_cpu) whose bf16 verdict is `cpu`."""
    monkeypatch.setattr(cpu_precision, "cpu_bf16", lambda: cpu)
    with caplog.at_level(logging.WARNING, logger="roformer_hf.training.machine.cpu_precision"):
        return run_classification.parse_classification_arguments([*CLASSIFICATION_ARGUMENTS, "--use_cpu", *extra])[2]


@pytest.mark.parametrize("given", [["--bf16"], ["--bf16", "true"], ["--bf16_full_eval", "true", "--bf16"]])
def test_bf16_on_a_cpu_without_bf16_instructions_is_dropped_in_one_line(monkeypatch, caplog, given):
    training_args = parsed_with_cpu(monkeypatch, caplog, WITHOUT_BF16, *given)
    assert training_args.bf16 is False and training_args.bf16_full_eval is False
    assert training_args.mixed_precision == "no"
    [line] = caplog.messages
    assert line.startswith("--bf16") and "dropped" in line and WITHOUT_BF16.reason in line


def test_bf16_on_a_cpu_with_bf16_instructions_is_kept_silently(monkeypatch, caplog):
    training_args = parsed_with_cpu(monkeypatch, caplog, WITH_BF16, "--bf16", "true")
    assert training_args.bf16 is True and training_args.mixed_precision == "bf16"
    assert caplog.messages == []


@pytest.mark.parametrize("pays", [True, False], ids=["faster-in-bf16", "slower-in-bf16"])
def test_the_default_on_a_bf16_cpu_is_what_the_probe_measures_said_in_one_line(monkeypatch, caplog, pays):
    """Parsing leaves bf16 on for now, silently; the probe of the built model then decides, in one line."""
    training_args = parsed_with_cpu(monkeypatch, caplog, WITH_BF16)
    assert training_args.bf16 is True and caplog.messages == []
    measured = CpuBf16(pays, f"this model trains {1.4 if pays else 0.8}x as fast in bf16 (mocked)")
    monkeypatch.setattr(cpu_precision, "step_bf16", lambda model, batch_size, seq_len: measured)
    with caplog.at_level(logging.WARNING, logger="roformer_hf.training.machine.cpu_precision"):
        cpu_precision.settle_cpu_precision(training_args, model=None, seq_len=64)
    assert training_args.bf16 is pays and training_args.mixed_precision == ("bf16" if pays else "no")
    [line] = caplog.messages
    assert measured.reason in line and ("--bf16 false" if pays else "--bf16 true") in line


@pytest.mark.parametrize(
    ("cpu", "given"),
    [(WITH_BF16, ["--bf16", "false"]), (WITHOUT_BF16, []), (WITHOUT_BF16, ["--bf16", "false"])],
    ids=["bf16-cpu-bf16-false", "no-bf16-cpu-default", "no-bf16-cpu-bf16-false"],
)
def test_float32_on_a_cpu_without_a_word(monkeypatch, caplog, cpu, given):
    training_args = parsed_with_cpu(monkeypatch, caplog, cpu, *given)
    assert training_args.bf16 is False and training_args.mixed_precision == "no"
    assert caplog.messages == []


def test_bf16_from_an_arguments_file_on_a_cpu(tmp_path, monkeypatch):
    monkeypatch.setattr(cpu_precision, "cpu_bf16", lambda: WITHOUT_BF16)
    (tmp_path / "args.yaml").write_text("train_file: x.jsonl\ndo_train: true\nbf16: true\nuse_cpu: true\n")
    assert run_classification.parse_classification_arguments([str(tmp_path / "args.yaml")])[2].bf16 is False
    plain = TrainingArguments(output_dir=str(tmp_path), use_cpu=True, bf16=True)  # transformers' own is unchanged
    assert plain.bf16 is True


# --- whole runs as a user sees them ---


def loaded_by_printed_code(output: str) -> dict:
    """Run the Python of the closing lines; return the variables it defined."""
    closing = output[output.rindex("model saved to ") :].splitlines()
    assert closing[0].endswith("; load it with:")
    code = "\n".join(line.strip() for line in closing[1:5])
    variables: dict = {}
    exec(code, variables)
    return variables


def test_mlm_run_is_quiet_prints_results_and_how_to_load_the_model(tmp_path):
    stdout, output = run_script("run_mlm.py", [*MLM_ARGUMENTS, "--output_dir", "out"], tmp_path)
    assert " - INFO - " not in output and "[INFO|" not in output
    assert "pin_memory" not in output and "Do not forget to share" not in output
    assert "| before training |" in output and output.count("fill-mask: ") == PROBE_COUNT
    # each stage says its speed once, to size a run (issue 52.3; no timing asserted)
    assert len(re.findall(r"speed: [0-9.]+ optimizer steps/s for this model \(\d+\.\dM parameters\)", output)) == 2
    assert stdout.rstrip().splitlines()[-5] == "model saved to out; load it with:"
    os.chdir(tmp_path)  # the printed path is relative to the folder the script ran in
    try:
        variables = loaded_by_printed_code(output)
    finally:
        os.chdir(REPO_ROOT)
    saved = load_file(tmp_path / "out" / "model.safetensors")
    loaded = variables["model"].state_dict()
    assert type(variables["model"]).__name__ == "RoFormerForMaskedLM"
    assert type(variables["tokenizer"]).__name__ == "RoFormerJiebaTokenizer"
    assert all(torch.equal(loaded[name], tensor) for name, tensor in saved.items())
    assert (
        variables["tokenizer"].get_vocab()
        == build_tokenizer(ModelArguments(tokenizer_name=str(DATA / "demo_vocab.txt"))).get_vocab()
    )


def test_mlm_run_at_info_shows_progress_and_the_share_reminder_once(tmp_path):
    arguments = [*MLM_ARGUMENTS, "--output_dir", "out", "--log_level", "info"]
    _, output = run_script("run_mlm.py", arguments, tmp_path, ON_A_CI_MACHINE)
    assert "***** Running training *****" in output and "*** Stage 2/2" in output
    assert output.count("Do not forget to share your model") == 1  # train() ends twice, once per stage
    assert "pin_memory" not in output or torch.accelerator.is_available()


def test_classification_run_names_validation_and_prints_how_to_load(tmp_path):
    stdout, output = run_script(
        "run_classification.py", [*CLASSIFICATION_ARGUMENTS, "--output_dir", str(tmp_path / "out")], tmp_path
    )
    closing_lines = stdout.rstrip().splitlines()
    assert closing_lines[-6] == f"model saved to {tmp_path / 'out'}; load it with:"
    assert closing_lines[-1].startswith(f"predictions written to {tmp_path / 'out' / 'predictions.jsonl'}")
    assert "[INFO|" not in output and "***** eval metrics *****" in output and "***** test metrics *****" in output
    assert output.count("speed: ") == 1 and "optimizer steps/s for this model" in output
    variables = loaded_by_printed_code(output)
    assert type(variables["model"]).__name__ == "RoFormerForSequenceClassification"
    assert set(variables["model"].config.id2label.values()) == {"civil", "criminal"}
    saved, loaded = load_file(tmp_path / "out" / "model.safetensors"), variables["model"].state_dict()
    assert all(torch.equal(loaded[name], tensor) for name, tensor in saved.items())

    _, verbose = run_script(
        "run_classification.py",
        [*CLASSIFICATION_ARGUMENTS, "--output_dir", str(tmp_path / "verbose"), "--log_level", "info"],
        tmp_path,
        ON_A_CI_MACHINE,
    )
    assert verbose.count("***** Running Evaluation on the validation data *****") == 1
    assert verbose.count("***** Running Prediction *****") == 1  # the test data's pass


def test_a_classifier_from_an_mlm_checkpoint_says_its_new_head_in_one_line(tmp_path):
    """Not transformers' LOAD REPORT table (nine rows in terminal colours): one line naming the new head and the
    dropped one; the table stays at --log_level info."""
    from roformer_hf import RoFormerConfig, RoFormerForMaskedLM, RoFormerJiebaTokenizer

    tokenizer = RoFormerJiebaTokenizer(str(DATA / "demo_vocab.txt"))
    sizes = dict(item.split("=") for item in TINY_MODEL.split(","))
    config = RoFormerConfig(vocab_size=len(tokenizer), **{name: int(value) for name, value in sizes.items()})
    RoFormerForMaskedLM(config).save_pretrained(tmp_path / "mlm")
    from_mlm = [*CLASSIFICATION_ARGUMENTS, "--model_name_or_path", str(tmp_path / "mlm"), "--max_steps", "1"]
    from_mlm = [argument for argument in from_mlm if argument not in ("--do_eval", "--do_predict")]
    _, output = run_script("run_classification.py", [*from_mlm, "--output_dir", str(tmp_path / "out")], tmp_path)
    [line] = [line for line in output.splitlines() if "starts from" in line]
    assert line.endswith(
        f"RoFormerForSequenceClassification starts from {tmp_path / 'mlm'}; new, initialised at random: classifier "
        "(4 weights); dropped, the RoFormerForMaskedLM's head: cls (5 weights) (--log_level info shows transformers' "
        "load report)."
    )
    assert "LOAD REPORT" not in output and "UNEXPECTED" not in output and "\x1b[" not in output
    arguments = [*from_mlm, "--output_dir", str(tmp_path / "verbose"), "--log_level", "info"]
    _, verbose = run_script("run_classification.py", arguments, tmp_path)
    assert verbose.count("RoFormerForSequenceClassification LOAD REPORT") == 1 and "UNEXPECTED" in verbose


# --- a file of arguments followed by overrides; the demo with options on top ---


@pytest.mark.parametrize("name", ["args.yaml", "args.json"])
def test_arguments_file_followed_by_overrides(name, tmp_path):
    """As in transformers' examples (`python run_mlm.py args.yaml --ddp_backend gloo`): the options after the file
    win over it (the distributed run itself: test_distributed.py)."""
    arguments = {"train_file": "corpus.txt", "stages": "32:8:2", "seed": 3, "learning_rate": "1e-3", "bf16": False}
    (tmp_path / name).write_text(yaml.safe_dump(arguments) if name.endswith(".yaml") else json.dumps(arguments))
    _, data_args, masking_args, training_args = run_mlm.parse_mlm_arguments(
        [str(tmp_path / name), "--max_grad_norm", "0.5", "--seed", "9"]
    )
    assert (data_args.train_file, masking_args.stages, training_args.learning_rate) == ("corpus.txt", "32:8:2", 1e-3)
    assert (training_args.max_grad_norm, training_args.seed, training_args.output_dir) == (0.5, 9, "outputs/run_mlm")


def test_unknown_option_in_an_arguments_file_is_named(tmp_path):
    (tmp_path / "args.yaml").write_text("train_file: corpus.txt\nlearning_rat: 0.001\n")
    with pytest.raises(ScriptError, match=r"args.yaml names unknown options: learning_rat; fix or remove them"):
        run_mlm.parse_mlm_arguments([str(tmp_path / "args.yaml"), "--seed", "1"])


@pytest.mark.parametrize("script", SCRIPTS)
def test_demo_takes_options_on_top(script, monkeypatch, capsys):
    """Options that name no data and no model run the demo with them (`python run_mlm.py --overwrite_output_dir`)."""
    _, parse_args, _ = SCRIPTS[script]
    monkeypatch.chdir(REPO_ROOT)
    monkeypatch.setattr(sys, "argv", [script])
    demo = parse_args([])
    capsys.readouterr()
    again = parse_args(["--overwrite_output_dir", "--output_dir", "outputs/again", "--seed", "3"])
    printed = capsys.readouterr().out
    assert printed.startswith(f"No data or model given: running the demo, i.e. python {script} --")
    assert printed.strip().endswith("--overwrite_output_dir --output_dir outputs/again --seed 3")
    assert (again[-1].overwrite_output_dir, again[-1].output_dir, again[-1].seed) == (True, "outputs/again", 3)
    assert again[1].train_file == demo[1].train_file
    with pytest.raises(ScriptError, match="no training data"):  # naming a model is no longer the demo
        run_mlm.parse_mlm_arguments(["--model_name_or_path", "my-roformer"])


def test_rerun_hint_names_a_command_that_works(tmp_path, monkeypatch):
    """Re-running the demo stops on its earlier run; the option the message names, added to `python run_mlm.py`,
    runs it again."""
    monkeypatch.chdir(tmp_path)
    from roformer_hf.training.outputs.output_record import close_record, open_record

    (tmp_path / "outputs" / "run_mlm").mkdir(parents=True)
    open_record(tmp_path / "outputs" / "run_mlm")  # what the record proves a run's (outputs/output_record.py)
    (tmp_path / "outputs" / "run_mlm" / "config.json").write_text('{"model_type": "roformer_hf"}')
    (tmp_path / "outputs" / "run_mlm" / "training_args.bin").write_bytes(b"")
    close_record(tmp_path / "outputs" / "run_mlm")
    with pytest.raises(ScriptError, match="add --overwrite_output_dir to replace it") as error:
        check_output_dir(run_mlm.parse_mlm_arguments([])[3])
    assert "outputs/run_mlm" in str(error.value)
    check_output_dir(run_mlm.parse_mlm_arguments(["--overwrite_output_dir"])[3])  # accepted
