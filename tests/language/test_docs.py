"""docs/sandbox-language.md is generated from the facades, and never drifts from them."""

from __future__ import annotations

import importlib.metadata
import pathlib
import sys

import pytest

from corral.language import catalog
from corral.language.modules import module_names
from corral.language.reference import render, render_language, render_packages

DOC = pathlib.Path(__file__).parents[2] / 'docs' / 'sandbox-language.md'
REGENERATE = 'regenerate it: python -m corral.language.reference > docs/sandbox-language.md'
PACKAGES_HEADING = '## Packages: numpy, pandas and matplotlib\n'


def _page_parts() -> tuple[str, str]:
    """The page's text before its section on the packages, and that section."""
    language, heading, packages = DOC.read_text().partition('\n' + PACKAGES_HEADING)
    assert heading, 'the page has no section on the packages; ' + REGENERATE
    return language, PACKAGES_HEADING + packages


@pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason='the page describes the sandbox on Python 3.11 (3.12 and 3.13 offer more names): run the tests on 3.11 to check it')
def test_the_page_is_what_the_facades_say():
    assert _page_parts()[0] == render_language(), REGENERATE


@pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason='the page describes the sandbox on Python 3.11 (3.12 and 3.13 offer more names): run the tests on 3.11 to check it')
def test_the_packages_section_is_what_the_facades_say():
    for package in catalog.PACKAGES:
        pytest.importorskip(package)
    listed = ', '.join(f'{package} {importlib.metadata.version(package)}' for package in catalog.PACKAGES)
    section = _page_parts()[1]
    if f'Listed for {listed};' not in section:
        pytest.skip(f'the page lists other versions than the installed {listed}')
    assert section == render_packages(), REGENERATE
    assert DOC.read_text() == render()


def test_the_page_lists_every_module_and_name():
    text = render_language()
    for module in catalog.STDLIB_MODULES:
        assert f'### `{module}`' in text
        for name in module_names(module):
            assert f'`{name}`' in text


def test_the_packages_section_lists_every_name_and_refusal():
    for package in catalog.PACKAGES:
        pytest.importorskip(package)
    text = render_packages()
    assert text.startswith(PACKAGES_HEADING)
    sections = text.split('\n### ')[1:]
    modules = [module for package in catalog.PACKAGES for module in catalog.PACKAGE_MODULES[package]]
    assert [section.partition('\n')[0] for section in sections] == [f'`{module}`' for module in modules] + ["Closed on the libraries' objects"]
    for module, section in zip(modules, sections):
        for name in (*module_names(module), *catalog.WITHHELD_PACKAGE_NAMES.get(module, ())):
            assert f'`{name}`' in section, (module, name)
        for name in catalog.WITHHELD_PACKAGE_NAMES.get(module, ()):
            hint = catalog.MEMBER_HINTS.get((module, name))
            assert hint is None or f': {hint}\n' in section, (module, name)
    for cls, hints in catalog.PACKAGE_ATTRIBUTE_HINTS.items():
        assert f'- `{cls}`:\n' in sections[-1]
        for name, hint in hints.items():
            assert f'`{name}`' in sections[-1] and f': {hint}\n' in sections[-1]


def test_the_packages_section_needs_the_data_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, 'pandas', None)
    with pytest.raises(ImportError) as caught:
        render_packages()
    assert str(caught.value) == "the page lists what pandas offers scripts: install it with pip install -e '.[data]' in corral's clone"


def test_the_readme_links_the_page():
    readme = (pathlib.Path(__file__).parents[2] / 'README.md').read_text()
    assert 'docs/sandbox-language.md' in readme
