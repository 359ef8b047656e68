"""
The font a picture's label names are drawn in. matplotlib draws with DejaVu Sans, which has no Chinese characters: a
Chinese label name comes out as empty boxes, with a "Glyph ... missing from font(s) DejaVu Sans" warning for each
character. Where the default font lacks a character of the names, an installed font that has every one of them is
used (Noto Sans CJK, WenQuanYi, Source Han, SimHei, ...: found by the characters each font maps, not trusted by its
name); where no installed font has them, `font_covering` says so with `None` and the picture numbers its labels.
"""

from collections.abc import Iterable
from functools import cache

from matplotlib import font_manager
from matplotlib.ft2font import FT2Font

# matplotlib's own last-resort font maps every code point to a placeholder (a box naming the Unicode block): its
# character map covers everything, and it draws nothing readable.
PLACEHOLDER_FONTS = ("Last Resort High-Efficiency",)

# Families with the Chinese characters, tried before the other installed fonts (the search would find them anyway).
CJK_FAMILIES = (
    *("Noto Sans CJK", "Noto Serif CJK", "Source Han Sans", "Source Han Serif", "WenQuanYi", "SimHei", "SimSun"),
    *("Microsoft YaHei", "PingFang", "Hiragino Sans GB", "Heiti", "STHeiti", "AR PL", "Droid Sans Fallback"),
)


def default_font_file() -> str:
    """The file matplotlib draws text in when nothing else is asked for (DejaVu Sans unless configured)."""
    return font_manager.findfont(font_manager.FontProperties())


def font_covering(texts: Iterable[str]) -> str | None:
    """
    The file of an installed font that has every character of `texts` (whitespace aside): the default font where it
    does, else one of `CJK_FAMILIES`, else any other font matplotlib knows; `None` when there is none.

    Args:
        texts (`Iterable[str]`): what will be drawn, e.g. the label names of a confusion matrix.
    """
    needed = {ord(character) for text in texts for character in text if not character.isspace()}
    for font_file in candidate_font_files():
        if needed <= characters_of(font_file):
            return font_file
    return None


def candidate_font_files() -> list[str]:
    """
    The default font's file, then those of `CJK_FAMILIES`, then every other font matplotlib found; upright and of
    regular weight before italic or bold within each.
    """
    fonts = [font for font in font_manager.fontManager.ttflist if font.name not in PLACEHOLDER_FONTS]
    fonts.sort(
        key=lambda font: (
            not font.name.startswith(CJK_FAMILIES),
            font.style != "normal",
            str(font.weight) not in ("400", "normal", "regular"),
        )
    )
    return list(dict.fromkeys([default_font_file(), *(font.fname for font in fonts)]))


@cache
def characters_of(font_file: str) -> frozenset[int]:
    """The code points a font file maps to glyphs (none for a file FreeType cannot read)."""
    try:
        return frozenset(FT2Font(font_file).get_charmap())
    except (OSError, RuntimeError):
        return frozenset()
