"""Number distributions with a certified error bound: the trie expanded only where the mass is. Pure numpy.

An exact 0-100 distribution computes every node of the number trie (`runners.scoring.distributions`):
SmolLM2's tokenizer has 203 of them, against ~45 context tokens, and most carry almost no
probability. With a tolerance ε > 0 (`--number-tolerance`), a backend expands the trie level
by level over the cached context (`TrieExpansion`), one pass per level:

1. The context pass gives the path probability π of every child of the root.
2. Each pass expands the frontier nodes (known π, not yet computed) that the bound cannot
   afford to leave out, largest first; expanding a node gives its children's π and its
   end-of-number mass P(end | node) (the same candidate read as the exact mode).
3. It stops once the frontier's mass F is small enough. Every number below an unexpanded node
   has a true probability in [0, π(node)], so the unresolved numbers hold δ <= F in all.

The tolerance is **relative**: the run stops when `2F / (M + F) <= ε`, M being the resolved
number mass (`valid_mass`). That quantity, `number_bound`, is a certified bound on the L1
distance between the reported `number_probs` (renormalised over what was resolved) and the exact
run's: with δ of the exact mass unresolved, that distance is exactly `2δ / (M + δ)`, which
grows with δ <= F. An absolute bound on F would say little for a model that puts 5% of its mass
on numbers (SmolLM2 on a plain prompt puts 5-11%): ε = 1e-3 absolute is 1-2% of its renormalised
distribution, enough to move an expected value by a point on a 0-100 scale; relative, the
bound means the same for every model. Numbers under unexpanded nodes get probability 0.

How a pass chooses: leaving a node out costs its π and saves its whole subtree, so the frontier
nodes with the least mass per subtree node are left out first while their total fits the
budget `ε (M + F) / 2`; the rest are expanded. Mass that later leaks to tokens outside the trie
can shrink `M + F` below what the budget assumed; the next pass then expands more of what was
left out, so the bound always holds when the loop ends. `oracle_positions` is the fewest
expansions that meet the bound, from an exact run's per-node probabilities (tree knapsack),
which the benchmark compares this choice against.

With ε = 0 none of this runs: the exact mode is unchanged, bit for bit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from runners.exchange import ContinuationScore, ScoreRequest, ScoreResult
from runners.scoring.distributions import NumberDistribution, NumberTrie
from runners.scoring.token_accounting import continuation_nodes

#: the smallest bound a row states, and the smallest tolerance: float32 log-probabilities (what a
#: model's logits give, at best) differ by ~1e-7 per token between two computations of one number
#: (a pooled pass and a packed row; `tests/runners/scoring/test_number_bound.py`'s ROUND_OFF), so a bound
#: below this would claim more than the floats hold
FLOAT_FLOOR = 1e-6


def check_tolerance(tolerance: float) -> None:
    """ValueError unless tolerance is 0 (exact) or in [FLOAT_FLOOR, 1): the bound is an L1 distance (at most 2),
    and one under the float error of the log-probabilities cannot be certified."""
    if not (np.isfinite(tolerance) and (tolerance == 0.0 or FLOAT_FLOOR <= tolerance < 1.0)):
        raise ValueError(f"the number tolerance must be 0 or in [{FLOAT_FLOOR:g}, 1), got {tolerance}")


def certified_bound(resolved: float, frontier: float) -> float:
    """The L1 bound on the renormalised distribution when `frontier` mass is unresolved (module docstring)."""
    return 2.0 * frontier / (resolved + frontier) if frontier > 0 else 0.0


def _p_end(candidate_logprobs: np.ndarray) -> float:
    """P(the number ends here) = 1 - P(a digit-starting token follows), as the exact mode reads it."""
    return max(0.0, 1.0 - float(np.exp(candidate_logprobs).sum()))


class TrieShape:
    """The nodes of a number request's trie (every prefix of its leaves), parents before children."""

    def __init__(self, leaves: Sequence[Sequence[int]], ends: Sequence[Sequence[int]]) -> None:
        self.nodes: list[tuple[int, ...]] = continuation_nodes(leaves, True)
        self.index = {node: k for k, node in enumerate(self.nodes)}
        self.parent = [self.index[node[:-1]] if len(node) > 1 else -1 for node in self.nodes]
        self.children: list[list[int]] = [[] for _ in self.nodes]
        for k, p in enumerate(self.parent):
            if p >= 0:
                self.children[p].append(k)
        self.roots = [k for k, p in enumerate(self.parent) if p < 0]
        ends_set = {tuple(e) for e in ends}
        self.is_end = np.array([node in ends_set for node in self.nodes], dtype=bool)
        # subtree sizes, children after parents in `nodes`, so one backwards sweep
        self.size = np.ones(len(self.nodes), dtype=np.int64)
        for k in range(len(self.nodes) - 1, -1, -1):
            if self.parent[k] >= 0:
                self.size[self.parent[k]] += self.size[k]


