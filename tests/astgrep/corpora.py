"""Real code in every language ast-grep has built in, from the registries at pinned versions.

Each corpus is a published package (an npm tarball, a PyPI sdist, a Debian binary package whose
files are sources), fetched once with the registry's own client, checked against its sha256 and
unpacked in the test cache (`real_projects.CACHE`); a language's corpus is a copy of some of its
files, chosen in path order up to a byte budget so that the comparison stays fast.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import attrs
from real_projects import (
    CJSON_SHA256,
    PFLAG_SOURCE,
    cache_lock,
    click_pristine,
    fetch_once,
    pypi_sdist,
    rxjs_pristine,
    unpacked,
)

BUDGET = 36_000  # bytes of code per language


def npm_package(npm: str, spec: str, tarball: str, sha256: str) -> Path:
    """An npm tarball (`npm pack name@version`), unpacked: its package/ folder."""
    return unpacked(fetch_once(tarball, sha256, [npm, "pack", spec, "--silent"]), "package")


def pypi_sdist_unpacked(spec: str, archive: str, sha256: str, top: str) -> Path:
    """A PyPI sdist (fetched by uv's pip, as every fixture: the project's environment has no pip), unpacked."""
    return unpacked(pypi_sdist(spec, archive, sha256), top)


def debian_deb(package: str, version: str, deb: str, sha256: str) -> Path:
    """A Debian binary package (`apt-get download`, the file ``deb``), its files extracted (`dpkg-deb -x`)."""
    archive = fetch_once(deb, sha256, ["apt-get", "download", f"{package}={version}"])
    dest = archive.with_name(archive.name + ".d")
    with cache_lock(dest.name):
        if not dest.is_dir():
            tmp = dest.with_name(dest.name + ".tmp")
            shutil.rmtree(tmp, ignore_errors=True)
            subprocess.run(
                ["dpkg-deb", "-x", str(archive), str(tmp)], check=True, capture_output=True, timeout=120
            )
            tmp.rename(dest)
    return dest


def cjson_pristine() -> Path:
    from real_projects import debian_source

    archive = debian_source("cjson", "cjson_1.7.15.orig.tar.gz", CJSON_SHA256)
    return unpacked(archive, "cJSON-1.7.15")


@attrs.frozen
class Corpus:
    """Where a language's code comes from: ``fetch(npm)`` gives the unpacked package, ``under`` the
    folder inside it, ``suffixes`` the files taken (renamed to ``rename`` when the package names
    them without an extension, as bash completions are)."""

    origin: str  # said in the test output
    fetch: Callable[[str], Path]
    under: str
    suffixes: tuple[str, ...]
    rename: str = ""
    budget: int = BUDGET

    def copy(self, npm: str, dest: Path) -> list[Path]:
        base = self.fetch(npm) / self.under
        taken, size = [], 0
        for path in sorted(p for p in base.rglob("*") if p.is_file() and not p.is_symlink()):
            if self.suffixes and not path.name.endswith(self.suffixes):
                continue
            if self.rename and path.suffix:
                continue
            n = path.stat().st_size
            if size + n > self.budget:
                continue
            rel = path.relative_to(base)
            target = dest / (str(rel) + self.rename)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
            taken.append(target)
            size += n
        return taken


def _npm(spec: str, tarball: str, sha256: str) -> Callable[[str], Path]:
    return lambda npm: npm_package(npm, spec, tarball, sha256)


def _deb(package: str, version: str, arch: str, sha256: str) -> Callable[[str], Path]:
    deb = f"{package}_{version.replace(':', '%3a')}_{arch}.deb"
    return lambda npm: debian_deb(package, version, deb, sha256)


_EXPO = _npm(
    "expo-modules-core@58.1.0",
    "expo-modules-core-58.1.0.tgz",
    "bb1bcaac52c1409fa58bb7268bae8eed9b472acb91c1653687013890e1a27524",
)
_HLINT = _deb(
    "hlint", "3.3.6-1+b4", "amd64", "143775ac227079804e29618f3ed2e55dd619dea98226eb62cda97a6598be9170"
)

CORPORA: dict[str, Corpus] = {
    "python": Corpus("click 8.5.1 (PyPI)", lambda npm: click_pristine(), "src/click", (".py",)),
    "javascript": Corpus(
        "express 5.3.0 (npm)",
        _npm(
            "express@5.3.0",
            "express-5.3.0.tgz",
            "62450d99e36dc393295f1ddd93cb9291e658c169f3b700b0110c1ae8fa799930",
        ),
        "",
        (".js",),
    ),
    "typescript": Corpus("rxjs 7.8.2 (npm)", rxjs_pristine, "src/internal", (".ts",)),
    "tsx": Corpus(
        "react-native-screens 4.30.1 (npm)",
        _npm(
            "react-native-screens@4.30.1",
            "react-native-screens-4.30.1.tgz",
            "04593f281d706615907e8df114288daa5145c4f5360c4743356dd460e979d23a",
        ),
        "src",
        (".tsx",),
    ),
    "go": Corpus("spf13/pflag (Debian)", lambda npm: PFLAG_SOURCE, "", (".go",)),
    "rust": Corpus(
        "memchr 2.5.0 (Debian librust-memchr-dev)",
        _deb(
            "librust-memchr-dev",
            "2.5.0-1",
            "amd64",
            "9b0f9497acbf8d8e706181a248a31624c6215ce86353a972d19d0cf0252f4183",
        ),
        "usr/share/cargo/registry/memchr-2.5.0/src",
        (".rs",),
    ),
    "c": Corpus("cJSON 1.7.15 (Debian source)", lambda npm: cjson_pristine(), "", (".c", ".h")),
    "cpp": Corpus(
        "nlohmann-json 3.11.2 (Debian)",
        _deb(
            "nlohmann-json3-dev",
            "3.11.2-2",
            "all",
            "ec57940def6b6186c30be0e0ee81d1e58f86d11a54a145b28686a1e3e4aae801",
        ),
        "usr/include/nlohmann/detail",
        (".hpp",),
    ),
    "java": Corpus("expo-modules-core 58.1.0 (npm)", _EXPO, "android", (".java",)),
    "kotlin": Corpus("expo-modules-core 58.1.0 (npm)", _EXPO, "android/src/main/java", (".kt",)),
    "swift": Corpus("expo-modules-core 58.1.0 (npm)", _EXPO, "ios", (".swift",)),
    "csharp": Corpus(
        "pythonnet 3.2.1 (PyPI)",
        lambda npm: pypi_sdist_unpacked(
            "pythonnet==3.2.1",
            "pythonnet-3.2.1.tar.gz",
            "c86e8dd31268f6e0c48fcc4d6030041316d49ed2764a1cb6ea8c37876e07c572",
            "pythonnet-3.2.1",
        ),
        "src/runtime",
        (".cs",),
    ),
    "php": Corpus(
        "PHP-Parser 4.15.4 (Debian php-parser)",
        _deb(
            "php-parser",
            "4.15.4-1",
            "all",
            "70df30d5fac8d4dfd78e9eb06efdb3455c4909b706b170630f7ce7f948501f7b",
        ),
        "usr/share/php/PhpParser",
        (".php",),
    ),
    "ruby": Corpus(
        "thor 1.2.1 (Debian ruby-thor)",
        _deb(
            "ruby-thor", "1.2.1-2", "all", "509715d16039ee7336531718e2497d0f81ae125b9ee53f321dd909c2f03fd2e1"
        ),
        "usr/share/rubygems-integration/all/gems/thor-1.2.1/lib",
        (".rb",),
    ),
    "lua": Corpus(
        "penlight 1.13.1 (Debian lua-penlight)",
        _deb(
            "lua-penlight",
            "1.13.1-3",
            "all",
            "69918434ee650d06aa470d49ba05a1a16ae43e66b8216e135cc5075f7d5d9ff3",
        ),
        "usr/share/lua/5.1/pl",
        (".lua",),
    ),
    "bash": Corpus(
        "bash-completion 2.11 (Debian)",
        _deb(
            "bash-completion",
            "1:2.11-6",
            "all",
            "8f79fbfae64b85ea54f63c6db688f2cd8cb079f40b6164f8b1f9451e37790549",
        ),
        "usr/share/bash-completion",
        (),
        rename=".sh",
    ),
    "css": Corpus(
        "bootstrap 5.3.9 (npm)",
        _npm(
            "bootstrap@5.3.9",
            "bootstrap-5.3.9.tgz",
            "06bdf78289c3c12ea99d40df84eedf6278c724c73eebf38f11f3a65b44ec8c94",
        ),
        "dist/css",
        ("grid.css", "reboot.css"),
    ),
    "html": Corpus(
        "reveal.js 6.0.2 (npm)",
        _npm(
            "reveal.js@6.0.2",
            "reveal.js-6.0.2.tgz",
            "2f0c20bfb02447a198a1ebe8a8c097a5437d035caa38f2820bf4ba887a3eac91",
        ),
        "",
        (".html",),
    ),
    "json": Corpus(
        "mdn-data 2.37.2 (npm)",
        _npm(
            "mdn-data@2.37.2",
            "mdn-data-2.37.2.tgz",
            "eaeb59485e6605391ab786ed499cc054f84acb55fa0727e8649da031bdfff1b8",
        ),
        "",
        (".json",),
    ),
    "yaml": Corpus("hlint 3.3.6 (Debian)", _HLINT, "", (".yaml",), budget=70_000),
    "haskell": Corpus("hlint 3.3.6 (Debian)", _HLINT, "", (".hs",)),
    "nix": Corpus(
        "node2nix 1.11.0 (npm)",
        _npm(
            "node2nix@1.11.0",
            "node2nix-1.11.0.tgz",
            "0e2b0afbbf58d69c485ce5859dbeaa72992fbbd611dde1179304d5b3a2e2398b",
        ),
        "",
        (".nix",),
    ),
    "solidity": Corpus(
        "OpenZeppelin contracts 5.7.0 (npm)",
        _npm(
            "@openzeppelin/contracts@5.7.0",
            "openzeppelin-contracts-5.7.0.tgz",
            "ab2a1b476b9e2d84225454eca21783805db5754b5f8dfb3d6fca05341b00b8ea",
        ),
        "",
        (".sol",),
    ),
}
# ast-grep's languages with no corpus here: no registry reached by the tests serves their code
# (Hex, Hackage, Maven Central, pub.dev and the Terraform registry are not reached)
NO_CORPUS = ("dart", "elixir", "hcl", "scala")
