"""One example per command, shown at the end of its `--help` (the examples use the files in
examples/ and the demo's datasets, so a reader can paste them after `privacy-ledger demo`)."""

from __future__ import annotations

EXAMPLES = {
    "init": "privacy-ledger --db sqlite:///ledger.db init",
    "record": "privacy-ledger record examples/graduates.releases.yaml",
    "check": "privacy-ledger check examples/graduates.plan.yaml --json",
    "headroom": "privacy-ledger headroom income -d graduates --mechanism laplace",
    "approve": "privacy-ledger approve income-by-degree",
    "publish": "privacy-ledger publish income-by-degree --at 2026-03-01T09:00:00+00:00",
    "retract": 'privacy-ledger retract income-by-degree --reason "wrong table published"',
    "cancel": 'privacy-ledger cancel mean-income --reason "not needed this year"',
    "releases": "privacy-ledger releases -d graduates --json",
    "table": "privacy-ledger table -d graduates --as-of 2026-03-01",
    "subset": "privacy-ledger subset income sex -d graduates --explain",
    "pairs": "privacy-ledger pairs -d graduates",
    "mechanisms": "privacy-ledger mechanisms",
    "demo": "privacy-ledger demo --example graduates",
    "run": "privacy-ledger run laplace-mean --data examples/survey.csv -d survey --id mean-age -p column=age -p lower=0 -p upper=100 -p epsilon=0.5",
    "assess": "privacy-ledger assess --data examples/firms.csv --cells region,industry --contributor firm --value turnover",
    "sample-privacy": "privacy-ledger sample-privacy -d survey",
    "report": "privacy-ledger report -d graduates --format pdf --out board.pdf",
    "serve": "privacy-ledger --db sqlite:///ledger.db serve --port 8080",
    "dataset add": "privacy-ledger dataset add examples/graduates.dataset.yaml",
    "dataset amend": 'privacy-ledger dataset amend graduates-v2.yaml --dry-run --reason "new wave"',
    "dataset list": "privacy-ledger dataset list",
    "dataset show": "privacy-ledger dataset show -d graduates",
    "dataset add-variable": "privacy-ledger dataset add-variable tenure -d graduates --classification sensitive --category own",
    "dataset add-categories": "privacy-ledger dataset add-categories tenure social -d graduates",
    "dataset describe": 'privacy-ledger dataset describe income "Gross annual income, EUR" -d graduates',
    "dataset reclassify": 'privacy-ledger dataset reclassify degree public --reason "published by law" -d graduates',
    "role grant": "privacy-ledger role grant grace approver",
    "role revoke": "privacy-ledger role revoke grace approver",
    "role list": "privacy-ledger role list --json",
    "audit verify": "privacy-ledger audit verify --since-checkpoint",
    "audit keygen": "privacy-ledger audit keygen --out board-key",
    "audit checkpoint": "privacy-ledger audit checkpoint --key board-key --out checkpoint-2026-03.json",
    "audit retotal": "privacy-ledger audit retotal",
    "cap set": "privacy-ledger cap set income sex --epsilon 4 --delta 1e-9 -d graduates",
    "cap list": "privacy-ledger cap list -d graduates",
    "cap remove": 'privacy-ledger cap remove personal --reason "replaced by a cap on all" -d graduates',
    "export registry": "privacy-ledger export registry -d graduates --out graduates.registry.yaml",
    "plan solve": "privacy-ledger plan solve examples/graduates.solve.yaml -d graduates --out solved.yaml",
    "plan record": "privacy-ledger plan record examples/graduates.solve.yaml -d graduates --name spring",
    "plan list": "privacy-ledger plan list -d graduates",
    "plan show": "privacy-ledger plan show spring@v1",
    "plan diff": "privacy-ledger plan diff spring@v1 spring@v2",
    "group set": "privacy-ledger group set personal income sex -d graduates",
    "group remove": "privacy-ledger group remove personal -d graduates",
}


def add_examples(command, path: tuple[str, ...] = ()) -> None:
    """Each leaf command of the click `command` tree ends its help with its example."""
    for name, sub in getattr(command, "commands", {}).items():
        here = (*path, name)
        if getattr(sub, "commands", None):
            add_examples(sub, here)
        elif " ".join(here) in EXAMPLES:
            sub.epilog = f"\b\nExample:  {EXAMPLES[' '.join(here)]}"  # (\b: click keeps the line whole)
