"""`linattn corpus build`: sources copied with each content once, a manifest that pins them, nothing overwritten.

The Debian path runs on a `.deb` the test builds with `dpkg-deb` and places in the download folder, so nothing is
downloaded; it is skipped where `dpkg-deb` is missing.
"""

import io
import json
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from linattn.cli import main
from linattn.data.assemble import LICENCES, MANIFEST, build, check_manifest_pins, installed_pins
from linattn.data.config import DataConfig
from linattn.data.corpus import read_corpus

needs_dpkg = pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="dpkg-deb (Debian) not installed")


def make_deb(folder, name="toy-source", version="1.2-3"):
    """A Debian package shipping a source tarball (as linux-source does), a loose text file and a copyright file."""
    root = folder / "build"
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN" / "control").write_text(
        f"Package: {name}\nVersion: {version}\nArchitecture: all\nMaintainer: t <t@t>\nDescription: toy\n"
    )
    doc = root / "usr" / "share" / "doc" / name
    doc.mkdir(parents=True)
    (doc / "copyright").write_text(
        "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n\n"
        "Files: *\nLicense: GPL-2\n\nFiles: lib/*\nLicense: MIT\n\nFiles: x/*\nLicense: GPL-2\n"
    )
    (doc / "README.txt").write_text("shared text\n")
    src = root / "usr" / "src"
    src.mkdir(parents=True)
    with tarfile.open(src / f"{name}.tar.xz", "w:xz") as tar:
        for path, text in {"tree/main.c": "int main(void) { return 0; }\n", "tree/copy.h": "shared text\n"}.items():
            data = text.encode()
            info = tarfile.TarInfo(path)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    downloads = folder / "downloads"
    downloads.mkdir()
    subprocess.run(["dpkg-deb", "--build", str(root), str(downloads / f"{name}_{version}_all.deb")], check=True,
                   capture_output=True)  # fmt: skip
    return downloads


@needs_dpkg
def test_a_debian_package_and_its_tarballs_become_documents_each_content_once(tmp_path):
    downloads = make_deb(tmp_path)
    manifest = build(tmp_path / "corpus", ["toy-source"], downloads=downloads)
    (source,) = manifest["sources"]
    assert (source["kind"], source["name"], source["version"]) == ("debian", "toy-source", "1.2-3")
    assert source["licences"] == ["GPL-2", "MIT"]
    assert len(source["sha256"]) == 64
    # copy.h repeats README.txt's bytes; README.txt comes first in path order (usr/share < usr/src) and stays
    assert (source["files"], source["duplicates"]) == (2, 1)
    kept = sorted(p.relative_to(tmp_path / "corpus").as_posix() for p in (tmp_path / "corpus").rglob("*.*"))
    assert "debian-toy-source/usr/share/doc/toy-source/README.txt" in kept
    assert "debian-toy-source/usr/src/tree/main.c" in kept
    assert not any(k.endswith("copy.h") or k.endswith(".tar.xz") for k in kept)
    licence = tmp_path / "corpus" / LICENCES / "debian-toy-source" / "usr/share/doc/toy-source/copyright.licence"
    assert licence.read_text().startswith("Format: https://www.debian.org")
    assert json.loads((tmp_path / "corpus" / MANIFEST).read_text()) == manifest
    # the corpus reader takes the documents, not the manifest or the licences
    names = {d.name for d in read_corpus(tmp_path / "corpus", DataConfig()).documents}
    assert names == {"debian-toy-source/usr/share/doc/toy-source/README.txt", "debian-toy-source/usr/src/tree/main.c"}


def test_an_installed_distribution_gives_its_files_version_and_licence(tmp_path):
    manifest = build(tmp_path / "corpus", installed=["tqdm", "TQDM"])  # one source, however it is spelled
    (source,) = manifest["sources"]
    assert source["kind"] == "installed" and source["version"] and source["licences"]
    assert source["files"] > 5 and manifest["files"] == source["files"] and source["duplicates"] == 0
    assert (tmp_path / "corpus" / "installed-tqdm" / "tqdm" / "std.py").is_file()
    # its metadata is no document; its licence text is kept, under its own path
    assert not list((tmp_path / "corpus" / "installed-tqdm").glob("*.dist-info"))
    assert [p.name for p in (tmp_path / "corpus" / LICENCES / "installed-tqdm").rglob("*.licence")] == [
        "LICENCE.licence"
    ]
    assert oct((tmp_path / "corpus").stat().st_mode & 0o777) == "0o755"


