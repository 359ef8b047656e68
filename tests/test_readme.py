"""The README runs as written.

Every ```python block of README.md and docs/*.md runs offline in a fresh folder that holds the repository's `data/`
(a `print(...)  # -> value` line asserts that the print shows `value`). A docs block that needs what a test cannot
have (the Hub, a GPU, a trained checkpoint) is marked `<!-- no-test: why -->` on the line before it and is only
compiled; the README has no such block. The checkpoints and files the docs' blocks name as the reader's own
(`my-classifier`, `path/to/checkpoint`, `vocab.txt`, ...) are tiny stand-ins under those names (`DOCS_STAND_INS`).
Every command of the README's ```bash blocks is run here (the scripts' example commands), is run by CI
(`.ci/run`), or says on its line why it is not (`# not run by the tests: why`); so is every command of docs/*.md,
where a page's commands may also be run by another test (`DOCS_RUN_BY_TESTS`).
"""

import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
README = REPO_ROOT / "README.md"
DOCS = sorted((REPO_ROOT / "docs").glob("*.md"))
CI_SCRIPT = REPO_ROOT / ".ci" / "run"

FENCE = re.compile(r"^(?P<mark><!-- no-test: (?P<why>.+?) -->\n)?```(?P<lang>\w*)\n(?P<code>.*?)^```", re.M | re.S)
EXPECTED_PRINT = re.compile(r"^(?P<indent>\s*)print\((?P<args>.*)\)\s*# -> (?P<expected>.*)$")
NOT_RUN = "# not run by the tests:"

# README commands that CI runs rather than these tests: command -> what .ci/run must contain for it.
RUN_BY_CI = {
    'pip install -e ".[test,tf]"': 'pip install --quiet -e ".[test,tf]"',
    "HF_HUB_OFFLINE=1 python -m pytest": "HF_HUB_OFFLINE=1 python -m pytest",
    'pip install -e ".[train]"': 'pip install --quiet -e ".[test,tf]"',  # the test extra includes train
    "python run_mlm.py": "python run_mlm.py",  # the demo: a few minutes, too long for the tests
}
# The scripts' example commands, which test_readme_script_commands_run runs in the README's order.
SCRIPTS = ("python run_mlm.py ", "python run_classification.py ")


@dataclass
class Block:
    path: Path
    line: int
    lang: str
    code: str
    no_test: str | None

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(REPO_ROOT)}:{self.line}"


def code_blocks(path: Path) -> list[Block]:
    text = path.read_text(encoding="utf-8")
    return [
        Block(path, text.count("\n", 0, match.start("code")) + 1, match["lang"], match["code"], match["why"])
        for match in FENCE.finditer(text)
    ]


def python_blocks(paths) -> list[Block]:
    return [block for path in paths for block in code_blocks(path) if block.lang == "python"]


def readme_commands() -> list[str]:
    """The README's bash commands: continuation lines joined, `&&` chains split, comments kept on their command."""
    return bash_commands(README)


def bash_commands(path: Path) -> list[str]:
    """The bash commands of a Markdown file, read as `readme_commands` reads the README's."""
    commands = []
    for block in code_blocks(path):
        if block.lang != "bash":
            continue
        for line in block.code.replace("\\\n", " ").splitlines():
            line = " ".join(line.split())
            if line and not line.startswith("#"):
                commands.extend(part.strip() for part in line.split(" && "))
    return commands


def with_print_checks(code: str) -> str:
    """`print(a, b)  # -> text` becomes an assertion that the print shows `text` (and the print itself)."""
    lines = []
    for line in code.splitlines():
        match = EXPECTED_PRINT.match(line)
        if match:
            line = f"{match['indent']}_expect_printed({match['expected'].strip()!r}, {match['args']})"
        lines.append(line)
    helper = textwrap.dedent(
        """\
        def _expect_printed(expected, *values):
            shown = " ".join(str(value) for value in values)
            print(shown)
            assert shown == expected, f"printed {shown!r}, the README says {expected!r}"
        """
    )
    return helper + "\n".join(lines) + "\n"


def offline_env(tmp_path: Path) -> dict:
    return {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "PYTHONPATH": str(REPO_ROOT),
        "HF_MODULES_CACHE": str(tmp_path / "modules"),
    }


