"""What the images and `make venv` install, checked offline.

Every pulled image of deploy/ is pinned by digest or listed, with its reason, in
deploy/pin-images' FLOATING (this test prints the list when it changes). The lock files
under requirements/ pin every package with its hashes, cover every dependency of
pyproject.toml, agree with each other, and sit above the floors set for the known
advisories; the Dockerfiles install from them alone.
"""

from __future__ import annotations

import re
import tomllib
from importlib.machinery import SourceFileLoader
from pathlib import Path
from types import ModuleType

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[3]
LOCKS = ROOT / "requirements"
# Each image built here and the lock it installs (besides build.txt).
IMAGE_LOCKS = {ROOT / "deploy" / "Dockerfile": "runtime.txt",
               ROOT / "deploy" / "compose" / "api.Dockerfile": "api.txt",
               ROOT / "deploy" / "compose" / "mcp.Dockerfile": "mcp.txt"}
DOCKERFILES = list(IMAGE_LOCKS)
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))

# The fixed release of the newest advisory known for each (GHSA/CVE in pyproject.toml).
ADVISORY_FLOORS = {
    "starlette": Version("1.6.0"),   # CVE-2026-48710 (1.0.1), CVE-2026-54283 (1.3.1), ...
    "aiohttp": Version("3.14.3"),    # CVE-2026-69243 (3.14.2), CVE-2026-69244 (3.14.3)
    "setuptools": Version("83.0.0"),  # CVE-2026-59890; CVE-2025-47273 (78.1.1)
    "pyjwt": Version("2.13.0"),      # CVE-2026-32597 (2.12.0), CVE-2026-48522..48526
}


def _pin_images() -> ModuleType:
    loader = SourceFileLoader("pin_images", str(ROOT / "deploy" / "pin-images"))
    module = ModuleType(loader.name)
    module.__file__ = loader.path
    loader.exec_module(module)
    return module


# --- images ----------------------------------------------------------------------------


def test_every_pulled_image_is_pinned_by_digest_or_listed_as_floating() -> None:
    pin_images = _pin_images()
    found = [image for path in pin_images.image_files() for image in pin_images.find_images(path)]
    assert len(found) >= 15  # compose, observability, Kubernetes, both Dockerfiles
    floating = pin_images.floating_images()
    listing = "\n".join(f"  {image}: {pin_images.FLOATING.get(image, 'NOT LISTED')}"
                        for image in sorted(floating))
    print(f"images still on a tag:\n{listing}")
    assert set(floating) == set(pin_images.FLOATING), (
        f"floating images differ from deploy/pin-images FLOATING:\n{listing}")


def test_pin_images_pins_tags_and_leaves_the_rest() -> None:
    pin_images = _pin_images()
    digest = "sha256:" + "ab" * 32
    asked: list[str] = []

    def resolver(image: str) -> str:
        asked.append(image)
        return digest

    text = ("FROM python:3.11-slim AS build\n"
            "    image: &tempo grafana/tempo:2.6.1\n"
            "    image: *tempo\n"
            "          image: memfleet:latest\n"
            f"    image: valkey/valkey:8.1.10@{digest}\n"
            "    image: ${MEMFLEET_IMAGE}\n"
            "      - image: prom/prometheus:v2.55.1\n")
    pinned = pin_images.pin_text(text, resolver)
    assert asked == ["python:3.11-slim", "grafana/tempo:2.6.1", "prom/prometheus:v2.55.1"]
    assert f"FROM python:3.11-slim@{digest} AS build\n" in pinned
    assert f"image: &tempo grafana/tempo:2.6.1@{digest}\n" in pinned
    assert f"- image: prom/prometheus:v2.55.1@{digest}\n" in pinned
    for untouched in ("image: *tempo\n", "image: memfleet:latest\n",
                      "image: ${MEMFLEET_IMAGE}\n", f"valkey/valkey:8.1.10@{digest}\n"):
        assert untouched in pinned


# --- lock files --------------------------------------------------------------------------


def _entries(path: Path) -> dict[str, tuple[str, list[str]]]:
    """name -> (version, hashes) of a pip-compile --generate-hashes file."""
    text = path.read_text("utf-8").replace("\\\n", " ")
    out: dict[str, tuple[str, list[str]]] = {}
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = re.match(r"^([A-Za-z0-9._-]+)==(\S+)", line)
        assert match, f"{path.name}: not a pinned requirement: {line[:80]}"
        name = re.sub(r"[-_.]+", "-", match[1]).lower()
        out[name] = (match[2], re.findall(r"--hash=sha256:([0-9a-f]{64})", line))
    return out


LOCK_FILES = ["dev.txt", "runtime.txt", "api.txt", "mcp.txt", "build.txt"]


