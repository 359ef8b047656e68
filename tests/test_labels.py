"""Tests of roformer_hf/training/classification/labels.py: the checks of a label column, the problem type inferred from
it, the label maps and the training target of a label. The end-to-end cases (a script run refusing bad labels) are in
test_run_classification.py and test_bad_inputs.py."""

import datasets
import pytest
from huggingface_hub import ModelCard

from roformer_hf.training.classification.labels import (
    CLASS_NAMES,
    KIND_CONFLICTS,
    MULTI_LABEL,
    REGRESSION,
    SINGLE_LABEL,
    LabelInfo,
    build_label_maps,
    check_finite_labels,
    check_label_kinds,
    check_overrides_keep_labels,
    class_label_names,
    encode_label,
    infer_problem_type,
    label_info_from_data,
    label_kind,
    labels_as_names,
    read_csv_numbers,
    refuse_kind_conflict,
    sorted_label_names,
)
from roformer_hf.training.errors import ScriptError


def test_label_info_maps_and_config_fields():
    info = LabelInfo(SINGLE_LABEL, ["civil", "criminal"])
    assert info.num_labels == 2 and info.label2id == {"civil": 0, "criminal": 1}
    assert info.config_fields() == {
        "num_labels": 2,
        "problem_type": SINGLE_LABEL,
        "id2label": {0: "civil", 1: "criminal"},
        "label2id": {"civil": 0, "criminal": 1},
    }
    assert LabelInfo(REGRESSION, []).config_fields() == {"num_labels": 1, "problem_type": REGRESSION}


@pytest.mark.parametrize(
    ("labels", "problem_type"),
    [
        (["civil", "criminal"], SINGLE_LABEL),
        ([0, 1], SINGLE_LABEL),
        ([[0], [0, 1]], MULTI_LABEL),
        ([0.5, 1.5], REGRESSION),
    ],
)
def test_infer_problem_type(labels, problem_type):
    feature = datasets.Dataset.from_dict({"label": labels}).features["label"]
    assert infer_problem_type(feature) == problem_type


def test_sorted_label_names():
    assert sorted_label_names({10, 2, 1}) == ["1", "2", "10"]  # ids by number, not as text
    assert sorted_label_names({"criminal", "civil"}) == ["civil", "criminal"]


def test_encode_label():
    assert encode_label("criminal", LabelInfo(SINGLE_LABEL, ["civil", "criminal"])) == 1
    assert encode_label(["c", "a"], LabelInfo(MULTI_LABEL, ["a", "b", "c"])) == [1.0, 0.0, 1.0]
    assert encode_label(3, LabelInfo(REGRESSION, [])) == 3.0


def test_check_label_kinds_refuses_ids_mixed_with_names():
    check_label_kinds(["civil", "criminal"], "label", "train")
    with pytest.raises(ScriptError, match=r"mix names and numbers \(data row 1 holds 'civil', data row 3 holds 1\)"):
        check_label_kinds(["civil", "criminal", 1], "label", "train")


def test_check_finite_labels_names_the_file_and_row():
    check_finite_labels([0.5, [1.0, 2.0]], "score", "--train_file train.jsonl")
    with pytest.raises(
        ScriptError, match=r"--train_file train\.jsonl: data row 2 has the label nan in column 'score'"
    ):
        check_finite_labels([0.5, float("nan")], "score", "--train_file train.jsonl")


def test_read_csv_numbers():
    def csv_rows(labels: list) -> datasets.Dataset:  # as read from a CSV file: every cell a string
        return datasets.Dataset.from_dict({"text": ["a document"] * len(labels), "label": labels})

    assert read_csv_numbers(csv_rows(["1", "0", None]), "label", "train.csv")["label"] == [1, 0, None]
    assert read_csv_numbers(csv_rows(["NA", "civil"]), "label", "train.csv")["label"] == ["NA", "civil"]
    with pytest.raises(ScriptError, match=r"of train\.csv mix names and numbers"):
        read_csv_numbers(csv_rows(["civil", "2"]), "label", "train.csv")


def test_label_info_from_data_refuses_one_class_and_whole_number_floats():
    one_class = datasets.Dataset.from_dict({"label": ["civil"] * 3})
    with pytest.raises(ScriptError, match="one class only"):
        label_info_from_data(one_class, "label", "auto")
    whole_floats = datasets.Dataset.from_dict({"label": [0.0, 1.0]})
    with pytest.raises(ScriptError, match="whole numbers written as floats"):
        label_info_from_data(whole_floats, "label", "auto")
    assert label_info_from_data(whole_floats, "label", SINGLE_LABEL) == LabelInfo(SINGLE_LABEL, ["0.0", "1.0"])


