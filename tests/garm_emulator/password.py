"""A conservative stand-in for GARM's admin password check (zxcvbn-go score 4).

GARM refuses a first-run password whose zxcvbn score is below 4. zxcvbn-go scores 4 when its
cheapest explanation of the password costs at least ``log2(2e12)`` (about 40.9) bits: its crack
time, ``0.5 * 2**bits * 1e-4`` seconds, must reach ``1e8``. zxcvbn looks for the cheapest
explanation; so any explanation we can build whose cost is below the threshold proves a score
below 4. This module builds such explanations from a few of zxcvbn's own patterns, each costed at
or above what zxcvbn charges for it:

* brute force: every character costs ``log2`` of the password's cardinality (26 lower, 26 upper,
  10 digits, 33 for anything else), exactly as zxcvbn;
* a run of three or more equal characters (case-insensitively): ``log2(cardinality * length)``;
* an ascending or descending run of three or more letters or digits: at most
  ``log2(26) + 2 + log2(length)``;
* a word of :data:`COMMON_WORDS` (case-insensitive, with l33t substitutions): ``log2(rank)`` in
  zxcvbn-go's own lists, plus at most one bit per character for capitals and one per occurrence
  of a substituted letter.

So every refusal is certain; a weak password made of patterns not listed here (keyboard walks,
dates, rarer words) is accepted where GARM refuses it. Never rely on the emulator to refuse such a
password: check it on real GARM.
"""

from __future__ import annotations

import math

# zxcvbn-go scores 4 from this many bits on (crack time 1e8 s at 1e-4 s per guess, halved).
SCORE_4_BITS = math.log2(2e12)

# Words and their rank (1-based) in zxcvbn-go's passwords or English frequency lists (the lists
# GARM vendors at commit afda4e76); zxcvbn charges log2(rank) bits for a word.
COMMON_WORDS: dict[str, int] = {
    "password": 1,
    "qwerty": 5,
    "dragon": 7,
    "baseball": 9,
    "football": 10,
    "letmein": 11,
    "monkey": 12,
    "shadow": 16,
    "master": 17,
    "superman": 21,
    "trustno1": 27,
    "batman": 33,
    "test": 34,
    "pass": 35,
    "love": 39,
    "sunshine": 40,
    "access": 44,
    "hello": 54,
    "computer": 58,
    "summer": 63,
    "princess": 72,
    "secret": 77,
    "iloveyou": 84,
    "welcome": 125,
    "internet": 131,
    "winter": 152,
    "runner": 305,
    "word": 419,
    "admin": 558,
    "system": 550,
    "spring": 705,
    "changeme": 764,
}

_LEET = {"4": "a", "@": "a", "8": "b", "(": "c", "3": "e", "6": "g", "1": "i", "!": "i"}
_LEET.update({"|": "l", "0": "o", "$": "s", "5": "s", "+": "t", "7": "t", "%": "x", "2": "z"})
_SEQUENCES = ("abcdefghijklmnopqrstuvwxyz", "0123456789")


def _class_cardinality(text: str) -> int:
    lower = any(c.islower() for c in text)
    upper = any(c.isupper() for c in text)
    digit = any(c.isdigit() for c in text)
    other = any(not (c.islower() or c.isupper() or c.isdigit()) for c in text)
    return 26 * lower + 26 * upper + 10 * digit + 33 * other


def _word_cost(token: str) -> float | None:
    plain = "".join(_LEET.get(c, c) for c in token.lower())
    rank = COMMON_WORDS.get(plain)
    if rank is None:
        return None
    letters = [c for c in token if c.isalpha()]
    if all(c.islower() for c in letters):
        case_bits = 0.0
    elif token[:1].isupper() and all(c.islower() for c in token[1:] if c.isalpha()):
        case_bits = 1.0
    else:
        case_bits = float(len(token))
    # zxcvbn charges at most one bit per occurrence of a substituted letter, plain or not.
    subbed = {_LEET[c] for c in token.lower() if c in _LEET}
    leet_bits = float(sum(1 for c in plain if c in subbed))
    return math.log2(rank) + case_bits + leet_bits


def _is_sequence(token: str) -> bool:
    lowered = token.lower()
    for alphabet in _SEQUENCES:
        for text in (alphabet, alphabet[::-1]):
            if lowered in text:
                return True
    return False


def _pattern_cost(token: str) -> float | None:
    """The cost of ``token`` (3+ characters) as one listed pattern, or ``None``."""
    costs: list[float] = []
    if len(set(token.lower())) == 1:
        costs.append(math.log2(_class_cardinality(token) * len(token)))
    if _is_sequence(token):
        costs.append(math.log2(26) + 2 + math.log2(len(token)))
    word = _word_cost(token)
    if word is not None:
        costs.append(word)
    return min(costs) if costs else None


def estimated_bits(password: str) -> float:
    """An upper bound of zxcvbn-go's entropy for ``password`` (see the module docstring)."""
    if not password:
        return 0.0
    per_char = math.log2(_class_cardinality(password))
    best = [0.0] * (len(password) + 1)
    for end in range(1, len(password) + 1):
        best[end] = best[end - 1] + per_char
        for start in range(max(0, end - 12), end - 2):
            cost = _pattern_cost(password[start:end])
            if cost is not None:
                best[end] = min(best[end], best[start] + cost)
    return best[-1]


def is_too_weak(password: str) -> bool:
    """Tell whether zxcvbn-go surely scores ``password`` below 4 (GARM then refuses it)."""
    return estimated_bits(password) < SCORE_4_BITS
