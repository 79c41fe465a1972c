"""The held-out evaluation: a trained model, scored by the canary's own code on examples its training never saw.

    training process (a run, or a pair's side) ──► snapshots: the trainable weights at fixed steps and at the end
        (train/snapshots.py: safetensors and a small JSON each, never a pickle)
    evaluator process (process.py; started by client.py beside the training, at idle priority)
        ──► imports, the held-out examples and their tokens while the training runs (no computing)
        ──► when told: the starting model and each snapshot, rebuilt from the trusted config and scored
        ──► results (metrics/heldout.py) for metrics.json or pair.json

The evaluator is a fresh interpreter in isolated mode (`python -I`): it imports the canary and the libraries, and
of a team's code only the reward functions of the trusted config, from the trusted tree. Whatever the pull
request's code does in its own process — its loss, its collator, a patched forward — cannot change how the
figure that judges it is computed (which weights a hostile head side presents is its own: docs/correctness.md).
Like train/, this package imports torch; plan.py and client.py do not (the lockstep coordinator, which imports no
torch, starts and reads the evaluator through them).
"""
