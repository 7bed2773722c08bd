"""A corpus assembled from package registries: `linattn corpus build OUT --debian PKG … --installed DIST …`.

Sources, each pinned by what it records:
- `--debian PKG`: Debian's binary package `PKG` (`apt-get download`, kept in the download folder and reused), its
  files unpacked with `dpkg-deb`, and the source tarballs it ships (`linux-source-6.1`: the kernel's tree) unpacked
  in turn. Recorded: the version, the `.deb`'s SHA-256, and the licences its `copyright` file names.
- `--installed DIST`: the files of an installed Python distribution (`importlib.metadata`: what `pip` recorded),
  which works offline, on a machine without a registry too (`*`: every installed one). Recorded: the version and
  its declared licence. `DIST==VERSION` refuses any other installed version: another version is another corpus,
  another tokenizer, and runs that cannot be compared with (or resumed beside) those trained on the pinned one.

The text files of every source (`DataConfig.extensions`) are copied to `OUT/<source>/<path>` in path order, each
content once: a file whose bytes an earlier one had is left out and counted (vendored copies, generated headers).
Hidden files and packaging metadata (`*.dist-info`) are left out. `OUT/MANIFEST.json` lists the sources, their
versions and licences, and the counts; `OUT/LICENCES/<source>/<path>.licence` holds every licence text a source
ships (the `copyright` file, each `LICENSE`), none of them read as a document. `linattn tokenizer train` and
`linattn train --data OUT` then split it by document, train the tokenizer on `train` and tokenise once.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path

from linattn.data.config import TEXT_EXTENSIONS
from linattn.extras import tqdm
from linattn.io import check_replaceable, give_default_modes, write_atomic

MANIFEST = "MANIFEST.json"
LICENCES = "LICENCES"  # the sources' licence texts, named `*.licence` so that no corpus reader takes them as text
_LICENCE_NAME = re.compile(r"(LICEN[CS]E|COPYING|NOTICE)", re.IGNORECASE)
_METADATA = (".dist-info", ".egg-info")
_TARBALL = re.compile(r"\.tar(\.(gz|xz|bz2))?$")


@dataclass
class Source:
    """One registry package: where its files come from, what pins it, and what it gave the corpus."""

    kind: str  # "debian" or "installed"
    name: str
    version: str
    licences: list[str]
    sha256: str | None = None  # of the downloaded archive (Debian)
    files: int = 0  # text files kept
    bytes: int = 0
    duplicates: int = 0  # text files left out: their bytes came earlier
    duplicate_bytes: int = 0


@dataclass
class _Files:
    """A source's text files as `(path inside the corpus, file on disk)`, and a folder to remove afterwards."""

    source: Source
    files: list[tuple[str, Path]]
    scratch: tempfile.TemporaryDirectory | None = field(default=None, repr=False)


def build(
    out: str | Path,
    debian: Iterable[str] = (),
    installed: Iterable[str] = (),
    *,
    downloads: str | Path | None = None,
    extensions: tuple[str, ...] = TEXT_EXTENSIONS,
    force: bool = False,
    progress: bool = False,
) -> dict:
    """Assemble the corpus in `out` (refused if it exists, unless `force`); returns the manifest it wrote.

    `downloads`: where `.deb` files are kept (default `out/../.downloads`); one there already is used as it is.
    """
    out = Path(out)
    # each source once (a name given twice would be its own duplicate)
    debian, pins = list(dict.fromkeys(debian)), installed_pins(installed)
    if not debian and not pins:
        raise ValueError("corpus build: expected at least one --debian PKG or --installed DIST")
    check_replaceable(
        out,
        force=force,
        what=f"a corpus of `linattn corpus build` (one with a {MANIFEST})",
        is_one=_is_corpus,
        name="OUT",
    )
    downloads = Path(downloads) if downloads else out.parent / ".downloads"
    endings = tuple(e.lower() for e in extensions)
    if "*" in pins:  # every installed distribution, each once, the pinned ones keeping their pins
        del pins["*"]
        names = {d.metadata["Name"].lower() for d in metadata.distributions() if d.metadata["Name"]}
        pins = {name: pins.get(name) for name in sorted(names | set(pins))}
    for name, pinned in pins.items():  # before anything is downloaded or copied
        _check_pin(name, pinned)
    installed = list(pins)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))  # beside out: renamed into place
    give_default_modes(staging)  # a corpus others may read, not mkdtemp's private folder
    parts: list[_Files] = []
    seen: set[str] = set()
    try:
        for name in debian:  # one by one, so that a failure still removes what the earlier ones unpacked
            parts.append(_debian(name, downloads))
        parts += [_installed(name) for name in installed]
        for part in parts:
            folder = f"{part.source.kind}-{part.source.name}"
            _copy(part, staging / folder, staging / LICENCES / folder, endings, seen, progress)
        manifest = _manifest([p.source for p in parts], extensions)
        write_atomic(staging / MANIFEST, json.dumps(manifest, indent=1) + "\n")
        if out.exists():
            shutil.rmtree(out)
        staging.rename(out)  # the corpus appears whole or not at all
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        for part in parts:
            if part.scratch is not None:
                part.scratch.cleanup()
    return manifest


