"""Tests of the training settings' checks (roformer_hf/training/setting_checks.py, `check_training_settings`):
values in range are accepted, the edges included; the refusals and their messages are rows of docs/bad_inputs.md
(tests/test_bad_settings_and_data.py)."""

import logging
import math

import pytest
import torch

from roformer_hf.training.cli import ScriptTrainingArguments, parse_arguments
from roformer_hf.training.errors import ScriptError
from roformer_hf.training.machine.launch import check_distributed_launch
from roformer_hf.training.setting_checks import SETTING_RANGES, SettingRange


def parse(tmp_path, *options: str) -> ScriptTrainingArguments:
    (training_args,) = parse_arguments([ScriptTrainingArguments], ["--output_dir", str(tmp_path), *options])
    return training_args


# Values at the edges of each range, and a usual one: all accepted.
ACCEPTED = {
    "learning_rate": ["1e-12", "5e-5", "10"],
    "weight_decay": ["0", "0.01"],
    "adam_beta1": ["0", "0.9", "0.999999"],
    "adam_beta2": ["0", "0.98"],
    "adam_epsilon": ["1e-30", "1e-6"],
    "max_grad_norm": ["0", "1.0"],
    "label_smoothing_factor": ["0", "0.1", "0.99"],
    "warmup_steps": ["0", "0.1", "100"],
    "num_train_epochs": ["0.5", "3"],
    "neftune_noise_alpha": ["0", "5"],
    "logging_steps": ["0.1", "1", "500"],
    "save_steps": ["0.5", "500"],
    "eval_delay": ["0", "2"],
}


def test_every_checked_setting_has_accepted_values():
    assert set(ACCEPTED) | {"eval_steps"} == set(SETTING_RANGES)


@pytest.mark.parametrize(("name", "value"), [(name, value) for name, values in ACCEPTED.items() for value in values])
def test_values_in_range_are_accepted(tmp_path, name, value):
    assert getattr(parse(tmp_path, f"--{name}", value), name) == float(value)


@pytest.mark.parametrize("name", sorted(SETTING_RANGES))
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-1"])
def test_non_finite_and_negative_values_are_refused(tmp_path, name, value):
    strategy = {"eval_steps": ["--eval_strategy", "steps"], "save_steps": ["--save_strategy", "steps"]}.get(name, [])
    with pytest.raises(ScriptError, match=rf"^--{name} must be (in \[|a finite number).*, got {value}(\.0)?\.$"):
        parse(tmp_path, *strategy, f"--{name}={value}")  # "=": argparse reads a lone -inf as an option


def test_the_defaults_are_in_range(tmp_path):
    parse(tmp_path)  # every default of TrainingArguments passes


def test_setting_range_says_its_values():
    assert str(SettingRange(0, low_open=True)) == "a finite number above 0"
    assert str(SettingRange(0)) == "a finite number of at least 0"
    assert str(SettingRange(0, high=1)) == "in [0, 1)"
    assert not SettingRange(0, high=1).holds(1.0) and SettingRange(0, high=1).holds(0.0)
    assert not SettingRange(0).holds(math.nan) and not SettingRange(0).holds(math.inf)


def test_seed_range(tmp_path):
    assert parse(tmp_path, "--seed", "0").seed == 0
    assert parse(tmp_path, "--seed", str(2**32 - 1)).seed == 2**32 - 1
    with pytest.raises(ScriptError, match=r"--seed must be a whole number from 0 to 2\*\*32 - 1, got -1\."):
        parse(tmp_path, "--seed", "-1")


def test_scheduler_arguments_that_suit_the_scheduler_are_accepted(tmp_path):
    options = ["--lr_scheduler_type", "cosine", "--lr_scheduler_kwargs", '{"num_cycles": 0.3}']
    assert parse(tmp_path, *options).lr_scheduler_kwargs == {"num_cycles": 0.3}
    with pytest.raises(ScriptError, match="does not suit --lr_scheduler_type cosine"):
        parse(tmp_path, "--lr_scheduler_type", "cosine", "--lr_scheduler_kwargs", '{"power": 2.0}')


def test_no_reporting_is_accepted(tmp_path):
    assert parse(tmp_path, "--report_to", "none").report_to in ([], "none", ["none"])


@pytest.mark.parametrize(
    ("option", "value", "accepted"),
    [("--torch_compile_mode", "bogus", "max-autotune"), ("--torch_compile_backend", "nonexistent", "inductor")],
)
def test_options_passed_through_to_torch_are_checked_at_parse(tmp_path, option, value, accepted):
    """`--torch_compile_mode bogus` and `--torch_compile_backend nonexistent` ended in a traceback at the first step;
    now one line naming the values torch.compile takes here (`PASSED_THROUGH_OPTIONS`)."""
    with pytest.raises(ScriptError, match=rf"^{option} {value}: torch.compile.* takes one of .*{accepted}"):
        parse(tmp_path, option, value)
    assert getattr(parse(tmp_path, option, accepted), option.removeprefix("--")) == accepted


def test_the_parser_reports_the_options_given(tmp_path):
    """`ParsedArguments.given`: the options the command line gave, by any spelling argparse takes (a prefix, --no_),
    whatever their value; the defaults are not among them (issue 50.5)."""
    parsed = parse_arguments(
        [ScriptTrainingArguments],
        ["--output_dir", str(tmp_path), "--learning_rate", "5e-5", "--no_dataloader_pin_memory", "--seed=42"],
    )
    assert parsed.given == {"output_dir", "learning_rate", "dataloader_pin_memory", "seed"}
    assert parsed[0].seed == 42


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--lerning_rate", "1e-4"], r"^unknown argument --lerning_rate 1e-4: did you mean --learning_rate\? "),
        (["--streaming"], r"^--streaming: run_classification.py reads its data whole .* leave --streaming out"),
    ],
)
def test_an_option_no_script_takes_is_named_in_one_line(tmp_path, arguments, message):
    with pytest.raises(ScriptError, match=message):
        parse(tmp_path, *arguments)


@pytest.mark.skipif(torch.accelerator.is_available(), reason="FSDP on an accelerator shards the model")
def test_fsdp_on_a_cpu_says_it_trains_as_ddp(tmp_path, caplog):
    """`--fsdp` on a CPU trained as plain DDP without a word (issue 52.5)."""
    training_args = parse(tmp_path, "--fsdp", "full_shard")
    caplog.clear()  # transformers' own deprecation line of a string --fsdp, said once per process while parsing
    with caplog.at_level(logging.WARNING):
        check_distributed_launch(training_args)
    assert [record.getMessage().split(":")[0] for record in caplog.records] == ["--fsdp on a CPU"]
    assert "trains as plain DDP" in caplog.text
