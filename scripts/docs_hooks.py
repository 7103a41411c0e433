"""MkDocs hook: the reference pages generated from the code, so they cannot drift from it.

A page holds a marker line and the hook replaces it with Markdown made at build time:

    <!-- generated: commands -->         every command and option, from the Typer app
    <!-- generated: mechanisms -->       every mechanism's parameters, from catalogue.PARAMETERS
    <!-- generated: schema dataset -->   the dataset file's fields, from schemas/dataset.v1.schema.json
    <!-- generated: schema release -->   the release file's fields, from schemas/release.v1.schema.json
    <!-- generated: json examples -->     what each command prints with --json, run on examples/ at build time

An unknown marker fails the build.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # document this checkout's ledger, installed or not
MARKER = re.compile(r"^<!-- generated: ([\w -]+?) -->$", re.M)


def on_page_markdown(markdown: str, page, config, files) -> str:
    return MARKER.sub(lambda found: generate(found.group(1).split()), markdown)


def generate(words: list[str]) -> str:
    if words == ["commands"]:
        return commands_markdown()
    if words == ["mechanisms"]:
        return mechanisms_markdown()
    if words == ["json", "examples"]:
        return json_examples_markdown()
    if len(words) == 2 and words[0] == "schema":
        return schema_markdown(words[1])
    raise ValueError(f"unknown generated section: {' '.join(words)}")


# -- commands -------------------------------------------------------------------------------


def commands_markdown() -> str:
    from typer.main import get_command

    from ledger.cli.app import app

    root = get_command(app)
    sections: list[str] = []
    _command_sections(root, ["privacy-ledger"], None, sections)
    return "\n".join(sections)


def _command_sections(command, path: list[str], parent, out: list[str]) -> None:
    context = command.context_class(command, info_name=path[-1], parent=parent)
    level = "#" * min(len(path) + 1, 4)
    out.append(f"{level} `{' '.join(path)}`\n")
    help_text = _clean(command.help or "")
    if help_text:
        out.append(help_text + "\n")
    out.append("```text\n" + command.get_usage(context).strip() + "\n```\n")
    rows = [_param_row(param, context) for param in command.params if not getattr(param, "hidden", False)]
    rows = [row for row in rows if row]
    if rows:
        out.append("| argument or option | what it is |\n|---|---|")
        out.extend(rows)
        out.append("")
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        if not getattr(sub, "hidden", False):
            _command_sections(sub, [*path, name], context, out)


def _param_row(param, context) -> str:
    """One row per argument or option: the left and right columns `--help` prints for it."""
    record = param.get_help_record(context)
    if record is None or "--help" in getattr(param, "opts", ()):
        return ""
    names, what = record
    return f"| `{names}` | {_cell(what)} |"


def _clean(text: str) -> str:
    return text.replace("\b\n", "").replace("\b", "").strip()


def _cell(text: str) -> str:
    return _clean(text).replace("|", "\\|").replace("\n", " ")


# -- JSON output ----------------------------------------------------------------------------

# Run in order on a fresh ledger holding examples/graduates: the setup is not shown.
JSON_SETUP = (["dataset", "add", "examples/graduates.dataset.yaml"], ["record", "examples/graduates.releases.yaml"],
              ["cap", "set", "personal", "--epsilon", "4", "--delta", "1e-9", "-d", "graduates"])
JSON_SHOWN = (["check", "examples/graduates.plan.yaml", "--json"], ["record", "examples/graduates.plan.yaml", "--json"],
              ["releases", "--json"], ["subset", "income", "-d", "graduates", "--json"],
              ["table", "-d", "graduates", "--json"], ["pairs", "-d", "graduates", "--json"],
              ["cap", "list", "-d", "graduates", "--json"], ["headroom", "income", "-d", "graduates", "--json"],
              ["record", "misspelt.yaml", "--json"])
MISSPELT = "dataset: graduates\nreleases:\n  - id: x\n    reads: [income]\n    mechanism: {name: laplace, scale: 2, sensitivty: 1}\n"


def json_examples_markdown() -> str:
    import os
    import shutil
    import tempfile

    from typer.testing import CliRunner

    from ledger.cli.app import app

    runner = CliRunner()
    out: list[str] = []
    here = os.getcwd()
    with tempfile.TemporaryDirectory() as scratch:
        shutil.copytree(ROOT / "examples", Path(scratch) / "examples")
        (Path(scratch) / "misspelt.yaml").write_text(MISSPELT, encoding="utf-8")
        os.chdir(scratch)
        try:
            database = ["--db", f"sqlite:///{scratch}/ledger.db"]
            for words in JSON_SETUP:
                done = runner.invoke(app, [*database, *words])
                if done.exit_code != 0:
                    raise RuntimeError(f"privacy-ledger {' '.join(words)} exited {done.exit_code}: {done.output}")
            for words in JSON_SHOWN:
                code, output = _run(runner, app, [*database, *words])
                try:
                    json.loads(output)  # the whole output is one JSON document
                except ValueError:
                    raise RuntimeError(f"privacy-ledger {' '.join(words)} printed no JSON: {output!r}") from None
                command = "privacy-ledger " + " ".join(words)
                out.append(f'??? example "`{command}` (exit {code})"\n')
                out.append("    ```json\n" + "\n".join("    " + line for line in output.strip().splitlines())
                           + "\n    ```\n")
        finally:
            os.chdir(here)
    return "\n".join(out)


def _run(runner, app, arguments: list[str]) -> tuple[int, str]:
    """In process where the command succeeds; a failing one again as a process of its own, since its
    exit code and JSON error come from the console entry point."""
    import os
    import subprocess

    done = runner.invoke(app, arguments)
    if done.exit_code == 0:
        return 0, done.output
    process = subprocess.run([sys.executable, "-m", "ledger", *arguments], capture_output=True, text=True,
                             env={**os.environ, "LEDGER_RESIDENT": "0"}, timeout=120)
    return process.returncode, process.stdout


# -- mechanisms -----------------------------------------------------------------------------


def mechanisms_markdown() -> str:
    from ledger.accounting.catalogue import PARAMETERS

    def names(values) -> str:
        return ", ".join(f"`{value}`" for value in values) or "-"

    lines = ["| mechanism | its guarantee is derived from (any one line) | also read | recorded as description |",
             "|---|---|---|---|"]
    for name, accepted in PARAMETERS.items():
        needs = "; or ".join(" and ".join(f"`{n}`" for n in need) for need in accepted.needs) or "-"
        lines.append(f"| `{name}` | {needs} | {names(accepted.reads)} | {names(accepted.describes)} |")
    return "\n".join(lines) + "\n"


# -- file formats ---------------------------------------------------------------------------


def schema_markdown(kind: str) -> str:
    schema = json.loads((ROOT / "schemas" / f"{kind}.v1.schema.json").read_text(encoding="utf-8"))
    definitions = schema.get("$defs", {})
    out = [_clean(schema.get("description", "")) + "\n"]
    out += _object_table(schema, definitions, "")
    for name, definition in definitions.items():
        if definition.get("type") == "object" and definition.get("properties"):
            out.append(f"\n**`{name}`**" + (f": {_clean(definition['description'])}" if "description" in definition
                                             else "") + "\n")
            out += _object_table(definition, definitions, "")
    return "\n".join(out) + "\n"


# Said here for the fields whose schema carries no description (the schema's own text wins).
FIELD_NOTES = {
    "version": "The file format's version; 1 when given.",
    "dataset": "The dataset's name: letters, digits and `_ . : -`, at most 200 characters.",
    "description": "Free text, at most 10,000 characters.",
    "variables": "The dataset's variables, at least one.",
    "name": "The variable's or mechanism's name.",
    "classification": "`public` (released exactly by design: out of the headline) or any label of a protected "
                      "variable (`sensitive`, `identifying`, ...). A near-miss of `public` is refused.",
    "epsilon": "Epsilon, a number or an exact fraction in quotes (`\"1/3\"`).",
    "delta": "Delta, a number or an exact fraction in quotes.",
    "rho": "rho of zero-concentrated DP, a number or an exact fraction in quotes.",
    "families": "Families of releases computed on disjoint parts of the records (parallel composition).",
    "releases": "The releases, recorded all together or not at all.",
    "id": "The id, unique in the ledger.",
    "title": "A title for people, at most 1,000 characters.",
    "mechanism": "The mechanism and its parameters ([mechanisms](mechanisms.md)).",
    "guarantees": "Guarantees stated explicitly; a claim stronger than the mechanism's parameters imply is refused.",
    "derived_from": "Releases whose outputs this one is computed from (post-processing: it costs nothing).",
    "family": "The family this release belongs to.",
    "approved_by": "Who approved a release recorded as approved or published: a holder of the approver role.",
    "approved_at": "When it was approved: a date or date-time, UTC unless it says otherwise.",
    "published_at": "When it was published: a date or date-time, UTC unless it says otherwise.",
    "scale": "The noise scale (Laplace, geometric), with `sensitivity`.",
    "sigma": "The Gaussian noise's standard deviation, with `sensitivity`.",
    "sensitivity": "The query's sensitivity in the mechanism's `relation`.",
    "relation": "The neighbour relation the figure or sensitivity is stated in: `replace` (default) or "
                "`add-remove`.",
    "protects": "The variables a guarantee covers.",
}


def _object_table(node: dict, definitions: dict, prefix: str) -> list[str]:
    required = set(node.get("required", []))
    rows = ["| field | type | what it is |", "|---|---|---|"]
    nested: list[tuple[str, dict]] = []
    for field, spec in node.get("properties", {}).items():
        label = f"`{prefix}{field}`" + (" (required)" if field in required else "")
        rows.append(f"| {label} | {_type(spec)} | {_cell(spec.get('description') or FIELD_NOTES.get(field, ''))} |")
        items = spec.get("items", {})
        if items.get("type") == "object" and items.get("properties"):
            nested.append((f"{prefix}{field}[]", items))
    out = rows
    for name, items in nested:
        out += ["", f"Each item of `{name}`:", ""] + _object_table(items, definitions, "")
    return out


def _type(spec: dict) -> str:
    if "$ref" in spec:
        name = spec["$ref"].rsplit("/", 1)[-1]
        return {"number": "number or exact fraction", "name": "name", "variable": "variable name",
                "release_id": "release id"}.get(name, f"`{name}`")
    if "const" in spec:
        return f"`{spec['const']}`"
    if "enum" in spec:
        return " \\| ".join(f"`{value}`" for value in spec["enum"])
    if "oneOf" in spec or "anyOf" in spec:
        return " or ".join(_type(option) for option in spec.get("oneOf", spec.get("anyOf", [])))
    kind = spec.get("type", "")
    if kind == "array":
        return f"list of {_type(spec.get('items', {}))}"
    return str(kind or "any")