def fresh_folder(tmp_path: Path) -> Path:
    """A working folder like a fresh clone's root, as far as the examples look: `data/` and the scripts."""
    work = tmp_path / "work"
    work.mkdir()
    for name in ("data", "run_mlm.py", "run_classification.py"):
        (work / name).symlink_to(REPO_ROOT / name)
    return work


# What the docs' blocks load as the reader's own checkpoints and files: the name a block uses -> the tiny stand-in
# `build_stand_ins` saves under it (random weights over the demo vocabulary; the 50k vocabulary of the original
# checkpoints, shipped in data/, for `vocab.txt`).
DOCS_STAND_INS = {
    "roformer-chinese-base": "a masked LM with its word-level tokenizer (checkpoints.md's pipelines)",
    "my-classifier": "a sequence classifier, labels civil / criminal",
    "my-tagger": "a token classifier of 3 labels",
    "my-qa-model": "a question-answering model",
    "roformer-sim-base": "RoFormer-Sim: a causal LM with a linear pooler and UniLM attention",
    "roformer-char": "a masked LM with a char-level BertTokenizer",
    "path": "path/to/checkpoint (a masked LM), path/to/folder (only vocab.txt), path/to/saved (a saved tokenizer)",
    "vocab.txt": "the 50k vocabulary of the original checkpoints",
    "my_words.txt": "a jieba user dictionary",
    "more_words.txt": "a jieba user dictionary",
}


def build_stand_ins(folder: Path) -> None:
    """Save every stand-in of `DOCS_STAND_INS` in `folder`."""
    from conftest import ROFORMER_VOCAB
    from transformers import BertTokenizer

    import roformer_hf

    demo_vocab = REPO_ROOT / "data" / "demo_vocab.txt"
    tokenizer = roformer_hf.RoFormerJiebaTokenizer(str(demo_vocab))
    sizes = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 128}

    def config(**settings) -> roformer_hf.RoFormerConfig:
        return roformer_hf.RoFormerConfig(**{"vocab_size": tokenizer.vocab_size, **sizes, **settings})

    labels = {"id2label": {0: "civil", 1: "criminal"}, "label2id": {"civil": 0, "criminal": 1}}
    sim = {"is_decoder": True, "decoder_mask": "unilm", "add_pooling_layer": True, "pooler_activation": "linear"}
    models = {
        "roformer-chinese-base": roformer_hf.RoFormerForMaskedLM(config()),
        "my-classifier": roformer_hf.RoFormerForSequenceClassification(config(**labels)),
        "my-tagger": roformer_hf.RoFormerForTokenClassification(config(num_labels=3)),
        "my-qa-model": roformer_hf.RoFormerForQuestionAnswering(config()),
        "roformer-sim-base": roformer_hf.RoFormerForCausalLM(config(**sim)),
        "path/to/checkpoint": roformer_hf.RoFormerForMaskedLM(config()),
    }
    for name, model in models.items():
        model.save_pretrained(folder / name)
        tokenizer.save_pretrained(folder / name)
    tokenizer.save_pretrained(folder / "path" / "to" / "saved")
    (folder / "path" / "to" / "folder").mkdir(parents=True)
    for target in (folder / "vocab.txt", folder / "path" / "to" / "folder" / "vocab.txt"):
        target.write_bytes(ROFORMER_VOCAB.read_bytes())
    characters = [line for line in demo_vocab.read_text(encoding="utf-8").splitlines() if len(line) == 1]
    char_vocab = folder / "char_vocab.txt"
    char_vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *characters]) + "\n", "utf-8")
    char_tokenizer = BertTokenizer(str(char_vocab))
    roformer_hf.RoFormerForMaskedLM(config(vocab_size=len(char_tokenizer))).save_pretrained(folder / "roformer-char")
    char_tokenizer.save_pretrained(folder / "roformer-char")
    char_vocab.unlink()
    (folder / "my_words.txt").write_text("区块链 10 n\n量子计算 5\n", encoding="utf-8")
    (folder / "more_words.txt").write_text("大语言模型\n", encoding="utf-8")