def test_every_lock_file_is_compiled_checked_and_documented() -> None:
    """A lock file outside LOCK_FILES would escape every test below."""
    assert {p.name for p in LOCKS.glob("*.txt")} == set(LOCK_FILES)
    compile_script = (LOCKS / "compile").read_text("utf-8")
    readme = (LOCKS / "README.md").read_text("utf-8")
    for name in LOCK_FILES:
        assert f"-o requirements/{name}" in compile_script, name
        assert f"| `{name}` |" in readme, name


@pytest.mark.parametrize("name", LOCK_FILES)
def test_every_locked_package_is_pinned_with_its_hashes(name: str) -> None:
    entries = _entries(LOCKS / name)
    assert entries
    for package, (_, hashes) in entries.items():
        assert hashes, f"{name}: {package} has no hash"


def test_the_lock_files_agree_on_every_version() -> None:
    versions: dict[str, tuple[str, str]] = {}
    for name in LOCK_FILES:
        for package, (version, _) in _entries(LOCKS / name).items():
            seen = versions.setdefault(package, (version, name))
            assert seen[0] == version, f"{package}: {seen[1]} has {seen[0]}, {name} {version}"


def _requirements(group: str) -> list[Requirement]:
    listed = (PYPROJECT["project"]["dependencies"] if group == "runtime"
              else PYPROJECT["project"]["optional-dependencies"][group])
    return [r for r in map(Requirement, listed) if r.name != "memfleet"]


@pytest.mark.parametrize(("lock", "groups"), [
    ("runtime.txt", ["runtime"]),
    ("api.txt", ["runtime", "api"]),
    ("mcp.txt", ["runtime", "api", "mcp"]),
    ("dev.txt", ["runtime", "embedded", "api", "mcp", "dev"]),  # memfleet[embedded,api,mcp]
])
def test_each_lock_covers_its_dependencies_within_their_bounds(lock: str,
                                                              groups: list[str]) -> None:
    entries = _entries(LOCKS / lock)
    for group in groups:
        for requirement in _requirements(group):
            if requirement.marker is not None and not requirement.marker.evaluate():
                continue
            name = re.sub(r"[-_.]+", "-", requirement.name).lower()
            assert name in entries, f"{name} is not in {lock}: run `make lock`"
            version = entries[name][0]
            assert requirement.specifier.contains(version, prereleases=True), (
                f"{lock}: {name}=={version} outside {requirement.specifier}: run `make lock`")


def test_the_build_lock_meets_the_build_system_floor() -> None:
    setuptools = Requirement(PYPROJECT["build-system"]["requires"][0])
    assert setuptools.name == "setuptools"
    assert setuptools.specifier.contains(_entries(LOCKS / "build.txt")["setuptools"][0])


def test_the_floors_exclude_the_known_advisories() -> None:
    """In every group that names the package (the api and mcp extras both name
    starlette and PyJWT): an install of either extra alone meets the floor."""
    requirements = [r for group in ("runtime", "api", "mcp") for r in _requirements(group)]
    requirements.append(Requirement(PYPROJECT["build-system"]["requires"][0]))
    for name, fixed in ADVISORY_FLOORS.items():
        named = [r for r in requirements if r.name.lower() == name]
        assert named, name
        for requirement in named:
            floors = [Version(s.version) for s in requirement.specifier
                      if s.operator in (">=", "==", "~=")]
            assert floors and min(floors) >= fixed, f"{requirement}: floor below {fixed}"


# --- the images install from the lock alone --------------------------------------------


@pytest.mark.parametrize("path", DOCKERFILES, ids=[p.name for p in DOCKERFILES])
def test_the_images_install_only_from_the_lock(path: Path) -> None:
    text = path.read_text("utf-8").replace("\\\n", " ")
    installs = re.findall(r"pip (install|wheel)([^&\n]*)", text)
    assert installs
    for verb, args in installs:
        if verb == "wheel":
            assert "--no-deps" in args and "--no-build-isolation" in args, args
        elif "--require-hashes" in args:
            locked = re.search(r"-r\s+(\S+)", args)
            assert locked, args
            assert (LOCKS / Path(locked[1]).name).exists(), args
        else:  # memfleet's own wheel, built in the first stage
            assert "--no-deps" in args and "/wheels/" in args, args
    copied = re.findall(r"COPY\s+((?:requirements/\S+\s+)+)", text)
    for group in copied:
        for name in group.split():
            assert (ROOT / name).exists(), name


@pytest.mark.parametrize("path", DOCKERFILES, ids=[p.name for p in DOCKERFILES])
def test_each_image_installs_its_own_lock(path: Path) -> None:
    """The mcp image with api.txt would build, and `memfleet mcp` would exit at start."""
    text = path.read_text("utf-8").replace("\\\n", " ")
    installed = {Path(m).name for m in re.findall(r"--require-hashes\s+-r\s+(\S+)", text)}
    assert installed == {"build.txt", IMAGE_LOCKS[path]}