def test_build_label_maps_refuses_labels_unseen_in_training():
    splits = datasets.DatasetDict(
        train=datasets.Dataset.from_dict({"label": ["civil", "criminal"]}),
        test=datasets.Dataset.from_dict({"label": ["civil", "theft"]}),
    )
    with pytest.raises(ScriptError, match="the test data has labels never seen in training: 'theft'"):
        build_label_maps(splits, "label", "auto", model_args=None)


# --- Labels a dataset's schema declares (ClassLabel) ---

# Declared in an order that is not alphabetical, with a class no row has: both kept as the schema says.
DECLARED = ["criminal", "civil", "administrative"]


def class_label_rows(rows: list[dict], multi_label: bool = False) -> datasets.Dataset:
    """`rows` ({"text", "label"} with label names) as a dataset whose label column is a ClassLabel of `DECLARED`
    (multi-label: a list of them), the way `class_encode_column` or the Hub's datasets store labels."""
    label = datasets.ClassLabel(names=DECLARED)
    features = datasets.Features(
        {"text": datasets.Value("string"), "label": datasets.List(label) if multi_label else label}
    )
    ids = [[DECLARED.index(row["label"])] if multi_label else DECLARED.index(row["label"]) for row in rows]
    return datasets.Dataset.from_dict({"text": [row["text"] for row in rows], "label": ids}, features=features)


def test_class_label_names_reads_the_schema():
    assert class_label_names(datasets.ClassLabel(names=DECLARED)) == DECLARED
    assert class_label_names(datasets.List(datasets.ClassLabel(names=["b", "a"]))) == ["b", "a"]
    assert class_label_names(datasets.Value("string")) is None and class_label_names(None) is None


def test_labels_as_names_gives_names_and_leaves_a_split_without_labels_unlabelled():
    rows = class_label_rows([{"text": "一", "label": "civil"}, {"text": "二", "label": "administrative"}])
    assert labels_as_names(rows, "label")["label"] == ["civil", "administrative"]
    multi = class_label_rows([{"text": "一", "label": "criminal"}], multi_label=True)
    assert labels_as_names(multi, "label")["label"] == [["criminal"]]
    unlabelled = rows.cast_column("label", datasets.ClassLabel(names=DECLARED)).map(lambda row: {"label": -1})
    assert "label" not in labels_as_names(unlabelled, "label").column_names  # -1 is the ClassLabel's "no label"
    plain = datasets.Dataset.from_dict({"label": [1, 0]})
    assert labels_as_names(plain, "label") is plain


def test_declared_classes_are_kept_in_their_order_even_one_absent_from_train():
    train = labels_as_names(
        class_label_rows([{"text": "一", "label": "civil"}, {"text": "二", "label": "criminal"}]), "label"
    )
    info = label_info_from_data(train, "label", "auto", DECLARED)
    assert info.label_names == DECLARED and info.problem_type == SINGLE_LABEL


def save_class_label_data(kind: str, folder, splits: dict[str, datasets.Dataset]) -> list[str]:
    """The splits train/dev/test saved as `kind` data; returns the script arguments that read them."""
    if kind == "hub_layout":  # as datasets' push_to_hub lays a dataset out: parquet files and configs in README.md
        for split, dataset in splits.items():
            dataset.to_parquet(str(folder / "data" / f"{split}-00000-of-00001.parquet"))
        configs = "".join(f"  - split: {split}\n    path: data/{split}-*\n" for split in splits)
        (folder / "README.md").write_text(f"---\nconfigs:\n- config_name: default\n  data_files:\n{configs}---\n")
        return ["--dataset_name", str(folder), "--validation_split_name", "dev"]
    if kind == "save_to_disk":
        datasets.DatasetDict(splits).save_to_disk(str(folder / "saved"))
        return ["--dataset_name", str(folder / "saved"), "--validation_split_name", "dev"]
    options = {"train": "--train_file", "dev": "--validation_file", "test": "--test_file"}
    arguments = []
    for split, dataset in splits.items():
        path = folder / f"{split}.{kind}"
        if kind == "parquet":
            dataset.to_parquet(str(path))
        else:  # an Arrow file as save_to_disk writes one, schema and all
            dataset.save_to_disk(str(folder / f"{split}_saved"))
            path = next((folder / f"{split}_saved").glob("*.arrow")).rename(path)
        arguments += [options[split], str(path)]
    return arguments