def _is_corpus(folder: Path) -> bool:
    return folder.is_dir() and (folder / MANIFEST).is_file()


def _copy(part: _Files, into: Path, licences: Path, endings: tuple[str, ...], seen: set[str], progress: bool) -> None:
    """Copy `part`'s text files not seen before (by content) to `into`, counting what is kept and left out, and its
    licence texts to `licences` (as `<path>.licence`, so that no corpus reader takes them as text). Hidden files and
    packaging metadata (`*.dist-info`, `*.egg-info`) are no documents."""
    source = part.source
    files = []
    for rel, path in sorted(part.files):
        if not path.is_file():
            continue
        if _is_licence(rel):
            (licences / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, licences / f"{rel}.licence")
        elif rel.lower().endswith(endings) and not any(
            p.startswith(".") or p.endswith(_METADATA) for p in rel.split("/")
        ):
            files.append((rel, path))
    with tqdm(total=len(files), desc=f"{source.kind} {source.name}", unit="file", disable=not progress) as bar:
        for rel, path in files:
            bar.update(1)
            data = path.read_bytes()
            if not data:
                continue
            digest = hashlib.sha256(data).hexdigest()
            if digest in seen:
                source.duplicates, source.duplicate_bytes = source.duplicates + 1, source.duplicate_bytes + len(data)
                continue
            seen.add(digest)
            target = into / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            source.files, source.bytes = source.files + 1, source.bytes + len(data)


def _manifest(sources: list[Source], extensions: tuple[str, ...]) -> dict:
    from linattn import __version__

    return {
        "built_by": f"linattn {__version__}",
        "extensions": list(extensions),
        "files": sum(s.files for s in sources),
        "bytes": sum(s.bytes for s in sources),
        "duplicates_left_out": sum(s.duplicates for s in sources),
        "duplicate_bytes_left_out": sum(s.duplicate_bytes for s in sources),
        "sources": [asdict(s) for s in sources],
    }


def _debian(name: str, downloads: Path) -> _Files:
    """Download (or reuse) Debian's `name`, unpack it and the tarballs it ships."""
    deb = _download(name, downloads)
    scratch = tempfile.TemporaryDirectory(prefix=f"linattn-{name}-")
    root = Path(scratch.name)
    _run(["dpkg-deb", "-x", str(deb), str(root)], f"--debian {name}: cannot unpack {deb.name}")
    version = _run(["dpkg-deb", "-f", str(deb), "Version"], f"--debian {name}: no version in {deb.name}").strip()
    copyright_file = root / "usr" / "share" / "doc" / name / "copyright"
    licences = _dep5_licences(copyright_file.read_text(errors="replace")) if copyright_file.is_file() else []
    for tarball in sorted(p for p in root.rglob("*") if p.is_file() and _TARBALL.search(p.name)):
        with tarfile.open(tarball) as tar:
            tar.extractall(tarball.parent, filter="data")  # "data": no links out of the folder, no devices
        tarball.unlink()
    source = Source("debian", name, version, licences, sha256=_sha256(deb))
    files = [(p.relative_to(root).as_posix(), p) for p in root.rglob("*")]
    return _Files(source, files, scratch)


def _download(name: str, downloads: Path) -> Path:
    """The newest `.deb` of `name` in `downloads`, fetched with `apt-get download` when there is none."""
    if not re.fullmatch(r"[a-z0-9][a-z0-9+.-]+", name):
        raise ValueError(f"--debian: expected a Debian package name, got {name!r}")
    downloads.mkdir(parents=True, exist_ok=True)
    found = sorted(downloads.glob(f"{name}_*.deb"))
    if not found:
        _run(["apt-get", "download", name], f"--debian {name}: apt-get download failed", cwd=downloads)
        found = sorted(downloads.glob(f"{name}_*.deb"))
    if not found:
        raise ValueError(f"--debian {name}: apt-get download left no {name}_*.deb in {downloads}")
    return found[-1]


