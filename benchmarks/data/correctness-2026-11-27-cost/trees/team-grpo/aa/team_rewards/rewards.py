"""Our reward: the share of words starting with a-g."""

EARLY = frozenset("abcdefg")


def early_letters(completions, **kwargs):
    scores = []
    for completion in completions:
        words = completion.split()
        scores.append(sum(word[0] in EARLY for word in words) / len(words) if words else 0.0)
    return scores
