#!/usr/bin/python3
"""The tree's layering rules, checked on the sources and the CMake files.

    check_layers.py [ROOT]      exit 0 when they hold, else 1 and a line a breach

The layers (docs/architecture.md):
  core/     the runtime: its own headers and src/ only.  Nothing of text/,
            faces/ or tools/ (an include, a source, a link).
  text/     the text library: its own headers and src/, and the core's base
            headers (BASE below), nothing else of the core, no face.
  faces/    tfrun and its server: public headers (core/include/tf,
            text/include/tf) and their own files, never a library's src/.
  tools/    the tools: public headers, tools/lib and their own files.
  plugins/  public core headers (core/include/tf) and their own folder, the
            plugins' shared code (plugins/common, plugins/cuda-common) and
            what the libraries they link export; their builds never name
            another plugin's folder (no source compiled in, no include
            path into it), never text/.
Tests and benchmarks are white-box and may include the libraries' insides.
"""
import os
import re
import sys

BASE = {"tf/diag.h", "tf/error.h", "tf/text.h", "tf/conf.h"}
SHARED = ("common", "cuda-common")
SOURCES = (".c", ".h", ".cu", ".cuh", ".cpp")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


def layer_of(rel):
    top = rel.split("/", 1)[0]
    return top if top in ("core", "text", "faces", "tools", "plugins") else None


class Tree:
    def __init__(self, root):
        self.root = root
        self.core_tf = self.names("core/include/tf")
        self.text_tf = self.names("text/include/tf")
        self.breaches = []

    def names(self, d):
        p = os.path.join(self.root, d)
        return set(os.listdir(p)) if os.path.isdir(p) else set()

    def exists(self, rel):
        return os.path.isfile(os.path.join(self.root, rel))

    def breach(self, rel, line, what):
        self.breaches.append(f"{rel}:{line}: {what}")

    def within(self, d, name):
        """d/name is a file inside d."""
        p = os.path.normpath(os.path.join(d, name))
        return self.under(p, d) and self.exists(p)

    def under(self, rel, *dirs):
        return any(rel == d or rel.startswith(d + "/") for d in dirs)

    def check_include(self, rel, line, name):
        layer = layer_of(rel)
        d = os.path.dirname(rel)
        if name.startswith("tf/"):
            leaf = name[3:]
            in_core, in_text = leaf in self.core_tf, leaf in self.text_tf
            if layer == "core" and not in_core:
                self.breach(rel, line, f'core includes "{name}", which is not a core header')
            elif layer == "text" and not in_text and name not in BASE:
                self.breach(rel, line, f'text includes "{name}": of the core only '
                            + ", ".join(sorted(BASE)))
            elif layer == "plugins" and not in_core:
                self.breach(rel, line, f'plugin includes "{name}", which is not the core\'s '
                            "public header")
            return
        here = os.path.normpath(os.path.join(d, name))
        if layer == "plugins":
            top = rel.split("/")[1]
            if self.exists(here) and here.split("/")[0] == "plugins":
                owner = here.split("/")[1]
                if owner != top and owner not in SHARED:
                    self.breach(rel, line, f'plugin includes "{name}", a private header of '
                                f"plugins/{owner}")
            elif not self.exists(here):
                for lib in ("core/src", "text/src"):
                    if self.within(lib, name):
                        self.breach(rel, line, f'plugin includes "{name}" from {lib}')
            return
        if self.exists(here) and layer_of(here) == layer:
            if layer in ("faces", "tools") or not self.under(here, "text/include", "core/include"):
                return
        # Not beside the file: the layer's own include roots.
        roots = {"core": ["core/src"], "text": ["text/src"], "faces": ["faces/tfrun"],
                 "tools": ["tools/lib"]}[layer]
        for r in roots:
            if self.within(r, name):
                return
        for lib in ("core/src", "text/src", "faces/tfrun", "tools/lib"):
            if self.within(lib, name):
                self.breach(rel, line, f'{layer} includes "{name}" from {lib}')
                return
        self.breach(rel, line, f'{layer} includes "{name}", found nowhere it may look')

    def check_sources(self):
        for top in ("core", "text", "faces", "tools", "plugins"):
            for dp, _, files in os.walk(os.path.join(self.root, top)):
                for f in files:
                    if not f.endswith(SOURCES):
                        continue
                    path = os.path.join(dp, f)
                    rel = os.path.relpath(path, self.root)
                    with open(path, errors="replace") as fh:
                        text = fh.read()
                    for m in INCLUDE.finditer(text):
                        self.check_include(rel, text.count("\n", 0, m.start()) + 1, m.group(1))

    # CMake: what each layer's build may name of the others.
    FORBIDDEN = {
        "core": (r"\btftext\b|\btftools\b|/text/|/faces/|/tools/",
                 "the core's build names text, a face or a tool"),
        "text": (r"/faces/|/tools/|core/src", "text's build names a face, a tool or core/src"),
        "faces": (r"core/src|text/src|/tools/", "a face's build names a library's src/ or a tool"),
        "tools": (r"core/src|text/src|/faces/", "a tool's build names a library's src/ or a face"),
        "plugins": (r"core/src|/text/|/faces/|/tools/|\btfcore\b|\btftext\b",
                    "a plugin's build names the core's insides, text, a face or a tool"),
    }
    OTHER_PLUGIN = re.compile(r"\bplugins/([\w.-]+)")

    def check_cmake(self):
        for top, (pat, what) in self.FORBIDDEN.items():
            for dp, _, files in os.walk(os.path.join(self.root, top)):
                if "CMakeLists.txt" not in files:
                    continue
                path = os.path.join(dp, "CMakeLists.txt")
                rel = os.path.relpath(path, self.root)
                with open(path) as fh:
                    lines = fh.read().split("\n")
                for i, ln in enumerate(lines, 1):
                    code = ln.split("#", 1)[0]
                    if re.search(pat, code):
                        self.breach(rel, i, what)
                    if top == "plugins":
                        own = rel.split("/")[1]
                        for m in self.OTHER_PLUGIN.finditer(code):
                            if m.group(1) != own and m.group(1) not in SHARED:
                                self.breach(rel, i, f"a plugin's build reaches into "
                                            f"plugins/{m.group(1)}: link its library")


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    t = Tree(os.path.abspath(root))
    t.check_sources()
    t.check_cmake()
    for b in t.breaches:
        print(b)
    print(f"layers: {len(t.breaches)} breach(es)")
    return 1 if t.breaches else 0


if __name__ == "__main__":
    sys.exit(main())