@pytest.mark.parametrize("kind", ["hub_layout", "parquet", "arrow", "save_to_disk"])
def test_a_class_label_dataset_fine_tunes_with_its_names(kind, tmp_path, roformer_vocab, cail_rows):
    from test_run_classification import read_predictions, tiny_run

    from roformer_hf import RoFormerConfig

    rows = [{"text": row["text"], "label": row["label"]} for row in cail_rows]
    splits = {
        "train": class_label_rows(rows[:8] + rows[30:38]),
        "dev": class_label_rows(rows[10:13] + rows[40:43]),
        "test": class_label_rows(rows[20:22] + rows[50:52]),
    }
    data = tmp_path / "data"
    (data / "data").mkdir(parents=True)
    arguments = save_class_label_data(kind, data, splits)
    output_dir = tmp_path / "out"
    tiny_run(roformer_vocab, output_dir, *arguments, "--do_train", "--do_eval", "--do_predict")
    config = RoFormerConfig.from_pretrained(output_dir)
    assert config.id2label == dict(enumerate(DECLARED))  # the schema's order, "administrative" kept
    predictions = read_predictions(output_dir)
    assert [record["label"] for record in predictions] == ["civil", "civil", "criminal", "criminal"]
    assert all(record["prediction"] in DECLARED and set(record["scores"]) == set(DECLARED) for record in predictions)
    card = (output_dir / "README.md").read_text(encoding="utf-8")
    assert "0 = `criminal`, 1 = `civil`, 2 = `administrative`" in card
    if kind in ("hub_layout", "save_to_disk"):  # results named by the dataset's split, the folder by its name only
        assert "- `eval_` (validation): the split `dev` of the local dataset `" in card
    assert ModelCard.load(output_dir / "README.md").data.eval_results is None  # no local folder as a dataset id
    assert str(tmp_path) not in card


def test_a_declared_class_absent_from_train_is_no_unseen_label():
    """The validation data may hold a class the ClassLabel declares though no training row has it."""
    train = class_label_rows([{"text": "一", "label": "civil"}, {"text": "二", "label": "criminal"}])
    validation = class_label_rows([{"text": "三", "label": "administrative"}])
    raw = datasets.DatasetDict(
        {"train": labels_as_names(train, "label"), "validation": labels_as_names(validation, "label")}
    )
    info = build_label_maps(raw, "label", "auto", None, declared_names=class_label_names(train.features["label"]))
    assert info.label_names == DECLARED
    with pytest.raises(ScriptError, match=r"labels never seen in training: 'administrative'"):
        build_label_maps(raw, "label", "auto", None)  # without the schema's names, as on main


def test_a_classifier_fine_tuned_further_keeps_its_head_rows_by_name(tmp_path):
    """Data whose ClassLabel orders the names otherwise than the checkpoint's id2label: the checkpoint's order, or
    its head's row 0 (fine-tuned as `civil`) would silently answer `criminal`."""
    from roformer_hf import RoFormerConfig
    from roformer_hf.training.cli import ModelArguments

    RoFormerConfig(
        vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
        problem_type=SINGLE_LABEL, id2label={0: "civil", 1: "criminal"},
    ).save_pretrained(tmp_path)  # fmt: skip
    train = labels_as_names(
        class_label_rows([{"text": "一", "label": "civil"}, {"text": "二", "label": "criminal"}]), "label"
    )
    declared = ["criminal", "civil", "administrative"]
    model_args = ModelArguments(model_name_or_path=str(tmp_path))
    two_classes = datasets.DatasetDict(train=train)
    info = build_label_maps(two_classes, "label", "auto", model_args, declared_names=declared[:2])
    assert info.label_names == ["civil", "criminal"]
    assert (
        build_label_maps(two_classes, "label", "auto", None, declared_names=declared[:2]).label_names == declared[:2]
    )
    other_names = build_label_maps(two_classes, "label", "auto", model_args, declared_names=declared)
    assert other_names.label_names == declared  # three classes: a new head, in the data's order


# A label of each kind `label_kind` tells: values, and the features of a column's schema.
LABELS_OF_KIND = {
    "names": "civil",
    "numbers": 0.5,
    "true/false values": True,
    "objects": {"name": "civil"},
    "lists": ["civil"],
    "integers": datasets.Value("int64"),
    CLASS_NAMES: datasets.ClassLabel(names=["civil", "criminal"]),
}


@pytest.mark.parametrize(
    ("expected", "kind"),
    [(expected, kind) for expected in (SINGLE_LABEL, MULTI_LABEL, REGRESSION, CLASS_NAMES) for kind in LABELS_OF_KIND],
)
def test_a_pair_of_kinds_is_refused_in_one_line_exactly_where_the_table_has_a_row(expected, kind):
    """`refuse_kind_conflict` refuses a label of `kind` where the task (or the training data's ClassLabel) expects
    another, in the one line of its `KIND_CONFLICTS` row, naming the column; a pair without a row passes."""
    label = LABELS_OF_KIND[kind]
    assert label_kind(label) == kind
    words = {"where": "the validation data (--validation_file dev.jsonl)", "column": "label", "split": "validation"}
    if (expected, kind) not in KIND_CONFLICTS:
        refuse_kind_conflict(expected, [label], names="2 labels", **words)
        return
    with pytest.raises(ScriptError) as refusal:
        refuse_kind_conflict(expected, [label], names="2 labels", **words)
    message = str(refusal.value)
    assert message.startswith(words["where"]) and "column 'label'" in message and "\n" not in message