class TrieExpansion:
    """One number item's bounded expansion: what is known so far, and what the next pass computes.

    A backend drives it: `root` with the log-probabilities after the context, then, while
    `pending()` names nodes, computes each one's next-token log-probabilities at its children's
    tokens (`child_ids`) and at the request's candidates, and `record`s them; `result()` is the
    `ScoreResult` of the request, with NaN wherever nothing was computed.
    """

    def __init__(self, request: ScoreRequest, shape: TrieShape | None = None) -> None:
        if request.bound is None:
            raise ValueError("a bounded expansion needs a request with a bound")
        self.request = request
        self.tolerance = request.bound.tolerance
        self.shape = shape or TrieShape(request.continuations, request.bound.ends)
        stray = {node[-1] for node in self.shape.nodes if len(node) > 1} - set(request.candidates)
        if stray:
            # a number continued by a token that also counts as its end would be counted twice
            raise ValueError(f"trie tokens {sorted(stray)[:5]} continue a number but are not candidates")
        n = len(self.shape.nodes)
        #: log P(node's last token | its parent), NaN until the parent is expanded
        self.step = np.full(n, np.nan)
        #: log π(node): the path's log-probability after the context
        self.logp = np.full(n, np.nan)
        self.expanded = np.zeros(n, dtype=bool)
        #: the candidates' log-probabilities after each node, NaN rows until it is computed
        self.candidates = np.full((n, len(request.candidates)), np.nan)
        self.p_end = np.zeros(n)
        self.after_context: np.ndarray | None = None

    @property
    def positions(self) -> int:
        """Trie positions computed (one per expanded node)."""
        return int(self.expanded.sum())

    def root_ids(self) -> tuple[int, ...]:
        """The token ids read after the context: the root's children, then the candidates."""
        return tuple(dict.fromkeys((*(self.shape.nodes[k][0] for k in self.shape.roots), *self.request.candidates)))

    def child_ids(self, node: int) -> tuple[int, ...]:
        """The token ids read after `node`: its children's tokens, then the candidates."""
        kids = (self.shape.nodes[c][-1] for c in self.shape.children[node])
        return tuple(dict.fromkeys((*kids, *self.request.candidates)))

    def root(self, logprobs: Mapping[int, float]) -> None:
        """The log-probabilities after the context, by token id (at least `root_ids()`)."""
        for k in self.shape.roots:
            self.step[k] = self.logp[k] = logprobs[self.shape.nodes[k][0]]
        self.after_context = np.array([logprobs[c] for c in self.request.candidates], dtype=np.float64)

    def record(self, node: int, logprobs: Mapping[int, float]) -> None:
        """Node `node` computed: its log-probabilities by token id (at least `child_ids(node)`)."""
        self.candidates[node] = [logprobs[c] for c in self.request.candidates]
        self.p_end[node] = _p_end(self.candidates[node])
        self.expanded[node] = True
        for c in self.shape.children[node]:
            self.step[c] = logprobs[self.shape.nodes[c][-1]]
            self.logp[c] = self.logp[node] + self.step[c]

    def masses(self) -> tuple[float, float]:
        """(M, F): the resolved number mass and the frontier mass."""
        done = self.expanded & self.shape.is_end
        resolved = float(np.sum(np.exp(self.logp[done]) * self.p_end[done]))
        frontier = ~np.isnan(self.logp) & ~self.expanded
        return resolved, float(np.exp(self.logp[frontier]).sum())

    def bound(self) -> float:
        return certified_bound(*self.masses())

    def pending(self) -> list[int]:
        """The nodes the next pass computes; empty once the bound is at most the tolerance."""
        resolved, mass = self.masses()
        if self.after_context is None:
            raise ValueError("pending() before root(): the context's log-probabilities come first")
        if certified_bound(resolved, mass) <= self.tolerance:
            return []
        frontier = np.flatnonzero(~np.isnan(self.logp) & ~self.expanded)
        pi = np.exp(self.logp[frontier])
        budget = self.tolerance * (resolved + mass) / 2.0
        # least mass per subtree node first: leaving a node out saves its whole subtree
        order = np.argsort(pi / self.shape.size[frontier], kind="stable")
        spent = np.cumsum(pi[order])
        left_out = order[: int(np.searchsorted(spent, budget, side="right"))]
        keep = np.ones(len(frontier), dtype=bool)
        keep[left_out] = False
        return sorted(frontier[keep].tolist())

    def result(self, computed_tokens: int | None = None) -> ScoreResult:
        """The request's `ScoreResult`: NaN for every token or candidate row not computed."""
        if self.after_context is None:
            raise ValueError("result() before root()")
        index = self.shape.index
        conts = []
        for leaf in self.request.continuations:
            ks = [index[leaf[: d + 1]] for d in range(len(leaf))]
            conts.append(ContinuationScore(self.step[ks], self.candidates[ks]))
        return ScoreResult(tuple(conts), self.after_context, len(self.request.context), computed_tokens)


