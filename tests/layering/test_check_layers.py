#!/usr/bin/env python3
"""Self-test of the layering check (ctest: layering_selftest): the checker, with the real rules
(layers.txt), on small fake source trees. A clean tree passes; each kind of violation fails,
naming file:line, so the check cannot pass silently."""
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import check_file_keys  # noqa: E402
import check_layers  # noqa: E402

RULES = check_layers.load_rules(check_layers.DEFAULT_RULES)


def layer_folder(name):
    """The first folder of layer `name` in the real rules."""
    return next(f for f, o in RULES.folders.items() if o.is_layer and o.name == name)


LOW = RULES.layers[0]
HIGH = RULES.layers[-1]
MID = RULES.layers[1]


class FakeTree:
    """A source tree with one header in every folder the rules name, each including nothing."""

    def __init__(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name
        for folder in RULES.folders:
            self.write(f"{folder}/h.h", "#pragma once\n")
        # A build tree is skipped: it may hold anything.
        self.write("build/x/bad.cc", f'#include "{layer_folder(HIGH)}/h.h"\n')

    def write(self, relpath, text):
        path = os.path.join(self.root, relpath)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)

    def check(self):
        violations, _, _ = check_layers.check(self.root, RULES)
        return violations

    def cleanup(self):
        self.tmp.cleanup()


class LayeringCheckTest(unittest.TestCase):
    def setUp(self):
        self.tree = FakeTree()
        self.addCleanup(self.tree.cleanup)

    def assertOneViolation(self, where, *words):
        v = self.tree.check()
        self.assertEqual(len(v), 1, v)
        self.assertTrue(v[0].startswith(where + ":"), v)
        for w in words:
            self.assertIn(w, v[0])

    def test_clean_tree_passes(self):
        low, mid, high = layer_folder(LOW), layer_folder(MID), layer_folder(HIGH)
        self.tree.write(f"{high}/a.cc", f'#include "{high}/h.h"\n#include "{mid}/h.h"\n#include "{low}/h.h"\n'
                        "#include <vector>\n#include \"nccl.h\"\n")
        self.tree.write(f"{low}/a.cc", '#include "h.h"\n#include "overlapprof/version.h"\n')
        self.tree.write("injector/a.cc", '#include "injector/h.h"\n#include "src/store/writer.h"\n'
                        '#include "src/common/status.h"\n#include "overlapprof/version.h"\n')
        self.tree.write("src/store/writer.h", "#pragma once\n")
        self.tree.write("src/common/status.h", "#pragma once\n")
        self.tree.write("tests/unit/t.cc", f'#include "{high}/h.h"\n#include "injector/h.h"\n')
        self.assertEqual(self.tree.check(), [])

    def test_lower_layer_including_higher_fails(self):
        self.tree.write(f"{layer_folder(MID)}/a.cc", f'// x\n#include "{layer_folder(HIGH)}/h.h"\n')
        self.assertOneViolation(f"{layer_folder(MID)}/a.cc:2", f"layer {MID}", f"layer {HIGH}", "above")

    def test_every_folder_of_a_layer_counts(self):
        for folder, owner in RULES.folders.items():
            if owner.is_layer and owner.name == LOW:
                with self.subTest(folder=folder):
                    self.tree.write(f"{folder}/bad.cc", f'#include "{layer_folder(MID)}/h.h"\n')
                    self.assertOneViolation(f"{folder}/bad.cc:1", f"layer {LOW}", f"layer {MID}")
                    os.remove(os.path.join(self.tree.root, folder, "bad.cc"))

    def test_relative_include_upwards_fails(self):
        low, mid = layer_folder(LOW), layer_folder(MID)
        up = os.path.relpath(os.path.join(mid, "h.h"), low)
        self.tree.write(f"{low}/a.h", f'#pragma once\n#include "{up}"\n')
        self.assertOneViolation(f"{low}/a.h:2", f"layer {MID}")

    def test_layer_including_injector_fails(self):
        self.tree.write(f"{layer_folder(LOW)}/a.cc", '#include "injector/h.h"\n')
        self.assertOneViolation(f"{layer_folder(LOW)}/a.cc:1", "outside the layers")

    def test_injector_including_beyond_its_share_fails(self):
        self.tree.write("injector/a.cc", f'#include "{layer_folder(MID)}/h.h"\n')
        self.assertOneViolation("injector/a.cc:1", "injector/ may include only")
        self.tree.write("injector/a.cc", '#include "src/io/h.h"\n')
        self.assertOneViolation("injector/a.cc:1", "injector/ may include only")

    def test_file_in_no_rule_fails(self):
        self.tree.write("tools/x.cc", "int x;\n")
        self.assertOneViolation("tools/x.cc", "in no layer")

    def test_missing_project_header_fails(self):
        self.tree.write(f"{layer_folder(HIGH)}/a.cc", f'#include "{layer_folder(LOW)}/gone.h"\n')
        self.assertOneViolation(f"{layer_folder(HIGH)}/a.cc:1", "no such file")

    def test_commented_out_include_is_ignored(self):
        high = layer_folder(HIGH)
        self.tree.write(f"{layer_folder(LOW)}/a.cc", f'// #include "{high}/h.h"\n/*\n#include "{high}/h.h"\n*/\n')
        self.assertEqual(self.tree.check(), [])

    def test_command_line_exit_code_and_output(self):
        self.tree.write(f"{layer_folder(LOW)}/a.cc", f'#include "{layer_folder(HIGH)}/h.h"\n')
        p = subprocess.run([sys.executable, os.path.join(HERE, "check_layers.py"), "--root", self.tree.root],
                           capture_output=True, text=True)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn(f"{layer_folder(LOW)}/a.cc:1:", p.stdout)
        os.remove(os.path.join(self.tree.root, layer_folder(LOW), "a.cc"))
        p = subprocess.run([sys.executable, os.path.join(HERE, "check_layers.py"), "--root", self.tree.root],
                           capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)

    def test_stale_rule_fails(self):
        folder = layer_folder(MID)
        for name in os.listdir(os.path.join(self.tree.root, folder)):
            os.remove(os.path.join(self.tree.root, folder, name))
        os.rmdir(os.path.join(self.tree.root, folder))
        v = self.tree.check()
        self.assertEqual(len(v), 1, v)
        self.assertIn(f"folder {folder}, which does not exist", v[0])