def test_another_installed_version_is_refused_and_leaves_nothing(tmp_path):
    from importlib import metadata

    version = metadata.version("tqdm")
    pinned = build(tmp_path / "corpus", installed=[f"TQDM == {version.upper()}"])  # names and versions: any case
    assert [(s["name"].lower(), s["version"]) for s in pinned["sources"]] == [("tqdm", version)]
    with pytest.raises(ValueError, match=rf"tqdm==0\.0\.1 expected, tqdm {re.escape(version)} is installed"):
        build(tmp_path / "other", installed=["tqdm==0.0.1"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus"]  # no corpus, no staging folder


@pytest.mark.parametrize("specs", [["tqdm===1"], ["tqdm=="], ["tqdm>=4"], ["*==1"], ["tqdm==1", "TQDM==2"]])
def test_a_malformed_or_contradictory_pin_is_refused(tmp_path, specs):
    with pytest.raises(ValueError, match="^--installed: (expected DIST or DIST==VERSION|tqdm pinned twice)"):
        build(tmp_path / "corpus", installed=specs)


def test_every_installed_distribution_keeps_the_pins_given_beside_it():
    assert installed_pins(["*", "TQDM==1.0", "tqdm"]) == {"*": None, "tqdm": "1.0"}
    with pytest.raises(ValueError, match="tqdm==0.0.1 expected"):
        build("/nonexistent/corpus", installed=["*", "tqdm==0.0.1"])


def test_an_assembled_corpus_is_checked_against_the_pins(tmp_path):
    manifest = {"sources": [{"kind": "installed", "name": "TQDM", "version": "4.1"}]}
    check_manifest_pins(manifest, ["tqdm==4.1", "sympy"], tmp_path)
    with pytest.raises(ValueError, match=r"assembled from tqdm 4\.1, the recipe pins 4\.2; remove it"):
        check_manifest_pins(manifest, ["tqdm==4.2"], tmp_path)
    with pytest.raises(ValueError, match=r"assembled from numpy \(absent\), the recipe pins 2"):
        check_manifest_pins(manifest, ["numpy==2"], tmp_path)


def test_star_takes_every_installed_distribution_once(tmp_path):
    from importlib import metadata

    manifest = build(tmp_path / "corpus", installed=["*"])
    names = [s["name"].lower() for s in manifest["sources"]]
    assert len(names) == len(set(names)) == len({d.metadata["Name"].lower() for d in metadata.distributions()})
    assert "torch" in names and manifest["bytes"] > 10_000_000


def test_an_existing_corpus_is_not_replaced_without_force(tmp_path):
    out = tmp_path / "corpus"
    build(out, installed=["tqdm"])
    (out / "mine.txt").write_text("kept")
    with pytest.raises(ValueError, match=r"^OUT: .* holds a corpus of .* already \(--force replaces it\)"):
        build(out, installed=["tqdm"])
    assert (out / "mine.txt").read_text() == "kept"
    build(out, installed=["tqdm"], force=True)
    assert not (out / "mine.txt").exists()


def test_force_replaces_only_a_corpus_and_never_the_current_folder(tmp_path, monkeypatch):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "precious.txt").write_text("kept")
    with pytest.raises(ValueError, match=r"^OUT: .* exists and is not a corpus of `linattn corpus build`"):
        build(mine, installed=["tqdm"], force=True)
    (tmp_path / "file").write_text("kept")
    with pytest.raises(ValueError, match=r"^OUT: .* exists and is not a corpus"):
        build(tmp_path / "file", installed=["tqdm"], force=True)
    corpus = tmp_path / "corpus"
    build(corpus, installed=["tqdm"])
    monkeypatch.chdir(corpus / "installed-tqdm")
    with pytest.raises(ValueError, match=r"^OUT: .* holds the current folder: not replaced"):
        build(corpus, installed=["tqdm"], force=True)
    (tmp_path / "empty").mkdir()
    monkeypatch.chdir(tmp_path / "empty")
    with pytest.raises(ValueError, match=r"^OUT: \. holds the current folder: not replaced"):
        build(Path("."), installed=["tqdm"])  # even empty: it would be renamed away under the shell
    assert (mine / "precious.txt").read_text() == "kept" and (corpus / MANIFEST).is_file()


def test_bad_sources_get_clear_errors(tmp_path, capsys):
    with pytest.raises(ValueError, match="^corpus build: expected at least one --debian PKG or --installed DIST"):
        build(tmp_path / "a")
    with pytest.raises(ValueError, match="^--installed: no installed Python distribution named 'no-such-dist-x'"):
        build(tmp_path / "b", installed=["no-such-dist-x"])
    with pytest.raises(ValueError, match="^--debian: expected a Debian package name, got 'Bad Name'"):
        build(tmp_path / "c", ["Bad Name"], downloads=tmp_path)
    assert not any(p.name.startswith(".") for p in tmp_path.iterdir())  # no staging folder left behind
    assert main(["corpus", "build", str(tmp_path / "d"), "--installed", "no-such-dist-x"]) != 0
    assert "no installed Python distribution" in capsys.readouterr().err