def bounded_number_distribution(trie: NumberTrie, result: ScoreResult) -> tuple[NumberDistribution, float, int]:
    """P(n) over what a bounded run resolved, its certified bound and its trie positions.

    Read from the result alone (NaN marks what was not computed), so exact results give the
    exact distribution, bound 0 and every node. A form counts when its path and its end row
    were computed; an unexpanded node with a known path probability is frontier mass.
    """
    if len(result.continuations) != len(trie.leaves):
        raise ValueError(f"result has {len(result.continuations)} continuations, the trie {len(trie.leaves)} leaves")
    path: dict[tuple[int, ...], float] = {}  # log π of every node whose path is known
    done: set[tuple[int, ...]] = set()  # nodes computed
    p_end: dict[tuple[int, ...], float] = {}
    for leaf, row in zip(trie.leaves, result.continuations, strict=True):
        total = 0.0
        for d in range(len(leaf)):
            if np.isnan(row.token_logprobs[d]):
                break
            total += float(row.token_logprobs[d])
            node = leaf[: d + 1]
            path[node] = total
            if not np.isnan(row.next_logprobs[d]).any():
                done.add(node)
                p_end[node] = _p_end(row.next_logprobs[d])
    values = np.arange(trie.lo, trie.hi + 1)
    raw = np.zeros(len(values), dtype=np.float64)
    for n, form in zip(trie.values, trie.forms, strict=True):
        if form in done:
            raw[n - trie.lo] += np.exp(path[form]) * p_end[form]
    frontier = float(sum(np.exp(lp) for node, lp in path.items() if node not in done))
    mass = float(raw.sum())
    probs = raw / mass if mass > 0 else np.full(len(values), np.nan)
    bound = certified_bound(mass, frontier)
    # a row with anything left out states at least the float error of its log-probabilities (FLOAT_FLOOR)
    return NumberDistribution(values, probs, mass, raw), max(bound, FLOAT_FLOOR) if bound > 0 else 0.0, len(done)


def trie_size(trie: NumberTrie) -> int:
    """The trie positions an exact run computes: every node, the leaves included (their end rows)."""
    return len(continuation_nodes(trie.leaves, True))


def oracle_positions(shape: TrieShape, step: np.ndarray, p_end: np.ndarray, tolerance: float) -> int:
    """The fewest expanded nodes whose frontier meets the bound, from exact per-node probabilities.

    The root's children are known after the context; a node can be expanded only once its
    parent is. The bound `2F <= ε (M + F)` is `(1 - ε/2) F - (ε/2) M <= 0`, and both F and M are
    sums over the tree, so a tree knapsack finds, for every subtree and every count of
    expansions in it, the least value of that sum; the answer is the least count whose value
    at the root is at most 0. `step` and `p_end` are per node of `shape` (an exact run's).
    """
    n = len(shape.nodes)
    logp = np.zeros(n)
    for k in range(n):
        logp[k] = step[k] + (logp[shape.parent[k]] if shape.parent[k] >= 0 else 0.0)
    pi = np.exp(logp)
    half = tolerance / 2.0
    best: list[np.ndarray] = [np.zeros(0)] * n  # best[k][j]: least value with j expansions in k's subtree
    for k in range(n - 1, -1, -1):
        inside = np.array([-half * pi[k] * p_end[k] if shape.is_end[k] else 0.0])  # k expanded, no child yet
        for c in shape.children[k]:
            inside = _min_plus(inside, best[c])
        best[k] = np.concatenate([[(1.0 - half) * pi[k]], inside])
    total = np.zeros(1)
    for r in shape.roots:
        total = _min_plus(total, best[r])
    return int(np.flatnonzero(total <= 1e-15)[0])


def _min_plus(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(a ⊕ b)[j] = min over i of a[i] + b[j - i]: knapsack merging of two subtrees."""
    out = np.full(len(a) + len(b) - 1, np.inf)
    for i, value in enumerate(a):
        np.minimum(out[i : i + len(b)], value + b, out=out[i : i + len(b)])
    return out


def node_probabilities(
    shape: TrieShape, leaves: Sequence[Sequence[int]], result: ScoreResult
) -> tuple[np.ndarray, np.ndarray]:
    """(step, p_end) per node of `shape` from an exact result: what `oracle_positions` needs.

    `step[k]` is log P(node k's last token | its parent), `p_end[k]` the end-of-number mass
    after node k; every leaf row of the result passes through its nodes.
    """
    step = np.full(len(shape.nodes), np.nan)
    p_end = np.zeros(len(shape.nodes))
    for leaf, row in zip(leaves, result.continuations, strict=True):
        for d in range(len(leaf)):
            k = shape.index[tuple(leaf[: d + 1])]
            step[k] = row.token_logprobs[d]
            p_end[k] = _p_end(row.next_logprobs[d])
    if np.isnan(step).any():
        raise ValueError("the result does not cover every node (not an exact result)")
    return step, p_end
