"""Absolute filesystem paths out of everything the project records or writes: runs' params and tags, and the
report's files. Stores and results/ are committed and read on other machines, where /work/main or /tmp/... mean
nothing. An absolute path, a `sqlite:///` URI or a `file://` URI to one becomes the path relative to the current
directory (the folder the command ran in)."""

import os
import re

import pandas as pd

# A `sqlite:///` or `file://` URI to an absolute path (Hydra's overrides escape the colon as `\:`).
_ABSOLUTE_URI = re.compile(r"""(?P<scheme>sqlite\\?:///|file://)(?P<path>/[^\s'"`]+)""")
# An absolute path where a path can start: the start of the text, after a space, `=`, a quote or a bracket.
_ABSOLUTE_PATH = re.compile(r"""(?<![^\s='"`(\[,])/[\w.~-][^\s'"`,;)\]]*""")


def _relative_uri(match: re.Match) -> str:
    relative = os.path.relpath(match.group("path"))
    # A file:// URI cannot be relative: the plain relative path says the same.
    return match.group("scheme") + relative if match.group("scheme").startswith("sqlite") else relative


def relative_text(text: str) -> str:
    """`text` with every absolute path in it (alone, in a command line, in a sqlite or file URI) made relative."""
    text = _ABSOLUTE_URI.sub(_relative_uri, text)
    return _ABSOLUTE_PATH.sub(lambda match: os.path.relpath(match.group(0)), text)


def relative_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with every absolute path in its text cells made relative; metrics and missing values untouched."""
    frame = frame.copy()
    for name in frame.columns:
        if not name.startswith("metrics."):
            frame[name] = frame[name].map(lambda value: relative_text(value) if isinstance(value, str) else value)
    return frame


def portable(value):
    """A value as a run records it: text with its absolute paths made relative (`relative_text`), anything else
    unchanged."""
    return relative_text(value) if isinstance(value, str) else value


def portable_tree(tree):
    """`portable` applied to every leaf of a nested dict or list (a resolved config)."""
    if isinstance(tree, dict):
        return {key: portable_tree(value) for key, value in tree.items()}
    if isinstance(tree, list):
        return [portable_tree(value) for value in tree]
    return portable(tree)
