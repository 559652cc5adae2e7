"""From raw log-probabilities to choice and number distributions (docs/DESIGN.md section 6). Pure numpy.

Backends only return log-probabilities of token ids (`runners.exchange`); every
normalisation is done here, once, for all backends.

Choice, sentence mode: log P(option | prompt) is the sum of the option's token
log-probabilities; the choice distribution is the softmax of those sums (or of the mean
per-token log-probability with `length_normalize=True`). The options do not cover the whole
output space, so there is no valid mass to report (NaN).

Choice, letter mode: the next-token distribution after the prompt, read at each label's
token ids (with and without a leading space), summed per label and renormalised. The mass
on the labels before renormalising is the valid mass.

Number: P(n) = sum over n's surface forms (e.g. `42` and ` 42`) of the product of the
form's token probabilities times P(end | form), where the end is any token that does not
start with a digit (`digit_ids` are the tokens that would continue the number; P(end) = 1 -
their total). The forms are stored as a token trie; only its leaves are sent to the
backend, as continuations of the one context, and every inner node's numbers are read off
the leaf rows that pass through it: the KV cache of the context is shared by all numbers
and each trie level's tokens are scored inside one batched pass. The distribution is
renormalised over the range; its mass before that is the valid mass (the rest went to
other text, out-of-range numbers, leading zeros or non-canonical tokenisations).

Number, first-token mode (the Trust Game paper's method for $0-$10): P(n) is the
next-token probability after the context of n's one-token surface forms, summed; nothing
is fed after the context. It needs a one-token form for every number in range
(`first_token_ids` says which number lacks one) and equals the exact mode wherever the
end-of-number mass after those tokens is 1.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from runners.exchange import ScoreRequest, ScoreResult


def _softmax(x: np.ndarray) -> np.ndarray:
    z = np.exp(x - np.max(x))
    return z / z.sum()


def sentence_choice_probs(
    logprobs: Sequence[float], n_tokens: Sequence[int], *, length_normalize: bool = False
) -> np.ndarray:
    """Softmax over the options' summed (or, length-normalised, mean) token log-probabilities."""
    lp = np.asarray(logprobs, dtype=np.float64)
    if length_normalize:
        counts = np.asarray(n_tokens, dtype=np.float64)
        if np.any(counts <= 0):
            raise ValueError(f"token counts must be positive, got {list(n_tokens)}")
        lp = lp / counts
    return _softmax(lp)


def refused_by_mass(valid_mass: float, threshold: float, bound: float = 0.0) -> bool:
    """The refusal rule of a read distribution: its mass on valid answers is under `threshold`.

    A bounded number row (`bound` > 0, `runners.scoring.number_bound`) knows its number mass only as an
    interval: at least the resolved `valid_mass` M, at most M plus the unexpanded mass F, and
    its bound 2F / (M + F) gives F = bM / (2 - b). It is refused only when even the upper end
    2M / (2 - b) is under the threshold, so a row the exact run would answer is never refused
    for being bounded. The one home of the rule: rows are made by it, and checked by `refused_mask`.
    """
    return bool(refused_mask(np.float64(valid_mass), np.float64(threshold), np.float64(bound)))


