#!/usr/bin/env python3
# ctest Images.BadInput: scripts/build-images.sh refuses wrong arguments and a wrong list
# with an error naming what is wrong, before building anything.
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "../../scripts/build-images.sh")

GOOD_LIST = """
[[image]]
name = "x"
ref = "docker.io/vgpu/x:{app_version}"
about = "a test image"
base = "scratch"
files = [{from = "bin/no-such-file", to = "/x", mode = "0755"}]
check = []
entrypoint = ["/x"]
"""


def main(build):
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out")
        os.makedirs(out)
        with open(os.path.join(out, "images.txt"), "w") as f:
            f.write("stale docker.io/vgpu/stale:0 /nowhere\n")  # a refused run must not leave it

        def write(name, text):
            path = os.path.join(tmp, name)
            with open(path, "w") as f:
                f.write(text)
            return path

        cases = [
            (["--build-dir", tmp, "--out", out], "is not a CMake build folder"),
            (["--build-dir", build, "--out", out, "--k8s-binary", "/bin/true"], "give one --k8s-release"),
            (["--build-dir", build, "--out", out, "--k8s-binary", "/bin/true", "--k8s-release", "1.x"],
             "--k8s-release '1.x' is not X.Y"),
            (["--build-dir", build, "--out", out, "--k8s-binary", "/bin/true", "--k8s-release", "1.34"],
             "`/bin/true version` said"),
            (["--build-dir", build, "--out", out, "--k8s-binary", tmp, "--k8s-release", "1.34"],
             "is not an executable file"),
            (["--build-dir", build, "--out", out, "--image", "no-such-image"], "--image ['no-such-image']: not among"),
            (["--build-dir", build, "--out", out, "--list", write("unknown.toml", GOOD_LIST + "colour = 1\n")],
             "unknown keys ['colour']"),
            (["--build-dir", build, "--out", out, "--list", write("base.toml", GOOD_LIST.replace("scratch", "alpine"))],
             'base must be "debian" or "scratch"'),
            (["--build-dir", build, "--out", out, "--list", write("mode.toml", GOOD_LIST.replace('"0755"', '"755"'))],
             'mode "0NNN"'),
            (["--build-dir", build, "--out", out, "--list", write("toml.toml", "[[image]\n")], "toml.toml"),
            (["--build-dir", build, "--out", out, "--list", write("type.toml", GOOD_LIST.replace('["/x"]', '"/x"'))],
             "entrypoint should be a list of str, not '/x'"),
            (["--build-dir", build, "--out", out, "--list", write("file.toml", GOOD_LIST.replace('"bin/no-such-file"', "3"))],
             'a file needs from or text'),
            (["--build-dir", build, "--out", out, "--list", write("missing.toml", GOOD_LIST)],
             "bin/no-such-file does not exist"),
        ]
        for args, want in cases:
            r = subprocess.run([SCRIPT, *args], capture_output=True, text=True, timeout=120)
            said = (r.stdout + r.stderr).strip()
            if r.returncode in (0, 77) or want not in said:
                failures.append(f"{' '.join(args)}: exit {r.returncode}, wanted an error with {want!r}; said:\n{said}")
            else:
                print(f"ok: {said.splitlines()[-1]}")
        if os.path.exists(os.path.join(out, "images.txt")):
            failures.append("a refused run left an images.txt")
    for f in failures:
        print("FAIL: " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
