import pytest

from promptgen.attribution.lint import expected_article, length_ratio, lint_label, pronoun_clashes


@pytest.mark.parametrize(
    ("word", "article"),
    [("American", "an"), ("Indian", "an"), ("Chinese", "a"), ("European", "a"), ("Ukrainian", "a"), ("hour", "an")],
)
def test_expected_article(word, article):
    assert expected_article(word) == article


def test_lint_label():
    assert lint_label("an American") == []
    assert lint_label("a Christian") == []
    assert any("expected 'an'" in p for p in lint_label("a Italian"))
    assert any("expected 'a'" in p for p in lint_label("an German"))
    assert any("lowercase" in p for p in lint_label("an east asian"))
    assert any("does not start" in p for p in lint_label("Russia"))


def test_pronoun_clashes():
    assert pronoun_clashes("He lacked the charisma to engage her viewers.", "male") == ["her"]
    assert pronoun_clashes("She trained for months.", "female") == []
    assert pronoun_clashes("The shepherd helped him.", "female") == ["him"]
    assert pronoun_clashes("The theme was there.", "female") == []


def test_length_ratio():
    assert length_ratio(("ab", "abcd", "abc", "abcd")) == 2.0
