"""A release's lineage as a small layered graph, laid out here and drawn by the template as SVG
(no script): its derived-from ancestry above it, the releases derived from it below, and the other
members of its family (parallel composition) beside it.

The graph is networkx's: the dataset's releases as a directed graph, parent -> derived release;
the release's ancestors and descendants are reachability in it, each node's row the longest path
from the topmost ancestor drawn (so every arrow points down), and each row ordered by the mean
position of the node's parents, then of its children (the barycentre heuristic of Sugiyama,
Tagawa and Toda 1981), which keeps arrows from crossing where it can. Only positions are
computed here; the template escapes every id and title it writes.
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx

MAX_NODES = 40  # beyond it, the nearest releases are drawn and the page says how many are not
ROW = 78  # px from one row's top to the next
NODE_HEIGHT = 34
GAP = 18  # px between two boxes of a row
MARGIN = 12
CHARS = 22  # an id longer than this is cut (its whole id is the box's tooltip)
CHAR_WIDTH = 8.2  # px per character of the box's label (the monospace font of web.css at 13px)


@dataclass(frozen=True)
class Node:
    """One release's box: where it is, what it says, and how it is related to the release shown
    (role: "self", "ancestor", "descendant", "family"; status: its status, or "unknown" for an
    id the ledger does not hold)."""

    id: str
    label: str
    title: str
    role: str
    status: str
    x: float
    y: float
    width: float

    @property
    def centre(self) -> float:
        return self.x + self.width / 2


@dataclass(frozen=True)
class Edge:
    """An arrow from a release to one derived from it (`path`: the SVG path's data)."""

    parent: str
    child: str
    path: str


@dataclass(frozen=True)
class Lineage:
    """What the template draws: the boxes, the arrows, the picture's size, how many related
    releases were left out (MAX_NODES), and a one-sentence description for assistive technology."""

    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]
    width: float
    height: float
    omitted: int
    description: str


def derivation_graph(releases) -> nx.DiGraph:
    """Every release as a node (its status and title as attributes), an edge from each release
    to each release derived from it; a parent id the ledger does not hold is a node too."""
    graph = nx.DiGraph()
    for release in releases:
        graph.add_node(release.id, status=release.status.value, title=release.title or "",
                       family=release.family)
    for release in releases:
        for parent in release.derived_from:
            if parent not in graph:
                graph.add_node(parent, status="unknown", title="", family=None)
            graph.add_edge(parent, release.id)
    return graph


def lineage(releases, release_id: str, max_nodes: int = MAX_NODES) -> Lineage:
    """The lineage of `release_id` among `releases` (its dataset's), laid out in rows."""
    graph = derivation_graph(releases)
    family = graph.nodes[release_id]["family"]
    ancestors, descendants = nx.ancestors(graph, release_id), nx.descendants(graph, release_id)
    members = {n for n, data in graph.nodes(data=True) if family is not None and data["family"] == family}
    related = (ancestors | descendants | members) - {release_id}
    kept = _nearest(graph, release_id, related, max_nodes - 1)
    shown = graph.subgraph(kept | {release_id})
    roles = {n: "self" if n == release_id else "ancestor" if n in ancestors else
             "descendant" if n in descendants else "family" for n in shown}
    rows = _rows(shown, release_id)
    order = _ordered(shown, rows, release_id)
    nodes = _placed(shown, roles, rows, order)
    edges = tuple(_edge(nodes[a], nodes[b]) for a, b in sorted(shown.edges))
    width = max((n.x + n.width for n in nodes.values()), default=0) + MARGIN
    height = (max(rows.values()) + 1) * ROW - (ROW - NODE_HEIGHT) + 2 * MARGIN
    return Lineage(tuple(nodes[n] for n in sorted(nodes, key=lambda n: (rows[n], order[n]))), edges, width,
                   height, len(related) - len(kept), _description(release_id, ancestors, descendants, members,
                                                                   family))


def _nearest(graph: nx.DiGraph, release_id: str, related: set[str], room: int) -> set[str]:
    """At most `room` of `related`: the nearest first (fewest derivation steps either way; family
    members not in the lineage after them), then by id."""
    if len(related) <= room:
        return set(related)
    steps = nx.single_source_shortest_path_length(graph.to_undirected(as_view=True), release_id)
    return set(sorted(related, key=lambda n: (steps.get(n, len(graph)), n))[:room])


