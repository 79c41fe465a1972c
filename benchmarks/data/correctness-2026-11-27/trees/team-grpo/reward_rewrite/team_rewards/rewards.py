"""Our reward: the share of words starting with a-g."""

EARLY = frozenset("abcdefg")


def early_letters(completions, **kwargs):
    return [share(completion.split()) for completion in completions]


def share(words):
    if not words:
        return 0.0
    return sum(1 for word in words if word[0] in EARLY) / len(words)
