"""Every command's `--help` fits a screen (40 lines of 100 columns; the command list 50) and
ends with an example whose command and options are the command's own."""

from __future__ import annotations

import shlex

import pytest
import typer
from typer.testing import CliRunner

from ledger.cli.app import app
from ledger.cli.examples import EXAMPLES

ROOT = typer.main.get_command(app)


def leaves(command, path=()):
    for name, sub in getattr(command, "commands", {}).items():
        if getattr(sub, "commands", None):
            yield from leaves(sub, (*path, name))
        else:
            yield (*path, name), sub


LEAVES = dict(leaves(ROOT))


def help_of(path) -> str:
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "100"})
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("path", sorted(LEAVES), ids=" ".join)
def test_a_commands_help_fits_a_screen_and_ends_with_its_example(path):
    text = help_of(path)
    assert len(text.splitlines()) <= 40, text
    assert " ".join(text.split()).endswith(" ".join(EXAMPLES[" ".join(path)].split()))


def test_the_command_list_fits_a_screen():
    assert len(help_of(()).splitlines()) <= 50


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_each_example_names_its_command_and_only_its_options(name):
    words = shlex.split(EXAMPLES[name])
    assert words[0] == "privacy-ledger"
    if words[1] == "--db":
        words = [words[0], *words[3:]]
    path = tuple(name.split())
    assert tuple(words[1:1 + len(path)]) == path and path in LEAVES
    options = {option for param in LEAVES[path].params for option in (*param.opts, *param.secondary_opts)}
    used = {word.split("=")[0] for word in words[1 + len(path):] if word.startswith("-")}
    assert used <= options, used - options