def _rows(shown: nx.DiGraph, release_id: str) -> dict[str, int]:
    """Each node's row: the longest derivation path reaching it among the nodes drawn (so a parent
    is always above what derives from it); a family member outside the lineage sits on the
    release's own row, and the rows are renumbered from 0 at the top."""
    row: dict[str, int] = {}
    for node in nx.topological_sort(shown):
        row[node] = max((row[p] + 1 for p in shown.predecessors(node)), default=0)
    lineage_nodes = nx.ancestors(shown, release_id) | nx.descendants(shown, release_id) | {release_id}
    for node in shown:
        if node not in lineage_nodes and shown.degree(node) == 0:
            row[node] = row[release_id]
    top = min(row.values())
    return {node: r - top for node, r in row.items()}


def _ordered(shown: nx.DiGraph, rows: dict[str, int], release_id: str) -> dict[str, float]:
    """Each node's position within its row: by id first, then a sweep down by the mean position of
    its parents and a sweep up by that of its children (barycentre ordering); the family members
    with no arrow are split either side of the release, which stays under its parents."""
    by_row: dict[int, list[str]] = {}
    for node in sorted(shown):
        by_row.setdefault(rows[node], []).append(node)
    position = {node: float(i) for nodes in by_row.values() for i, node in enumerate(nodes)}
    for neighbours, sweep in ((shown.predecessors, sorted(by_row)), (shown.successors, sorted(by_row, reverse=True))):
        for r in sweep:
            def centre(node: str) -> tuple[float, str]:
                near = [position[n] for n in neighbours(node)]
                return (sum(near) / len(near) if near else position[node], node)

            by_row[r] = sorted(by_row[r], key=centre)
            for i, node in enumerate(by_row[r]):
                position[node] = float(i)
    row = by_row[rows[release_id]]
    alone = [node for node in row if shown.degree(node) == 0 and node != release_id]
    linked = [node for node in row if node not in alone]
    half = len(alone) // 2
    for i, node in enumerate(alone[:half] + linked + alone[half:]):
        position[node] = float(i)
    return position


def _placed(shown: nx.DiGraph, roles: dict[str, str], rows: dict[str, int], order: dict[str, float]) -> dict[str, Node]:
    """The boxes, each row centred on the widest."""
    by_row: dict[int, list[str]] = {}
    for node in sorted(shown, key=lambda n: order[n]):
        by_row.setdefault(rows[node], []).append(node)
    widths = {node: max(56.0, min(len(node), CHARS) * CHAR_WIDTH + 24) for node in shown}
    spans = {r: sum(widths[n] for n in nodes) + GAP * (len(nodes) - 1) for r, nodes in by_row.items()}
    widest = max(spans.values())
    placed = {}
    for r, nodes in by_row.items():
        x = MARGIN + (widest - spans[r]) / 2
        for node in nodes:
            data = shown.nodes[node]
            label = node if len(node) <= CHARS else node[:CHARS - 1] + "…"
            placed[node] = Node(node, label, data["title"], roles[node], data["status"], x, MARGIN + r * ROW,
                                widths[node])
            x += widths[node] + GAP
    return placed


def _edge(parent: Node, child: Node) -> Edge:
    """A curve from the bottom of the parent's box to the top of the child's."""
    x1, y1 = parent.centre, parent.y + NODE_HEIGHT
    x2, y2 = child.centre, child.y - 4  # (room for the arrowhead)
    bend = (y2 - y1) / 2
    return Edge(parent.id, child.id, f"M{x1:.1f},{y1:.1f} C{x1:.1f},{y1 + bend:.1f} {x2:.1f},{y2 - bend:.1f} "
                                     f"{x2:.1f},{y2:.1f}")


def _description(release_id: str, ancestors, descendants, members, family: str | None) -> str:
    def listed(ids) -> str:
        return ", ".join(sorted(ids)) or "no release"

    text = f"{release_id} derives from {listed(ancestors)} (directly or not); derived from it: {listed(descendants)}."
    if family is not None:
        text += f" Family {family}: {listed(set(members) - {release_id})} beside it."
    return text
