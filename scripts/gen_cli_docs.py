#!/usr/bin/env python3
"""The man page and the bash and zsh completions, generated from the CLI's own help.

    gen_cli_docs.py OVERLAPPROF OUTDIR

runs `OVERLAPPROF --help`, `OVERLAPPROF --version` and `OVERLAPPROF SUB --help` for every
subcommand it lists, and writes OUTDIR/overlapprof.1 (man page, roff), OUTDIR/overlapprof.bash
(bash-completion) and OUTDIR/_overlapprof (zsh). Nothing is listed by hand: a new subcommand or
option appears in all three at the next build (CMake runs this after linking overlapprof;
docs/install.md).
"""
import os
import re
import subprocess
import sys


def run_help(binary, *args):
    p = subprocess.run([binary, *args], capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        sys.exit(f"gen_cli_docs: {binary} {' '.join(args)} exited {p.returncode}: {p.stderr.strip()}")
    return p.stdout


class Option:
    def __init__(self, names, value, text):
        self.names, self.value, self.text = names, value, text


class Help:
    """One `--help` page as CLI11 prints it: a description, Usage, then sections of
    two-space-indented entries whose text is in a second column or on indented lines below."""

    def __init__(self, text):
        self.description, self.usage = "", ""
        self.sections = {}  # "Options" / "Positionals" / "Subcommands" -> [(first column, text)]
        section = None
        for line in text.splitlines():
            if not line.strip():
                continue
            if line.startswith("Usage: "):
                self.usage = line[len("Usage: "):].strip()
            elif re.match(r"^[A-Z][A-Za-z ]*:$", line):
                section = line[:-1]
                self.sections[section] = []
            elif section is None:
                self.description += (" " if self.description else "") + line.strip()
            elif re.match(r"^ {2}\S", line):
                m = re.match(r"^ {2}(\S.*?)(?: {2,}(\S.*))?$", line)
                self.sections[section].append([m.group(1).strip(), (m.group(2) or "").strip()])
            elif self.sections[section]:  # continuation: the text of the entry above
                entry = self.sections[section][-1]
                entry[1] = (entry[1] + " " + line.strip()).strip()

    def options(self):
        out = []
        for first, text in self.sections.get("Options", []):
            spec, _, value = first.partition(" ")
            out.append(Option(spec.split(","), value.strip(), text))
        return out


def collect(binary):
    top = Help(run_help(binary, "--help"))
    version = run_help(binary, "--version").strip()
    subs = []
    for name, text in top.sections.get("Subcommands", []):
        h = Help(run_help(binary, name, "--help"))
        subs.append((name, text, h))
    if not subs:
        sys.exit("gen_cli_docs: no subcommands in --help")
    return top, version, subs


# Man page ----------------------------------------------------------------------------------

def roff(s):
    s = s.replace("\\", "\\e").replace("-", "\\-")
    return re.sub(r"^([.'])", r"\\&\1", s)


def manpage(top, version, subs):
    tool_version = version.split()[1] if len(version.split()) > 1 else version
    lines = [f'.TH OVERLAPPROF 1 "" "{roff(version)}" "User Commands"',
             ".SH NAME", f"overlapprof \\- {roff(top.description.removeprefix('overlapprof: '))}",
             ".SH SYNOPSIS",
             ".B overlapprof",
             "\\fICOMMAND\\fR [\\fIOPTIONS\\fR] ...",
             ".br",
             ".B overlapprof",
             "\\-\\-help | \\-\\-version",
             ".SH DESCRIPTION", roff(top.description.removeprefix("overlapprof: ")) + ".",
             "Each command's own options: \\fBoverlapprof\\fR \\fICOMMAND\\fR \\fB\\-\\-help\\fR (below).",
             ".SH OPTIONS"]
    for o in top.options():
        lines += [".TP", "\\fB" + roff(", ".join(o.names)) + "\\fR" + (" \\fI" + roff(o.value) + "\\fR" if o.value else ""),
                  roff(o.text)]
    lines.append(".SH COMMANDS")
    for name, text, h in subs:
        lines += [f".SS {roff(name)}", roff(text) + ".", ".PP", "\\fBoverlapprof " + roff(h.usage.removeprefix("overlapprof ")) + "\\fR"]
        for first, ptext in h.sections.get("Positionals", []):
            lines += [".TP", "\\fI" + roff(first.split()[0]) + "\\fR", roff(ptext)]
        for o in h.options():
            if "--help" in o.names:
                continue
            lines += [".TP", "\\fB" + roff(", ".join(o.names)) + "\\fR" + (" \\fI" + roff(o.value) + "\\fR" if o.value else ""),
                      roff(o.text)]
    lines += [".SH EXIT STATUS",
              "0 success (check: pass); 1 check: a regression; 2 usage or input error (one line on stderr); "
              "3 check: inconclusive; 4 results printed but data was lost; 5 internal error. "
              "\\fBrun\\fR returns the command's own exit code once it started it.",
              ".SH ENVIRONMENT",
              ".TP", ".B OVERLAPPROF_INJECTOR",
              "the injector \\fBrun\\fR records with, unless \\fB\\-\\-injector\\fR names one.",
              ".TP", ".B NO_COLOR", "no colour on a terminal unless \\fB\\-\\-color always\\fR.",
              ".SH FILES",
              ".TP", ".I PREFIX/lib/overlapprof/liboverlapprof_inject.so",
              "the injector (LD_PRELOAD, CUPTI injection, NCCL profiler plugin) that \\fBrun\\fR loads into the job; "
              "found from the real path of \\fBoverlapprof\\fR.",
              ".SH SEE ALSO",
              "The documentation in the source tree: README.md, docs/install.md, docs/run.md, docs/ci-gate.md, "
              "docs/exit-codes.md.",
              f".\\\" Generated by scripts/gen_cli_docs.py from the help of overlapprof {roff(tool_version)}."]
    return "\n".join(lines) + "\n"


# Completions -------------------------------------------------------------------------------

def bash_completion(top, subs):
    cases = []
    for name, _, h in subs:
        opts = [n for o in h.options() for n in o.names]
        takes = [n for o in h.options() if o.value for n in o.names]
        cases.append(f"    {name}) opts='{' '.join(opts)}'; takes='{' '.join(takes)}' ;;")
    top_opts = " ".join(n for o in top.options() for n in o.names)
    names = " ".join(name for name, _, _ in subs)
    return f"""# bash completion for overlapprof. Generated by scripts/gen_cli_docs.py from the CLI's help.
_overlapprof() {{
  local cur prev cmd i opts takes
  cur=${{COMP_WORDS[COMP_CWORD]}}
  prev=${{COMP_WORDS[COMP_CWORD-1]}}
  cmd=
  for ((i = 1; i < COMP_CWORD; i++)); do
    case ${{COMP_WORDS[i]}} in
      --) [[ $cmd == run ]] && {{ COMPREPLY=($(compgen -c -- "$cur")); [[ $((i + 1)) -lt $COMP_CWORD ]] && COMPREPLY=($(compgen -f -- "$cur")); return 0; }} ;;
      -*) ;;
      *) [[ -z $cmd ]] && cmd=${{COMP_WORDS[i]}} ;;
    esac
  done
  if [[ -z $cmd ]]; then
    COMPREPLY=($(compgen -W "{names} {top_opts}" -- "$cur"))
    return 0
  fi
  case $cmd in
{chr(10).join(cases)}
    *) return 0 ;;
  esac
  if [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "$opts" -- "$cur"))
    return 0
  fi
  # A file or directory: the traces, or the value of an option that takes one.
  compopt -o filenames 2>/dev/null
  COMPREPLY=($(compgen -f -- "$cur"))
}}
complete -F _overlapprof overlapprof
"""


def zsh_quote(s):
    return s.replace("\\", "\\\\").replace("'", "'\\''").replace("[", "\\[").replace("]", "\\]").replace(":", "\\:")


def zsh_completion(top, subs):
    funcs, descs = [], []
    for name, text, h in subs:
        specs = []
        for o in h.options():
            text_q = zsh_quote(o.text)
            action = f":{zsh_quote(o.value.split()[0].lower())}:_files" if o.value else ""
            names = o.names
            if len(names) > 1:
                excl = " ".join(names)
                specs.append(f"'({excl})'{{{','.join(names)}}}'[{text_q}]{action}'")
            else:
                specs.append(f"'{names[0]}[{text_q}]{action}'")
        rest = "'*::command:_normal'" if name == "run" else "'*:file:_files'"
        funcs.append(f"_overlapprof_{name}() {{\n  _arguments -s \\\n    " + " \\\n    ".join(specs + [rest]) + "\n}")
        descs.append(f"    '{name}:{zsh_quote(text)}'")
    return f"""#compdef overlapprof
# zsh completion for overlapprof. Generated by scripts/gen_cli_docs.py from the CLI's help.
{chr(10).join(funcs)}

_overlapprof() {{
  local -a commands
  commands=(
{chr(10).join(descs)}
  )
  if (( CURRENT == 2 )); then
    _describe -t commands 'overlapprof command' commands
    _arguments '(-)'{{-h,--help}}'[print the help]' '(-)'{{-V,--version}}'[print the version]'
    return
  fi
  local cmd=$words[2]
  shift words
  (( CURRENT-- ))
  if (( $+functions[_overlapprof_$cmd] )); then
    _overlapprof_$cmd
  else
    _files
  fi
}}

_overlapprof "$@"
"""


def write(path, text):
    with open(path + ".partial", "w") as f:
        f.write(text)
    os.replace(path + ".partial", path)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    binary, outdir = sys.argv[1], sys.argv[2]
    top, version, subs = collect(binary)
    os.makedirs(outdir, exist_ok=True)
    write(os.path.join(outdir, "overlapprof.1"), manpage(top, version, subs))
    write(os.path.join(outdir, "overlapprof.bash"), bash_completion(top, subs))
    write(os.path.join(outdir, "_overlapprof"), zsh_completion(top, subs))


if __name__ == "__main__":
    main()