def _dep5_licences(text: str) -> list[str]:
    """The licence names a Debian machine-readable `copyright` file gives (`License:` fields), each once, in order."""
    names = (m.group(1).strip() for m in re.finditer(r"^License:[ \t]*(\S[^\n]*)$", text, re.MULTILINE))
    return list(dict.fromkeys(names))


_SPEC = re.compile(r"^\s*([A-Za-z0-9._-]+|\*)\s*(?:==\s*([A-Za-z0-9.+!_-]+))?\s*$")


def installed_pins(specs: Iterable[str]) -> dict[str, str | None]:
    """`--installed` specs (`DIST`, `DIST==VERSION`, `*`) -> `{name (lower case): pinned version or None}`, each name
    once; a malformed spec, or two pins of one name, is an error."""
    pins: dict[str, str | None] = {}
    for spec in specs:
        match = _SPEC.match(spec)
        if match is None or (match[1] == "*" and match[2]):
            raise ValueError(f"--installed: expected DIST or DIST==VERSION ('*': every installed one), got {spec!r}")
        name, pinned = match[1].lower(), match[2]
        if pins.get(name) and pinned and pins[name] != pinned:
            raise ValueError(f"--installed: {name} pinned twice, to {pins[name]} and {pinned}")
        pins[name] = pins.get(name) or pinned
    return pins


def _matches(version: str | None, pinned: str | None) -> bool:
    """Whether `version` (None: absent) is the `pinned` one (None: any), in any case."""
    return pinned is None or (version or "").lower() == pinned.lower()


def _check_pin(name: str, pinned: str | None) -> None:
    """The installed distribution `name` exists, in the `pinned` version if one is given."""
    try:
        version = metadata.version(name)
    except metadata.PackageNotFoundError:
        raise ValueError(f"--installed: no installed Python distribution named {name!r}") from None
    if not _matches(version, pinned):
        raise ValueError(f"--installed: {name}=={pinned} expected, {name} {version} is installed (install "
                         f"{name}=={pinned}, or copy a corpus or tokenised cache prepared with it)")  # fmt: skip


def check_manifest_pins(manifest: dict, specs: Iterable[str], where: Path) -> None:
    """The corpus whose manifest is `manifest` (in `where`) was assembled from the versions `specs` pin."""
    versions = {s["name"].lower(): s["version"] for s in manifest["sources"] if s["kind"] == "installed"}
    for name, pinned in installed_pins(specs).items():
        if not _matches(versions.get(name), pinned):
            raise ValueError(f"corpus: {where} was assembled from {name} {versions.get(name, '(absent)')}, the recipe "
                             f"pins {pinned}; remove it to assemble it again")  # fmt: skip


def _installed(name: str) -> _Files:
    """The files `pip` recorded for the installed distribution `name`."""
    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        raise ValueError(f"--installed: no installed Python distribution named {name!r}") from None
    meta = dist.metadata
    declared = meta.get("License-Expression") or meta.get("License") or ""
    licences = [declared.splitlines()[0].strip()] if declared.strip() else []
    licences += [c.split("::")[-1].strip() for c in meta.get_all("Classifier") or [] if c.startswith("License ::")]
    source = Source("installed", meta["Name"], dist.version, list(dict.fromkeys(licences)))
    # paths outside the distribution's folder (scripts in ../../bin) or absolute ones are not its sources
    files = [
        (f.as_posix(), Path(dist.locate_file(f)))
        for f in dist.files or []
        if ".." not in f.parts and not f.is_absolute()
    ]
    return _Files(source, files)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _run(command: list[str], failure: str, cwd: Path | None = None) -> str:
    try:
        done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise ValueError(f"{failure}: {command[0]} is not installed (a Debian tool)") from None
    if done.returncode != 0:
        raise ValueError(f"{failure}: {done.stderr.strip()[-500:]}")
    return done.stdout


def summary(manifest: dict) -> Iterator[str]:
    """One line a source: `kind name version (licences): files, bytes`."""
    for s in manifest["sources"]:
        licences = ", ".join(s["licences"]) or "licence not stated"
        yield f"{s['kind']} {s['name']} {s['version']} ({licences}): {s['files']:,} files, {s['bytes']:,} bytes"


def _is_licence(rel: str) -> bool:
    """A licence text: a file named for one (`LICENSE`, `COPYING.md`, `dragon4_LICENSE.txt`, …) or a Debian package's
    `usr/share/doc/<pkg>/copyright`."""
    name = rel.rsplit("/", 1)[-1]
    return bool(_LICENCE_NAME.search(name)) or (rel.startswith("usr/share/doc/") and name == "copyright")
