"""The README's section "Property tests of your own": its code blocks are extracted and run as a user would paste
them, so they cannot rot (a renamed function, a strategy that draws ties, a wrong claim all fail here)."""
import re
from pathlib import Path

import pytest
from hypothesis import given

from bma_verify.numerics import strategies as bst

README = Path(__file__).resolve().parents[1] / "README.md"
SECTION = "## Property tests of your own"


def readme_section_code(title: str = SECTION) -> str:
    """The ```python blocks of the README section ``title`` (up to the next "## " heading), joined."""
    text = README.read_text()
    start = text.index(title)
    end = text.find("\n## ", start + len(title))
    section = text[start:end if end >= 0 else None]
    return "\n".join(re.findall(r"```python\n(.*?)```", section, flags=re.S))


def _property_tests() -> dict:
    namespace: dict = {}
    exec(compile(readme_section_code(), f"{README}:{SECTION}", "exec"), namespace)
    return {name: value for name, value in namespace.items() if name.startswith("test_")}


def test_the_section_holds_a_lemma3_and_a_thm3_property_test():
    names = sorted(_property_tests())
    assert any("lemma3" in name for name in names) and any("thm3" in name for name in names), names


@pytest.mark.parametrize("name", sorted(_property_tests()))
def test_readme_property_test_passes(name):
    # The user's property test itself, run under this suite's Hypothesis profile (HYPOTHESIS_PROFILE).
    _property_tests()[name]()


def test_readme_lemma3_property_fails_on_degenerate_instances():
    # Negative control: the same property body on degenerate=True instances must fail (a tie where every mutual
    # information is 0), or the README test would pass whatever the strategies drew.
    body = _property_tests()["test_lemma3_true_parent_is_most_informative"].hypothesis.inner_test
    degenerate = given(bst.instances(min_H=3, degenerate=True))(body)
    with pytest.raises(AssertionError):
        degenerate()