@pytest.fixture(scope="module")
def stand_ins(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("docs_stand_ins")
    build_stand_ins(folder)
    assert {path.name for path in folder.iterdir()} == set(DOCS_STAND_INS)
    return folder


def test_readme_has_python_and_no_untested_block():
    blocks = python_blocks([README])
    assert blocks, "the README shows no Python"
    assert not [block.name for block in blocks if block.no_test], "every README block must run as written"


@pytest.mark.parametrize("path", [README, *DOCS], ids=lambda path: str(path.relative_to(REPO_ROOT)))
def test_local_links_point_to_files(path):
    targets = re.findall(r"\]\((?!https?://)([^)#\s]+)", path.read_text(encoding="utf-8"))
    assert not [target for target in targets if not (path.parent / target).exists()]


def test_print_checks_fail_on_another_value(tmp_path):
    script = tmp_path / "check.py"
    script.write_text(with_print_checks("print(1 + 1)  # -> 3\n"), encoding="utf-8")
    completed = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=False)
    assert completed.returncode != 0
    assert "printed '2', the README says '3'" in completed.stderr


@pytest.mark.slow
@pytest.mark.parametrize("block", python_blocks([README, *DOCS]), ids=lambda block: block.name)
def test_python_block_runs_as_written(block, tmp_path, request):
    if block.no_test:
        compile(block.code, block.name, "exec")  # still valid Python
        return
    work = fresh_folder(tmp_path)
    if block.path != README:
        stand_ins = request.getfixturevalue("stand_ins")
        for entry in stand_ins.iterdir():
            (work / entry.name).symlink_to(entry)
    script = tmp_path / "block.py"
    script.write_text(with_print_checks(block.code), encoding="utf-8")
    completed = subprocess.run(
        [sys.executable, str(script)], cwd=work, env=offline_env(tmp_path), capture_output=True, text=True, check=False
    )
    assert completed.returncode == 0, f"{block.name} failed:\n{completed.stderr[-3000:]}"


def test_every_readme_command_is_run_somewhere():
    unaccounted = [
        command
        for command in readme_commands()
        if NOT_RUN not in command and command not in RUN_BY_CI and not command.startswith(SCRIPTS)
    ]
    assert not unaccounted, f"run these in a test or in .ci/run (RUN_BY_CI), or say why not ({NOT_RUN} ...)"
    exempted = [command for command in readme_commands() if NOT_RUN in command]
    assert all(command.split(NOT_RUN)[1].strip() for command in exempted), "an exempted command needs its reason"


# Pages of docs/ whose commands without a reason are all run, as written, by a test: page -> that test.
DOCS_RUN_BY_TESTS = {
    "docs/distributed_training.md": "tests/test_distributed.py::test_documented_cpu_commands_run_as_written",
}


@pytest.mark.parametrize("path", DOCS, ids=lambda path: str(path.relative_to(REPO_ROOT)))
def test_every_docs_command_is_run_somewhere(path):
    page = str(path.relative_to(REPO_ROOT))
    commands = bash_commands(path)
    exempted = [command for command in commands if NOT_RUN in command]
    assert all(command.split(NOT_RUN)[1].strip() for command in exempted), "an exempted command needs its reason"
    if page in DOCS_RUN_BY_TESTS:
        test_file, test_name = DOCS_RUN_BY_TESTS[page].split("::")
        assert f"def {test_name}(" in (REPO_ROOT / test_file).read_text(encoding="utf-8")
        return
    unaccounted = [command for command in commands if NOT_RUN not in command and command not in RUN_BY_CI]
    assert not unaccounted, f"run these in a test (DOCS_RUN_BY_TESTS) or in .ci/run, or say why not ({NOT_RUN} ...)"


# Where an example writes: the output folder of a script or the converter, a `save_pretrained` or model card target.
EXAMPLE_OUTPUT = re.compile(
    r"--output_dir (\S+)|--out (\S+)|--output (\S+)|roformer_hf\.conversion\.convert \S+ (\S+)"
    r'|(?:save_pretrained|write_model_card)\("([^"]+)"'
)


def example_outputs() -> list[str]:
    """The top-level files and folders (`name/`: the written path goes deeper or has no suffix) that the code blocks
    of the README and docs/ write when run at the root."""
    found = set()
    for path in [README, *DOCS]:
        for block in code_blocks(path):
            for match in EXAMPLE_OUTPUT.finditer(block.code.replace("\\\n", " ")):
                written = Path(next(group for group in match.groups() if group))
                is_folder = len(written.parts) > 1 or not written.suffix
                found.add(written.parts[0] + ("/" if is_folder else ""))
    return sorted(found)