class CmakeLayersTest(unittest.TestCase):
    """The build's layer libraries (as tests/CMakeLists.txt passes them) against the rule."""

    def setUp(self):
        self.tree = FakeTree()
        self.addCleanup(self.tree.cleanup)
        self.root = self.tree.root

    def libs(self, move=None):
        """One library per rule layer with its folders' h.h; `move`: (file's layer, library index)."""
        libs = [(f"lib_{name}", []) for name in RULES.layers]
        for folder, owner in RULES.folders.items():
            if owner.is_layer:
                libs[owner.rank][1].append(os.path.join(self.root, folder, "h.h"))
        if move:
            layer, index = move
            path = os.path.join(self.root, layer_folder(layer), "h.h")
            libs[RULES.layers.index(layer)][1].remove(path)
            libs[index][1].append(path)
        return libs

    def test_matching_layers_pass(self):
        libs = self.libs()
        libs[-1][1].append("/elsewhere/build/generated_assets.cc")  # generated: not checked
        self.assertEqual(check_layers.check_cmake_layers(self.root, RULES, libs), [])

    def test_source_in_the_wrong_library_fails(self):
        v = check_layers.check_cmake_layers(self.root, RULES, self.libs(move=(MID, len(RULES.layers) - 1)))
        self.assertEqual(len(v), 1, v)
        self.assertTrue(v[0].startswith(f"{layer_folder(MID)}/h.h: compiled into lib_{HIGH}"), v)

    def test_other_number_of_layers_fails(self):
        v = check_layers.check_cmake_layers(self.root, RULES, self.libs()[:-1])
        self.assertEqual(len(v), 1, v)
        self.assertIn("layer libraries", v[0])

    def test_command_line(self):
        args = [f"--cmake-layer={t}={','.join(files)}" for t, files in self.libs(move=(LOW, 1))]
        p = subprocess.run([sys.executable, os.path.join(HERE, "check_layers.py"), "--root", self.root] + args,
                           capture_output=True, text=True)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn(f"{layer_folder(LOW)}/h.h: compiled into lib_{MID}", p.stdout)