def test_the_labels_a_config_holds_are_read_as_the_data_labels_are():
    """`LabelInfo.of_config` reads back what `config_fields` writes, for each problem type."""
    from roformer_hf import RoFormerConfig

    for info in (LabelInfo(SINGLE_LABEL, ["civil", "criminal"]), LabelInfo(MULTI_LABEL, ["a", "b", "c"])):
        assert LabelInfo.of_config(RoFormerConfig(**info.config_fields())) == info
    assert LabelInfo.of_config(RoFormerConfig(**LabelInfo(REGRESSION, []).config_fields())) == LabelInfo(
        REGRESSION, []
    )


def test_the_data_labels_replace_a_checkpoints_other_labels_and_an_override_against_them_is_refused(tmp_path):
    """Fine-tuning a classifier's checkpoint for regression (one output) takes the data's labels, as transformers'
    `from_pretrained(path, num_labels=1)` does, where the config's rule that num_labels agrees with id2label would
    otherwise refuse the saved maps; a `--config_overrides num_labels=3` against two labels of the data is refused."""
    from roformer_hf import RoFormerConfig
    from roformer_hf.training.building import build_config
    from roformer_hf.training.cli import ModelArguments

    RoFormerConfig(
        vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
        problem_type=SINGLE_LABEL, id2label={0: "civil", 1: "criminal"},
    ).save_pretrained(tmp_path)  # fmt: skip
    regression = build_config(
        ModelArguments(model_name_or_path=str(tmp_path)), **LabelInfo(REGRESSION, []).config_fields()
    )
    assert regression.num_labels == 1 and regression.problem_type == REGRESSION
    data_labels = LabelInfo(SINGLE_LABEL, ["a", "b"]).config_fields()
    overridden = ModelArguments(model_name_or_path=str(tmp_path), config_overrides="num_labels=3")
    with pytest.raises(ScriptError, match="num_labels is 3, but id2label names 2 labels"):
        build_config(overridden, **data_labels)


def test_a_problem_type_override_is_read_as_one_of_its_values():
    """`--config_overrides problem_type=regression` reads the field's `Literal` values (it ended in a traceback,
    `'str' object has no attribute '__name__'`, before any check of the labels); a value outside them is named in one
    line with the values it may take."""
    from roformer_hf.training.building import build_config
    from roformer_hf.training.cli import ModelArguments

    tiny = "vocab_size=100,hidden_size=32,num_hidden_layers=1,num_attention_heads=2,intermediate_size=64"
    config = build_config(ModelArguments(config_overrides=f"problem_type=regression,{tiny}"))
    assert config.problem_type == REGRESSION
    with pytest.raises(ScriptError, match=r"problem_type='bogus' is not a valid 'regression' or "):
        build_config(ModelArguments(config_overrides=f"problem_type=bogus,{tiny}"))


def test_a_label_map_key_override_is_set_in_the_datas_maps():
    """`--config_overrides label2id.civil=1` is checked against the data's labels, which it names, not the LABEL_0, ...
    of a config built before them (a repeat of the data's maps, `label2id.civil=0`, `id2label.1=criminal`, was
    refused for those too; id2label's keys are ints)."""
    from roformer_hf.training.building import build_config
    from roformer_hf.training.cli import ModelArguments

    tiny = "vocab_size=100,hidden_size=32,num_hidden_layers=1,num_attention_heads=2,intermediate_size=64"
    data = LabelInfo(SINGLE_LABEL, ["civil", "criminal"])
    for repeat in ("label2id.civil=0", "id2label.1=criminal"):
        arguments = ModelArguments(config_overrides=f"{tiny},{repeat}")
        check_overrides_keep_labels(arguments, data)
        assert LabelInfo.of_config(build_config(arguments, **data.config_fields())) == data
    with pytest.raises(ScriptError) as refused:
        check_overrides_keep_labels(ModelArguments(config_overrides=f"{tiny},label2id.civil=1"), data)
    assert str(refused.value).startswith(
        """--config_overrides sets label2id to {"civil": 1, "criminal": 1}, but a classifier's labels come from the """
        "data, which has 2 labels ('civil', 'criminal'): leave label2id out of --config_overrides"
    )
