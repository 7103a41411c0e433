"""Forked helper processes that share the work of a report: one verifies the audit chain
(`VerifyAlongside`), one computes the pairs panel (`ForkedCall`), one draws the charts
(`ChartsAlongside`). If a helper is missing or fails, its work is done in this process; the
report is the same.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextlib import contextmanager
from typing import TYPE_CHECKING


from ..core.lazy import lazy_callable, lazy_module


if TYPE_CHECKING:
    from ..operations.report_inputs import ChainStatus
    from ..reporting.chart_data import Pairs, Timeline

chain_status_at = lazy_callable("ledger.api.chain_keys", "chain_status_at")  # (the façade and the ORM: imported when a report is made)
load_verification = lazy_callable("ledger.api.chain_keys", "load_verification")
# the report's context builder (and markupsafe, the chart data): imported when a report is
# made, not by `--help`, `check` or `record`, which only register this command
_report = lazy_module("ledger.reporting.report")
_report_inputs = lazy_module("ledger.operations.report_inputs")  # (ChainStatus, what a verifying helper sends)


HELPER_TIMEOUT_S = 3600  # a helper process still working this long is given up, and its work done here
HELPER_POLL_S = 0.5  # how often a wait for a helper looks whether it is still alive


class Helper:
    """A forked helper process and this process's end of a pipe to it; no process where
    fork is not available. The helper's target is called with its own end of the pipe last."""

    def __init__(self, target: Callable, *args, fork: bool = True):
        self.process = None
        self.channel = None
        if not fork:
            return
        import multiprocessing

        if sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods():
            context = multiprocessing.get_context("fork")
            self.channel, child_end = context.Pipe()
            self.process = context.Process(target=target, args=(*args, child_end), daemon=True)
            self.process.start()
            child_end.close()

    def send(self, message) -> bool:
        """False (and the helper stopped) when it cannot be told."""
        try:
            self.channel.send(message)
            return True
        except (OSError, ValueError):
            self.stop()
            return False

    def reply(self):
        """The helper's answer; None when it ended without one (at once: its work is then done here),
        or was still at work after HELPER_TIMEOUT_S. Stops it. A helper that is alive is waited for:
        a full verification of a million events takes minutes, and giving it up part way only
        to verify again here took longer than either."""
        outcome = None
        waited = 0.0
        try:
            while waited < HELPER_TIMEOUT_S:
                if self.channel.poll(HELPER_POLL_S):
                    outcome = self.channel.recv()
                    break
                waited += HELPER_POLL_S
                if not self.process.is_alive() and not self.channel.poll(0):
                    break  # ended without an answer
        except (EOFError, OSError):
            pass
        self.stop()
        return outcome

    def stop(self) -> None:
        if self.process is not None:
            if self.process.is_alive():
                self.process.terminate()  # done with it: it has answered, or its answer is not wanted
            self.process.join()
            self.channel.close()
            self.process = None


class VerifyAlongside:
    """`store.verify` run in a forked process while this one reads the ledger and builds
    the report: on a large ledger the verification (every hash, every row, every cap's
    total recomputed) takes as long as all the rest, and a machine has more than one core.
    What it verifies: `verify_for_report` (since the verified head, when the ledger has one).

    Calling it gives the ChainStatus. Where fork is not available, or the child fails, or the
    ledger is small (`fork` False: ALONGSIDE_FROM), the verification runs here, in this
    process, when it is asked for.
    """

    def __init__(self, url: str, fork: bool = True):
        self.url = url
        self.result: ChainStatus | None = None
        self.helper = Helper(_verify_child, url, fork=fork)  # (not `fork`: verified here when asked)

    def __call__(self) -> ChainStatus:
        if self.result is None and self.helper.process is not None:
            outcome = self.helper.reply()
            if isinstance(outcome, _report_inputs.ChainStatus):
                self.result = outcome
        if self.result is None:  # no child, or it failed: verify here
            self.result = chain_status_at(self.url)
        return self.result

    def close(self) -> None:
        self.helper.stop()


class ForkedCall:
    """`function()` computed in a forked process (a `report.Beside`) while this one goes on:
    the report's pairs panel (the accountants on every pair of variables, about a fifth of a
    10,000-release report's work) on the other core, while this process builds the risk table,
    the register and the timeline. The child is a copy of this process, so
    it computes the same figures from the same index; its result comes back pickled. Calling
    the instance gives the result; where fork is not available, or the child fails, the
    function is called here, then."""

    def __init__(self, function: Callable):
        self.function = function
        self.helper = Helper(call_child, function)

    def __call__(self):
        if self.helper.process is not None:
            outcome = self.helper.reply()
            if isinstance(outcome, tuple) and len(outcome) == 2 and outcome[0] == "done":
                return outcome[1]
        return self.function()  # no child, or it failed: here


@contextmanager
def _telling_the_parent(channel):
    """In a forked helper: what goes wrong is sent to the parent as text (which then does the work
    itself, in its own process) rather than raised; a parent already gone is not told. The
    helper's end of the pipe is closed either way."""
    try:
        yield
    except BaseException as exc:
        try:
            channel.send(repr(exc))
        except OSError:
            pass
    finally:
        channel.close()


def call_child(function: Callable, channel) -> None:
    """In the forked process: call, send the result (or what went wrong, for the parent to redo it)."""
    with _telling_the_parent(channel):
        channel.send(("done", function()))


def modules_before_fork(charts: bool) -> None:
    """Import what the helpers and this process all use before the helpers are forked: a forked
    child shares the parent's imported modules, so each helper importing them again (numpy, the
    accountants, the chart writer: ~0.2 s of CPU in all on a loaded 2-core machine) is CPU taken
    from the other processes of the same report, which import them anyway."""
    import numpy  # noqa: F401
    import numpy.ma  # noqa: F401 (np.unique reads np.ma.is_masked: ~0.1 s of import in each process otherwise)

    load_verification()  # (store.verify's modules)

    _report.summary_from  # noqa: B018 (the report module, loaded)
    if charts:
        from ..reporting import charts as _charts  # noqa: F401


def _verify_child(url: str, channel) -> None:
    """In the forked process: a new engine (never the parent's connections), verify, send (on a
    failure, the parent verifies again)."""
    with _telling_the_parent(channel):
        channel.send(chain_status_at(url))


class ChartsAlongside:
    """The charts drawn in a forked process (a `report.Draw`) while this one builds the
    rest of the report. Where fork is not available, or the child fails, they are drawn here."""

    def __init__(self):
        self.helper = Helper(_draw_child)

    def __call__(self, pairs: Pairs, timeline: Timeline | None) -> Callable[[], tuple[str, str]]:
        if self.helper.process is None or not self.helper.send((pairs, timeline)):
            return _report.draw_here(pairs, timeline)

        def drawn() -> tuple[str, str]:
            outcome = self.helper.reply()
            return outcome if isinstance(outcome, tuple) else _report.draw_here(pairs, timeline)()  # failed: draw here

        return drawn

    def close(self) -> None:
        self.helper.stop()


def _draw_child(channel) -> None:
    """In the forked process: import the charts, wait for the contexts, draw (on a failure, the
    parent draws again)."""
    with _telling_the_parent(channel):
        from ..reporting import charts

        pairs, timeline = channel.recv()
        channel.send((str(charts.heat_map_svg(pairs)), str(charts.timeline_svg(timeline)) if timeline else ""))