class FileKeysTest(unittest.TestCase):
    """check_file_keys.py: identity-hashed integer keys are rejected where files are read."""

    BAD = [
        "std::unordered_map<int64_t, int64_t> launch_of;",
        "std::unordered_map<int64_t, LanePacker> lanes;",
        "std::unordered_set<uint64_t> seen;",
        "unordered_map< std::uint32_t , std::string> m;",
        "std::unordered_multimap<size_t, int> m;",
        "std::unordered_map<unsigned long long, int> m;",
        "std::unordered_map<const int, int> m;",
        "std::unordered_map<std::pair<int64_t, int64_t>, uint32_t> m;",
        "std::unordered_map<int64_t,\n    std::vector<int>> split_over_lines;",
    ]
    GOOD = [
        "std::unordered_map<std::string, uint32_t> names;",  # strings: std::hash is not the identity
        "std::unordered_map<int64_t, int, SeededHash> m;",  # a hash of its own
        "std::unordered_set<uint64_t, SeededHash> s;",
        "std::unordered_map<std::pair<int64_t, std::string>, int, PairHash> m;",
        "FileKeyMap<int64_t, int64_t> launch_of;",
        "std::map<int64_t, int> m;",
        "// std::unordered_map<int64_t, int> in a comment",
        "/* std::unordered_map<int64_t, int>\n */ int x;",
        'const char* s = "std::unordered_map<int64_t, int>";',
        'auto s = R"(std::unordered_map<int64_t, int> "quoted")";',
        "int64_t n = 1'000'000; std::unordered_map<std::string, int> m;",
    ]

    def test_each_bad_line_is_found_with_its_line_number(self):
        for bad in self.BAD:
            with self.subTest(bad=bad):
                text = "#include <unordered_map>\n\n" + bad + "\n"
                found = list(check_file_keys.findings(text))
                self.assertEqual(len(found), 1, found)
                self.assertEqual(found[0][0], 3)
                self.assertIn("FileKeyMap", found[0][1])

    def test_good_lines_pass(self):
        for good in self.GOOD:
            with self.subTest(good=good):
                self.assertEqual(list(check_file_keys.findings(good + "\n")), [])

    def test_a_bad_line_fails_the_layering_check_in_each_folder_and_only_there(self):
        tree = FakeTree()
        self.addCleanup(tree.cleanup)
        for folder in check_file_keys.FOLDERS:
            with self.subTest(folder=folder):
                tree.write(f"{folder}/keys.cc", "// x\n" + self.BAD[0] + "\n")
                p = subprocess.run([sys.executable, os.path.join(HERE, "check_layers.py"), "--root", tree.root],
                                   capture_output=True, text=True)
                self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
                self.assertIn(f"{folder}/keys.cc:2: std::unordered_map keyed by int64_t", p.stdout)
                os.remove(os.path.join(tree.root, folder, "keys.cc"))
        tree.write("tests/keys.cc", self.BAD[0] + "\n")  # tests may: they read no hostile file
        p = subprocess.run([sys.executable, os.path.join(HERE, "check_layers.py"), "--root", tree.root],
                           capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)


if __name__ == "__main__":
    unittest.main()