def refused_mask(valid_mass: npt.ArrayLike, threshold: npt.ArrayLike, bound: npt.ArrayLike) -> np.ndarray:
    """`refused_by_mass` over arrays (`analysis.result_checks` checks every stored row's `refused` by it at once)."""
    mass, bound = np.asarray(valid_mass, dtype=np.float64), np.asarray(bound, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        # nothing resolved (bound 2): the mass may be anything, so the row is not refused
        upper = np.where(bound == 0, mass, np.where(bound >= 2.0, np.inf, 2.0 * mass / (2.0 - bound)))
    return upper < np.asarray(threshold, dtype=np.float64)


@dataclass(frozen=True)
class Distribution:
    probs: np.ndarray  # renormalised over the valid answers
    valid_mass: float  # their total probability before renormalising


def letter_choice_probs(label_logprobs: Sequence[npt.ArrayLike]) -> Distribution:
    """Labels' next-token probabilities (each label: its token forms' log-probabilities), renormalised."""
    mass = np.array([np.exp(np.asarray(lps, dtype=np.float64)).sum() for lps in label_logprobs])
    total = float(mass.sum())
    if not total > 0:
        return Distribution(np.full(len(mass), np.nan), total)
    return Distribution(mass / total, total)


def letter_request(context: Sequence[int], label_ids: Sequence[Sequence[int]]) -> ScoreRequest:
    """The backend request of a letter-mode item: the labels' token ids as candidates after the context."""
    return ScoreRequest(tuple(context), (), tuple(i for ids in label_ids for i in ids))


def letter_distribution(label_ids: Sequence[Sequence[int]], result: ScoreResult) -> Distribution:
    """`letter_choice_probs` from the backend's result for `letter_request(...)`."""
    flat = [i for ids in label_ids for i in ids]
    if len(result.next_logprobs) != len(flat):
        raise ValueError(f"result has {len(result.next_logprobs)} candidates, the labels {len(flat)} token ids")
    bounds = np.cumsum([0, *(len(ids) for ids in label_ids)])
    return letter_choice_probs([result.next_logprobs[a:b] for a, b in itertools.pairwise(bounds)])


@dataclass(frozen=True)
class NumberTrie:
    """The token forms of every number in a range, and the leaves that cover them.

    `forms[i]` is a token path spelling `values[i]`; `leaf_of[i]` is the index into `leaves` of
    a leaf whose path starts with `forms[i]`.
    """

    values: tuple[int, ...]
    forms: tuple[tuple[int, ...], ...]
    leaves: tuple[tuple[int, ...], ...]
    leaf_of: tuple[int, ...]
    lo: int
    hi: int

    @property
    def depth(self) -> int:
        return max(len(f) for f in self.forms)


def build_number_trie(paths: Mapping[int, Sequence[Sequence[int]]]) -> NumberTrie:
    """The trie of `{n: token paths}` (as made by `runners.scoring.tokenize.number_paths`)."""
    if not paths:
        raise ValueError("no numbers")
    values, forms = [], []
    for n in sorted(paths):
        if not paths[n]:
            raise ValueError(f"number {n} has no token form")
        for form in paths[n]:
            if not form:
                raise ValueError(f"number {n} has an empty token form")
            values.append(n)
            forms.append(tuple(form))
    unique = sorted(set(forms))
    # a path is a leaf when no other path extends it; in sorted order an extension follows directly
    leaves = [p for k, p in enumerate(unique) if not (k + 1 < len(unique) and unique[k + 1][: len(p)] == p)]
    leaf_index = {leaf: i for i, leaf in enumerate(leaves)}
    leaf_of = []
    for form in forms:
        # the first leaf at or after the form in sorted order that starts with it
        k = unique.index(form)
        while unique[k] not in leaf_index:
            k += 1
        assert unique[k][: len(form)] == form
        leaf_of.append(leaf_index[unique[k]])
    return NumberTrie(tuple(values), tuple(forms), tuple(leaves), tuple(leaf_of), min(paths), max(paths))


def number_request(context: Sequence[int], trie: NumberTrie, digit_ids: Sequence[int]) -> ScoreRequest:
    """The one backend request of a number item: the trie's leaves, with the digit tokens as candidates."""
    if not digit_ids:
        raise ValueError("no digit token ids: cannot tell where a number ends")
    return ScoreRequest(tuple(context), trie.leaves, tuple(digit_ids))


@dataclass(frozen=True)
class NumberDistribution:
    values: np.ndarray  # lo..hi
    probs: np.ndarray  # renormalised over lo..hi (NaN when valid_mass is 0)
    valid_mass: float
    raw: np.ndarray  # P(n) before renormalising

    @property
    def expected_value(self) -> float:
        return float(np.dot(self.values, self.probs))

    @property
    def argmax_value(self) -> int | None:
        return int(self.values[int(np.argmax(self.raw))]) if self.valid_mass > 0 else None


def number_distribution(trie: NumberTrie, result: ScoreResult) -> NumberDistribution:
    """P(n) over the trie's range from the backend's result for `number_request(...)`."""
    if len(result.continuations) != len(trie.leaves):
        raise ValueError(f"result has {len(result.continuations)} continuations, the trie {len(trie.leaves)} leaves")
    values = np.arange(trie.lo, trie.hi + 1)
    raw = np.zeros(len(values), dtype=np.float64)
    for n, form, leaf in zip(trie.values, trie.forms, trie.leaf_of, strict=True):
        row = result.continuations[leaf]
        k = len(form)
        path_lp = float(np.sum(row.token_logprobs[:k]))
        p_continue = float(np.exp(row.next_logprobs[k - 1]).sum())
        p_end = max(0.0, 1.0 - p_continue)
        raw[n - trie.lo] += np.exp(path_lp) * p_end
    mass = float(raw.sum())
    probs = raw / mass if mass > 0 else np.full(len(values), np.nan)
    return NumberDistribution(values, probs, mass, raw)


#: how number items are read: the exact trie, or the next-token distribution after the context alone
NUMBER_MODES = ("exact", "first-token")


def first_token_ids(paths: Mapping[int, Sequence[Sequence[int]]]) -> dict[int, tuple[int, ...]]:
    """{n: the token ids of n's one-token surface forms}; an error naming the first number with none.

    First-token mode reads P(n) from one next-token distribution, so a number spelled with
    two or more tokens in every form (any number above 9 for a digit-by-digit tokenizer)
    cannot be scored there.
    """
    out: dict[int, tuple[int, ...]] = {}
    for n in sorted(paths):
        ids = tuple(dict.fromkeys(form[0] for form in paths[n] if len(form) == 1))
        if not ids:
            raise ValueError(
                f"--number-mode first-token: the number {n} has no one-token form for this tokenizer "
                f"(its forms take {min(len(f) for f in paths[n])} tokens); use --number-mode exact"
            )
        out[n] = ids
    seen: dict[int, int] = {}
    for n, ids in out.items():
        for i in ids:
            if i in seen:
                raise ValueError(f"--number-mode first-token: numbers {seen[i]} and {n} share the token id {i}")
            seen[i] = n
    return out


def first_token_request(context: Sequence[int], ids: Mapping[int, Sequence[int]]) -> ScoreRequest:
    """The backend request of a first-token number item: the numbers' one-token ids as candidates, nothing fed."""
    return ScoreRequest(tuple(context), (), tuple(i for n in sorted(ids) for i in ids[n]))


def first_token_distribution(ids: Mapping[int, Sequence[int]], result: ScoreResult) -> NumberDistribution:
    """P(n) = the summed next-token probabilities of n's one-token forms, renormalised over the range."""
    numbers = sorted(ids)
    flat = [i for n in numbers for i in ids[n]]
    if len(result.next_logprobs) != len(flat):
        raise ValueError(f"result has {len(result.next_logprobs)} candidates, the numbers {len(flat)} token ids")
    lo, hi = numbers[0], numbers[-1]
    values = np.arange(lo, hi + 1)
    raw = np.zeros(len(values), dtype=np.float64)
    at = 0
    for n in numbers:
        raw[n - lo] += float(np.exp(np.asarray(result.next_logprobs[at : at + len(ids[n])], dtype=np.float64)).sum())
        at += len(ids[n])
    mass = float(raw.sum())
    probs = raw / mass if mass > 0 else np.full(len(values), np.nan)
    return NumberDistribution(values, probs, mass, raw)
