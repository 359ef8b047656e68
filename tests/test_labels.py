"""Tests of roformer_hf/training/labels.py: the checks of a label column, the problem type inferred from it, the
label maps and the training target of a label. The end-to-end cases (a script run refusing bad labels) are in
test_run_classification.py and test_bad_inputs.py."""

import datasets
import pytest

from roformer_hf.training.errors import ScriptError
from roformer_hf.training.labels import (
    MULTI_LABEL,
    REGRESSION,
    SINGLE_LABEL,
    LabelInfo,
    build_label_maps,
    check_finite_labels,
    check_label_kinds,
    encode_label,
    infer_problem_type,
    label_info_from_data,
    read_csv_numbers,
    sorted_label_names,
)


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
