"""The read paths (reads at a million releases) against their plain definitions:
the pair counts of `LedgerIndex.pair_counts` against the 0/1 matrix product, and the column
reading of the accounting rows on SQLite (`row_arrays._read_columns`) against the row reading."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.accounting import index_pairs
from ledger.accounting.ledger_index import LedgerIndex


def _index(reads: np.ndarray) -> LedgerIndex:
    index = LedgerIndex.__new__(LedgerIndex)
    index.variables = tuple(f"v{k}" for k in range(reads.shape[1]))
    index.releases = range(reads.shape[0])
    index.reads = reads
    return index


def _by_product(reads: np.ndarray, groups: np.ndarray, n_groups: int) -> np.ndarray:
    """n_g(a) + n_g(b) - n_g(a and b), from R_g^T R_g in Python integers."""
    n = reads.shape[1]
    out = np.zeros((n_groups, n, n), dtype=np.int64)
    for g in range(n_groups):
        r = reads[groups == g].astype(object)
        both = r.T.dot(r) if len(r) else np.zeros((n, n), dtype=object)
        alone = np.asarray([both[a, a] for a in range(n)], dtype=object)
        out[g] = (alone[:, None] + alone[None, :] - both).astype(np.int64)
    return out


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 9), st.integers(0, 40), st.integers(1, 4), st.integers(0, 2**32 - 1), st.integers(1, 9))
def test_pair_counts_equal_the_matrix_product(n_var, n_rel, n_groups, seed, limit):
    rng = np.random.default_rng(seed)
    reads = rng.random((n_rel, n_var)) < rng.random()
    groups = rng.integers(-1, n_groups, n_rel)
    old = index_pairs.PAIR_SPARSE_LIMIT
    index_pairs.PAIR_SPARSE_LIMIT = limit  # some releases by pairs, the wider ones by the product
    try:
        found = _index(reads).pair_counts(groups, n_groups)
    finally:
        index_pairs.PAIR_SPARSE_LIMIT = old
    assert np.array_equal(found, _by_product(reads, groups, n_groups))


def test_pair_counts_of_a_known_ledger():
    # three releases: {a, b}, {b, c}, {a}; one group. a or b: all three; a or c: all; b alone: 2
    reads = np.array([[1, 1, 0], [0, 1, 1], [1, 0, 0]], dtype=bool)
    counts = _index(reads).pair_counts(np.zeros(3, dtype=np.int64), 1)[0]
    assert counts.tolist() == [[2, 3, 3], [3, 2, 2], [3, 2, 1]]


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 7), st.integers(0, 300), st.integers(0, 2**32 - 1))
def test_read_entries_are_the_nonzero_cells_in_row_order(n_var, n_rel, seed):
    rng = np.random.default_rng(seed)
    reads = rng.random((n_rel, n_var)) < rng.random()
    rows, cols = _index(reads).read_entries()
    expected_rows, expected_cols = np.nonzero(reads)
    assert rows.tolist() == expected_rows.tolist() and cols.tolist() == expected_cols.tolist()

# --------------------------------------------------------------------------
# The accounting rows read a column at a time (SQLite) = read row by row
# --------------------------------------------------------------------------

import tempfile  # noqa: E402

from hypothesis import HealthCheck  # noqa: E402
from sqlmodel import Session  # noqa: E402
from test_accounting_rows import VARIABLES, ledgers, record, same_rows  # noqa: E402

from ledger.store import engines, index_from_rows, row_arrays  # noqa: E402
from ledger.core.records import CHARGED_STATUSES, Status  # noqa: E402


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ledgers(), st.sets(st.sampled_from(VARIABLES), min_size=1, max_size=3), st.booleans())
def test_the_column_reading_equals_the_row_reading(ledger, subset, accounts):
    """Families, further guarantees, a first guarantee protecting less than the release reads,
    every status and moment: the same arrays, and (for a subset) the ids in index order."""
    entries, lifecycle = ledger
    charged = sorted(s.value for s in CHARGED_STATUSES)
    with tempfile.TemporaryDirectory() as directory:
        url = f"sqlite:///{directory}/l.db"
        record(url, entries, lifecycle)
        engine = engines.make_engine(url)
        with Session(engine) as session:
            connection = session.connection()
            for positions in (None, sorted(VARIABLES.index(v) for v in subset)):
                found = row_arrays._read_columns(connection, "t", charged, positions, len(VARIABLES), accounts)
                expected = row_arrays._read_rows(connection, index_from_rows._row_statement("t", charged, positions, accounts)[1], len(VARIABLES),
                                              accounts)
                same_rows(found, expected)
                if positions is not None:
                    seqs = found.seq.tolist()
                    by_seq = dict(connection.exec_driver_sql("SELECT seq, release FROM release_accounting").all())
                    assert found.ids == [by_seq[s] for s in seqs]
        engine.dispose()



def test_a_bitset_of_another_width_sends_the_column_reading_back_to_the_rows():
    """A reads bitset written before a variable was added is shorter than the dataset's width:
    the column reading then declines (None), and the row reading pads it; whether the bitsets'
    total length still adds up (one shorter, one longer) or not."""
    entries = [{"id": f"r{i}", "reads": reads, "mechanism": {"name": "laplace", "epsilon": "1/2"}}
               for i, reads in enumerate([["a"], ["a", "b"], ["b"]])]
    lifecycle = [(Status.PLANNED, None, None, False)] * 3
    charged = sorted(s.value for s in CHARGED_STATUSES)
    for changes in (["x''"], ["x''", "CAST(reads || x'00' AS BLOB)"]):
        with tempfile.TemporaryDirectory() as directory:
            url = f"sqlite:///{directory}/l.db"
            record(url, entries, lifecycle)
            engine = engines.make_engine(url)
            with Session(engine) as session:
                connection = session.connection()
                seqs = [s for (s,) in connection.exec_driver_sql("SELECT seq FROM release_accounting ORDER BY seq")]
                for seq, change in zip(seqs, changes):
                    connection.exec_driver_sql(f"UPDATE release_accounting SET reads = {change} WHERE seq = {seq}")
                for positions in (None, [0, 1]):
                    assert row_arrays._read_columns(connection, "t", charged, positions, len(VARIABLES), True) is None
                rows = row_arrays._read_rows(connection, index_from_rows._row_statement("t", charged, None, True)[1],
                                          len(VARIABLES), True)
                assert rows.reads.shape == (3, (len(VARIABLES) + 7) // 8) and not rows.reads[0].any()
            engine.dispose()
