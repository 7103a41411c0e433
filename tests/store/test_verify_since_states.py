"""`audit verify --since-checkpoint` judges the caps and roles the events since name as the full
verification does (store.StateEvents, shared by both).

A cap removed after the checkpoint made the incremental verification say "the cap row is
missing" (it took the removal's {"cap": null} as the state to find), so the README's own
`cap set` / `cap remove` example left every report with a false "Audit chain BROKEN" until a
full `audit verify`; and a role granted or revoked since the checkpoint was never compared with
the roles table.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from support import cli_main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def url(tmp_path):
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    assert cli_main(url, "dataset", "add", EXAMPLES / "graduates.dataset.yaml").code == 0
    assert cli_main(url, "audit", "verify").code == 0  # the checkpoint
    return url


def verify(url: str, *flags: str):
    return cli_main(url, "audit", "verify", *flags)


def test_a_cap_set_and_removed_since_the_checkpoint_verifies(url):
    assert cli_main(url, "cap", "set", "income", "--epsilon", "3").code == 0
    assert cli_main(url, "cap", "remove", "income", "--reason", "replaced").code == 0
    run = verify(url, "--since-checkpoint")
    assert run.code == 0, run.err
    assert "checked, appended since the last verified head" in run.out
    assert verify(url).code == 0


def test_a_removed_cap_whose_row_is_put_back_is_found_by_both(url):
    assert cli_main(url, "cap", "set", "income", "--epsilon", "3").code == 0
    with sqlite3.connect(url.removeprefix("sqlite:///")) as connection:
        row = connection.execute("SELECT * FROM caps").fetchone()
    assert cli_main(url, "cap", "remove", "income", "--reason", "replaced").code == 0
    with sqlite3.connect(url.removeprefix("sqlite:///")) as connection:  # put back behind the ledger's back
        connection.execute(f"INSERT INTO caps VALUES ({', '.join('?' * len(row))})", row)
    for flags in (("--since-checkpoint",), ()):
        run = verify(url, *flags)
        assert run.code == 1, flags
        assert "(cap graduates/income): the cap was removed by this event, but its row remains" in run.err


def test_a_cap_set_again_after_its_removal_is_compared_with_its_last_state(url):
    assert cli_main(url, "cap", "set", "income", "--epsilon", "3").code == 0
    assert cli_main(url, "cap", "remove", "income", "--reason", "replaced").code == 0
    assert cli_main(url, "cap", "set", "income", "--epsilon", "2").code == 0
    with sqlite3.connect(url.removeprefix("sqlite:///")) as connection:
        connection.execute("UPDATE caps SET name = 'renamed'")  # its row gone under its name
    run = verify(url, "--since-checkpoint")
    assert run.code == 1 and "(cap graduates/income): the cap row is missing" in run.err


@pytest.mark.parametrize("tamper, held", [("DELETE FROM roles WHERE person = 'ada'", "granted"),
                                          ("INSERT INTO roles VALUES ('bob', 'approver')", "revoked")])
def test_a_role_changed_since_the_checkpoint_is_compared_with_the_roles_table(url, tamper, held):
    assert cli_main(url, "role", "grant", "ada", "approver").code == 0
    assert cli_main(url, "role", "grant", "bob", "approver").code == 0
    assert cli_main(url, "role", "revoke", "bob", "approver").code == 0
    with sqlite3.connect(url.removeprefix("sqlite:///")) as connection:
        connection.execute(tamper)
    for flags in (("--since-checkpoint",), ()):
        run = verify(url, *flags)
        assert run.code == 1, flags
        assert f"the roles table was changed outside the ledger ({held} by this event)" in run.err
