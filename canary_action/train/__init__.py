"""The training side: the only part of the package that imports torch, transformers and TRL.

Import the submodules you need; this package's own import stays light on purpose, because
`canary_action.train.builtin.catalog` is read by config validation on machines without torch.
"""
