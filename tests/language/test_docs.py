"""docs/sandbox-language.md is generated from the facades, and never drifts from them."""

from __future__ import annotations

import pathlib
import sys

import pytest

from corral.language import catalog
from corral.language.modules import module_names
from corral.language.reference import render

DOC = pathlib.Path(__file__).parents[2] / 'docs' / 'sandbox-language.md'


@pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason='the page describes the sandbox on Python 3.11, the version corral pins')
def test_the_page_is_what_the_facades_say():
    assert DOC.read_text() == render(), 'regenerate it: python -m corral.language.reference > docs/sandbox-language.md'


def test_the_page_lists_every_module_and_name():
    text = render()
    for module in catalog.STDLIB_MODULES:
        assert f'### `{module}`' in text
        for name in module_names(module):
            assert f'`{name}`' in text


def test_the_readme_links_the_page():
    readme = (pathlib.Path(__file__).parents[2] / 'README.md').read_text()
    assert 'docs/sandbox-language.md' in readme
