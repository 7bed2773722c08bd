"""A corpus every Python ships: the reference manual's topics (`pydoc_data.topics`, about 465 KB of English prose
with code), one text file a topic, in three folders; with a hidden folder and a file of another kind that reading a
folder must leave out."""

from __future__ import annotations

from pathlib import Path
from pydoc_data.topics import topics


def write_corpus(root: Path, count: int | None = None) -> Path:
    """The first `count` topics (all by default) as `root/part<i % 3>/<name>.txt`; returns `root`."""
    for i, name in enumerate(sorted(topics)[:count]):
        path = root / f"part{i % 3}" / f"{name}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(topics[name])
    (root / ".git").mkdir(exist_ok=True)
    (root / ".git" / "notes.txt").write_text("hidden: not part of the corpus\n")
    (root / "part0" / "image.png").write_bytes(b"\x89PNG not text")
    return root