def test_example_outputs_are_ignored_by_git():
    """Following the README or docs/ in a clone leaves `git status` clean: whatever the examples write is ignored."""
    outputs = example_outputs()
    assert {"my-roformer/", "outputs/", "roformer-chinese-base/"} <= set(outputs)  # the README's
    if not (REPO_ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    checked = subprocess.run(
        ["git", "check-ignore", "--no-index", "--verbose", "--non-matching", *outputs],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    not_ignored = [line.split("\t")[-1] for line in checked.stdout.splitlines() if line.startswith("::")]
    assert not not_ignored, f"add these to .gitignore: {not_ignored}"


def test_readme_predicts_on_documents_it_did_not_train_on():
    """The README's prediction example measures new documents: its test file shares none with the training file."""
    commands = [shlex.split(command) for command in readme_commands() if command.startswith(SCRIPTS[1])]
    train_file = next(words[words.index("--train_file") + 1] for words in commands if "--train_file" in words)
    test_file = next(words[words.index("--test_file") + 1] for words in commands if "--test_file" in words)
    train, test = (
        [json.loads(line) for line in (REPO_ROOT / name).read_text().splitlines()] for name in (train_file, test_file)
    )
    assert not {row["id"] for row in train} & {row["id"] for row in test}
    assert not {row["text"] for row in train} & {row["text"] for row in test}


@pytest.mark.parametrize("command", sorted(RUN_BY_CI))
def test_ci_runs_the_readme_command(command):
    assert command in readme_commands(), f"RUN_BY_CI names {command!r}, which the README no longer shows"
    assert RUN_BY_CI[command] in CI_SCRIPT.read_text(encoding="utf-8"), f".ci/run does not run {RUN_BY_CI[command]!r}"


def card_command(model_dir: Path) -> list[str]:
    """The words of the command a model card says trained the model."""
    card = (model_dir / "README.md").read_text(encoding="utf-8")
    return shlex.split(re.search(r"^Command.*:\n\n```bash\n(.+)\n```", card, re.M)[1])


@pytest.mark.slow
def test_readme_script_commands_run(tmp_path):
    """Pretrain, fine-tune and predict with the README's commands, as written, in one fresh folder; each shows what
    it learned, and says where its outputs went."""
    work = fresh_folder(tmp_path)
    commands = [command for command in readme_commands() if command.startswith(SCRIPTS)]
    assert len(commands) == 3
    printed = []
    for command in commands:
        arguments = shlex.split(command)
        completed = subprocess.run(
            [sys.executable, *arguments[1:]],
            cwd=work,
            env=offline_env(tmp_path),
            capture_output=True,
            text=True,
            check=False,
        )
        assert completed.returncode == 0, f"{command}\nfailed:\n{completed.stderr[-3000:]}"
        printed.append(completed.stdout)

    outputs = work / "outputs"
    assert (outputs / "my-roformer" / "model.safetensors").is_file()
    # the loss plot has a training line: training losses logged at several steps of the first stage
    history = json.loads((outputs / "my-roformer" / "stage-1" / "trainer_state.json").read_text())["log_history"]
    assert len([entry for entry in history if "loss" in entry]) >= 3
    # the classifier learned: always answering one label scores 0.583 on its 60 held-out rows (35 of one class)
    evaluation = json.loads((outputs / "my-classifier" / "eval_results.json").read_text())
    assert evaluation["eval_samples"] == 60 and evaluation["eval_accuracy"] >= 0.8, evaluation
    assert "validation accuracy: " in printed[1]
    # the model cards name the commands that made them, as written
    for command, folder in zip(commands[:2], ("my-roformer", "my-classifier"), strict=True):
        assert card_command(outputs / folder) == shlex.split(command)
    # a prediction row per held-out document: its id, the prediction, the scores and the gold label
    sample = [json.loads(line) for line in (REPO_ROOT / "data" / "cail_heldout.jsonl").read_text().splitlines()]
    predicted = (outputs / "my-predictions" / "predictions.jsonl").read_text(encoding="utf-8").splitlines()
    predictions = [json.loads(line) for line in predicted]
    assert [(row["id"], row["label"]) for row in predictions] == [(row["id"], row["label"]) for row in sample]
    assert {row["prediction"] for row in predictions} == {"civil", "criminal"}
    assert printed[2].splitlines()[-1].startswith("predictions written to outputs/my-predictions/predictions.jsonl")
    assert "test accuracy: " in printed[2] and f" on {len(sample)} documents" in printed[2]
