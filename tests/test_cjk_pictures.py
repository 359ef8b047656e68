"""Label names that matplotlib's default font cannot draw (roformer_hf/training/classification/picture_fonts.py and the
confusion matrix of classification_scores.py): drawn in an installed font that has their characters, or numbered with a
file naming them; never empty boxes, never a "Glyph ... missing from font(s)" warning."""

import csv
import io
import json
import warnings
from contextlib import contextmanager

import numpy as np
import pytest
from test_bad_inputs import TEXTS, tiny_run, write_jsonl

import run_classification
from roformer_hf.training.classification import picture_fonts
from roformer_hf.training.classification.classification_scores import confusion_matrix_figure, save_confusion_matrix

CHINESE_NAMES = ["民事", "刑事"]
# Characters DejaVu Sans lacks and STIXGeneral, which matplotlib ships, has: the font search on every machine.
CIRCLED_NAMES = ["Ⓐ circled", "Ⓑ"]


@contextmanager
def glyph_warnings_fail():
    """matplotlib's warning about a character its font lacks ("Glyph 27665 ... missing from font(s) DejaVu Sans.")
    fails the test."""
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=r"Glyph \d+ .* missing from font")
        yield


def draw_without_glyph_warnings(figure) -> None:
    with glyph_warnings_fail():
        figure.savefig(io.BytesIO(), format="png")


def tick_texts(figure) -> tuple[list[str], list[str]]:
    axes = figure.axes[0]
    return [tick.get_text() for tick in axes.get_xticklabels()], [tick.get_text() for tick in axes.get_yticklabels()]


def only_the_default_font(monkeypatch) -> None:
    """The font search of a machine without a CJK font, wherever the test runs."""
    monkeypatch.setattr(picture_fonts, "candidate_font_files", lambda: [picture_fonts.default_font_file()])


def test_a_run_with_chinese_labels_and_no_font_numbers_them(tmp_path, monkeypatch, capsys):
    only_the_default_font(monkeypatch)
    rows = [{"text": text, "label": "刑事" if "被告人" in text else "民事"} for text in TEXTS]
    data = write_jsonl(tmp_path / "train.jsonl", rows)
    arguments = tiny_run("run_classification.py", tmp_path, data, "--do_predict", "--test_file", str(data))
    with glyph_warnings_fail():
        run_classification.main(arguments)
    output_dir = tmp_path / "out"
    id2label = json.loads((output_dir / "config.json").read_text(encoding="utf-8"))["id2label"]
    for split in ("eval", "test"):
        assert (output_dir / f"confusion_matrix_{split}.png").stat().st_size > 0
        with open(output_dir / f"confusion_matrix_{split}_labels.csv", encoding="utf-8", newline="") as file:
            legend = list(csv.reader(file))
        assert legend == [["number", "label"], ["0", id2label["0"]], ["1", id2label["1"]]]
        assert sorted(name for _, name in legend[1:]) == sorted(CHINESE_NAMES)
    printed = capsys.readouterr().out
    for split in ("eval", "test"):
        assert f"numbers the labels, named in {output_dir / f'confusion_matrix_{split}_labels.csv'}" in printed


def test_numbered_picture_shows_numbers_and_names_the_legend(tmp_path, monkeypatch):
    only_the_default_font(monkeypatch)
    path = tmp_path / "confusion_matrix_eval.png"
    with glyph_warnings_fail():
        legend = save_confusion_matrix(np.array([0, 1, 1]), np.array([0, 1, 0]), CHINESE_NAMES, path)
    assert legend == tmp_path / "confusion_matrix_eval_labels.csv"
    assert legend.read_text(encoding="utf-8").splitlines() == ["number,label", "0,民事", "1,刑事"]
    figure = confusion_matrix_figure(np.eye(2, dtype=int), CHINESE_NAMES, None, legend.name)
    assert tick_texts(figure) == (["0", "1"], ["0", "1"])
    assert figure.axes[0].get_xlabel() == "Predicted label (names: confusion_matrix_eval_labels.csv)"
    draw_without_glyph_warnings(figure)


def test_names_the_default_font_lacks_are_drawn_in_an_installed_font_that_has_them(tmp_path):
    font_file = picture_fonts.font_covering(CIRCLED_NAMES)
    assert font_file is not None and font_file != picture_fonts.default_font_file()
    assert {ord("Ⓐ"), ord("Ⓑ")} <= picture_fonts.characters_of(font_file)
    figure = confusion_matrix_figure(np.eye(2, dtype=int), CIRCLED_NAMES, font_file, None)
    assert tick_texts(figure) == (CIRCLED_NAMES, CIRCLED_NAMES)
    axes = figure.axes[0]
    assert {tick.get_fontproperties().get_file() for tick in axes.get_xticklabels()} == {font_file}
    draw_without_glyph_warnings(figure)
    path = tmp_path / "confusion_matrix_eval.png"
    with glyph_warnings_fail():
        assert save_confusion_matrix(np.array([0, 1]), np.array([0, 1]), CIRCLED_NAMES, path) is None
    assert path.stat().st_size > 0 and not (tmp_path / "confusion_matrix_eval_labels.csv").exists()


def test_chinese_names_are_drawn_as_text_with_an_installed_chinese_font(tmp_path):
    font_file = picture_fonts.font_covering(CHINESE_NAMES)
    if font_file is None:
        pytest.skip(
            "no installed font has 民事 and 刑事 (`fc-list :lang=zh` is empty; e.g. apt install fonts-noto-cjk)"
        )
    figure = confusion_matrix_figure(np.eye(2, dtype=int), CHINESE_NAMES, font_file, None)
    assert tick_texts(figure) == (CHINESE_NAMES, CHINESE_NAMES)
    draw_without_glyph_warnings(figure)
    path = tmp_path / "confusion_matrix_test.png"
    assert save_confusion_matrix(np.array([0, 1]), np.array([1, 1]), CHINESE_NAMES, path) is None
    assert not (tmp_path / "confusion_matrix_test_labels.csv").exists()


def test_the_placeholder_font_never_counts_as_having_the_characters():
    """matplotlib's Last Resort font maps every code point, to a box: choosing it would draw the boxes again."""
    fonts = picture_fonts.font_manager.fontManager.ttflist
    placeholders = {font.fname for font in fonts if font.name in picture_fonts.PLACEHOLDER_FONTS}
    assert not placeholders & set(picture_fonts.candidate_font_files())


def test_ascii_names_are_drawn_as_before(tmp_path):
    assert picture_fonts.font_covering(["civil", "criminal"]) == picture_fonts.default_font_file()
    figure = confusion_matrix_figure(
        np.eye(2, dtype=int), ["civil", "criminal"], picture_fonts.default_font_file(), None
    )
    assert tick_texts(figure) == (["civil", "criminal"], ["civil", "criminal"])
    assert figure.axes[0].get_xlabel() == "Predicted label"
    path = tmp_path / "confusion_matrix_eval.png"
    assert save_confusion_matrix(np.array([0, 1]), np.array([0, 1]), ["civil", "criminal"], path) is None
    assert [p.name for p in tmp_path.iterdir()] == ["confusion_matrix_eval.png"]
