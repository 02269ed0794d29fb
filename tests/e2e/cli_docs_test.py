#!/usr/bin/env python3
"""End-to-end tests: `overlapprof --version`/`-V` (version and git revision), and the man page and
bash/zsh completions generated from the CLI's own help (scripts/gen_cli_docs.py, docs/install.md):
every subcommand and every option its help lists is in each of them, and the bash completion
completes them in a real bash.

Usage: cli_docs_test.py OVERLAPPROF SHARE_DIR SOURCE_DIR (ctest passes them; SHARE_DIR is where the
build wrote overlapprof.1, overlapprof.bash and _overlapprof).
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

CLI = SHARE = SOURCE = None


def sh(argv, **kw):
    p = subprocess.run(argv, capture_output=True, text=True, timeout=120, **kw)
    return p.returncode, p.stdout, p.stderr


def subcommands_and_options():
    """{subcommand: [option names]} read from the help, as a user sees it."""
    _, top, _ = sh([CLI, "--help"])
    subs = re.findall(r"(?m)^  ([a-z]+) {2,}", top.split("Subcommands:", 1)[1])
    out = {}
    for s in subs:
        _, h, _ = sh([CLI, s, "--help"])
        opts = []
        for line in h.split("Options:", 1)[1].splitlines():
            m = re.match(r"^  (-\S+)", line)
            if m:
                opts += m.group(1).split(",")
        out[s] = opts
    return out


class VersionTest(unittest.TestCase):
    def test_version_and_short_flag(self):
        rc, out, err = sh([CLI, "--version"])
        self.assertEqual(rc, 0, err)
        rc2, out2, _ = sh([CLI, "-V"])
        self.assertEqual(rc2, 0)
        self.assertEqual(out, out2)
        m = re.fullmatch(r"overlapprof (\d+\.\d+\.\d+) \(git ([0-9a-f]{12}(?:-dirty)?|unknown)\)\n", out)
        self.assertTrue(m, out)
        with open(os.path.join(SOURCE, "CMakeLists.txt")) as f:
            self.assertIn(f"project(overlapprof VERSION {m.group(1)} ", f.read())
        git = shutil.which("git")
        if git and os.path.exists(os.path.join(SOURCE, ".git")):
            # A commit of this repository (the build's; HEAD may have moved on since the build).
            rev = m.group(2).removesuffix("-dirty")
            self.assertNotEqual(rev, "unknown")
            rc, full, err = sh([git, "-C", SOURCE, "rev-parse", "--verify", "--quiet", rev + "^{commit}"])
            self.assertEqual(rc, 0, f"{rev} is no commit of {SOURCE}: {err}")
            self.assertTrue(full.startswith(rev))

    def test_revision_is_unknown_outside_git(self):
        tmp = tempfile.mkdtemp(prefix="overlapprof-rev-")
        try:
            out = os.path.join(tmp, "git_revision.h")
            rc, _, err = sh(["cmake", f"-DSOURCE_DIR={tmp}", f"-DOUT={out}", f"-DGIT={shutil.which('git') or ''}",
                             "-P", os.path.join(SOURCE, "cmake", "GitRevision.cmake")])
            self.assertEqual(rc, 0, err)
            with open(out) as f:
                self.assertIn('kGitRevision = "unknown";', f.read())
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


class UnknownOptionTest(unittest.TestCase):
    def test_unknown_top_level_option_is_named(self):
        rc, out, err = sh([CLI, "--bogus"])
        self.assertEqual(rc, 2, err)
        self.assertEqual(out, "")
        self.assertIn("error: unknown option '--bogus' (before the command only --help and --version", err)
        self.assertEqual(err.count("\n"), 1, err)

    def test_run_unknown_option_is_not_taken_for_the_command(self):
        tmp = tempfile.mkdtemp(prefix="overlapprof-bogus-")
        try:
            marker = os.path.join(tmp, "ran")
            for argv in (["run", "--bogus", "--", "touch", marker], ["run", "--bogus", "touch", marker],
                         ["run", "-o", os.path.join(tmp, "o"), "--bogus=1", "--", "touch", marker]):
                rc, _, err = sh([CLI, *argv], cwd=tmp)
                self.assertEqual(rc, 2, err)
                self.assertRegex(err, r"error: run: unknown option '--bogus(=1)?' \(see overlapprof run --help\)")
                self.assertNotIn("cannot run", err)
                self.assertFalse(os.path.exists(marker))
                self.assertEqual(os.listdir(tmp), [])  # no output directory was made
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


class GeneratedDocsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cli = subcommands_and_options()
        assert cls.cli and all(cls.cli.values()), cls.cli

    def read(self, name):
        with open(os.path.join(SHARE, name)) as f:
            return f.read()

    def test_man_page_lists_every_subcommand_and_option(self):
        man = self.read("overlapprof.1")
        self.assertTrue(man.startswith(".TH OVERLAPPROF 1 "), man[:80])
        for sub, opts in self.cli.items():
            self.assertIn(f".SS {sub}\n", man)
            section = man.split(f".SS {sub}\n", 1)[1].split(".SS ", 1)[0].split(".SH ", 1)[0]
            for o in opts:
                if o not in ("-h", "--help"):
                    self.assertIn("\\fB" + o.replace("-", "\\-"), section.replace(", ", "\\fB"), (sub, o))
        _, version, _ = sh([CLI, "--version"])
        self.assertIn(version.split()[1], man.splitlines()[0])

    def test_man_page_renders_without_warnings(self):
        man = shutil.which("man")
        if not man or not shutil.which("groff"):
            self.skipTest("man/groff not installed")
        rc, out, err = sh([man, "--warnings", "-l", os.path.join(SHARE, "overlapprof.1")],
                          env=dict(os.environ, MANWIDTH="100", MAN_KEEP_FORMATTING="0", MANPAGER="cat", PAGER="cat"))
        self.assertEqual(rc, 0, err)
        self.assertEqual(err.strip(), "")
        self.assertIn("COMMANDS", re.sub(".\b", "", out))  # bold/underline by overstriking

    def complete(self, *words):
        """COMPREPLY of the generated bash completion for `overlapprof WORDS...` (the last is the cursor's)."""
        script = (f"source {SHARE}/overlapprof.bash; COMP_WORDS=(overlapprof {' '.join(repr(w) for w in words)}); "
                  f"COMP_CWORD={len(words)}; _overlapprof; printf '%s\\n' \"${{COMPREPLY[@]}}\"")
        rc, out, err = sh(["bash", "-c", script])
        self.assertEqual(rc, 0, err)
        self.assertEqual(err, "")
        return [w for w in out.splitlines() if w]

    def test_bash_completes_subcommands_and_each_subcommands_options(self):
        self.assertEqual(self.complete("an"), ["analyze"])
        self.assertEqual(sorted(self.complete("")), sorted(list(self.cli) + ["-h", "--help", "-V", "--version"]))
        for sub, opts in self.cli.items():
            self.assertEqual(sorted(self.complete(sub, "-")), sorted(opts), sub)
        self.assertEqual(self.complete("run", "--inj"), ["--injector"])
        self.assertEqual(self.complete("analyze", "--per-iteration", "--js"), ["--json"])

    def test_bash_completes_files_and_run_command(self):
        tmp = tempfile.mkdtemp(prefix="overlapprof-compl-")
        try:
            open(os.path.join(tmp, "rank0.json.gz"), "w").close()
            self.assertEqual(self.complete("analyze", os.path.join(tmp, "ra")), [os.path.join(tmp, "rank0.json.gz")])
            # After `run ... --` the job's command is completed from PATH.
            self.assertIn("bash", self.complete("run", "-o", "x", "--", "bas"))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def test_zsh_completion_covers_every_subcommand_and_option(self):
        z = self.read("_overlapprof")
        self.assertTrue(z.startswith("#compdef overlapprof\n"))
        for sub, opts in self.cli.items():
            body = z.split(f"_overlapprof_{sub}() {{\n", 1)[1].split("\n}", 1)[0]
            for o in opts:
                self.assertIn(o, body, (sub, o))
        zsh = shutil.which("zsh")
        if zsh:
            rc, _, err = sh([zsh, "-n", os.path.join(SHARE, "_overlapprof")])
            self.assertEqual(rc, 0, err)


if __name__ == "__main__":
    CLI, SHARE, SOURCE = (os.path.abspath(a) for a in sys.argv[1:4])
    unittest.main(argv=[sys.argv[0], "-v"])
