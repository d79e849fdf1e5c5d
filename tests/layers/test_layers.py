#!/usr/bin/python3
"""check_layers.py holds on the tree, and fails on each kind of breach planted
in a copy of it, naming the file."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
CHECK = os.path.join(HERE, "check_layers.py")
KEEP = (".c", ".h", ".cu", ".cuh", ".cpp", "CMakeLists.txt")

# (file, text appended, what the breach line must name)
PLANTS = [
    ("core/src/engine/engine.c", '#include "tf/chat.h"\n', "core includes \"tf/chat.h\""),
    ("core/src/conf/conf.c", '#include "chat/jinja.h"\n', "from text/src"),
    ("core/CMakeLists.txt", "target_link_libraries(tfcore PUBLIC tftext)\n", "the core's build"),
    ("text/src/chat/reply.c", '#include "tf/engine.h"\n', "text includes \"tf/engine.h\""),
    ("text/src/grammar/mask.c", '#include "engine/runtime.h"\n', "from core/src"),
    ("faces/tfrun/tfrun.c", '#include "model/weights.h"\n', "from core/src"),
    ("faces/tfrun/serve/sched.c", '#include "grammar/grammar_int.h"\n', "from text/src"),
    ("faces/tfrun/CMakeLists.txt",
     "target_include_directories(tfrun PRIVATE ${CMAKE_SOURCE_DIR}/core/src)\n", "a face's build"),
    ("tools/tfsynth/tfsynth.c", '#include "plugin/registry.h"\n', "from core/src"),
    ("plugins/mla/mla.c", '#include "../kda/kda_layer.h"\n', "private header of plugins/kda"),
    ("plugins/kda/kda.c", '#include "tf/grammar.h"\n', "not the core's public header"),
    ("plugins/router/CMakeLists.txt",
     "tf_add_plugin(x SOURCES ${CMAKE_SOURCE_DIR}/plugins/moe/mlp.c)\n", "reaches into plugins/moe"),
]


def copy_tree(dst):
    for top in ("core", "text", "faces", "tools", "plugins"):
        shutil.copytree(os.path.join(ROOT, top), os.path.join(dst, top),
                        ignore=lambda d, names: [n for n in names
                                                 if not os.path.isdir(os.path.join(d, n))
                                                 and not n.endswith(KEEP)])


def run(root):
    p = subprocess.run([sys.executable, CHECK, root], capture_output=True, text=True)
    return p.returncode, p.stdout


class Layers(unittest.TestCase):
    def test_tree_holds(self):
        rc, out = run(ROOT)
        self.assertEqual(rc, 0, out)

    def test_each_breach_is_found(self):
        with tempfile.TemporaryDirectory() as tmp:
            copy_tree(tmp)
            self.assertEqual(run(tmp)[0], 0, "the copy holds before planting")
            for rel, text, expect in PLANTS:
                with self.subTest(rel=rel):
                    path = os.path.join(tmp, rel)
                    self.assertTrue(os.path.isfile(path), rel)
                    with open(path) as f:
                        before = f.read()
                    with open(path, "a") as f:
                        f.write(text)
                    rc, out = run(tmp)
                    with open(path, "w") as f:
                        f.write(before)
                    self.assertEqual(rc, 1, out)
                    self.assertTrue(any(ln.startswith(rel + ":") and expect in ln
                                        for ln in out.splitlines()), out)


if __name__ == "__main__":
    unittest.main()
