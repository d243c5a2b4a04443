#!/usr/bin/env python3
"""Checks that every relative link and #anchor in README.md, CONTRIBUTING.md and docs/*.md resolves.

A link is markdown's [text](target). Targets starting with http://, https:// or mailto: are skipped.
The file part must exist relative to the linking file; an #anchor must be produced by a heading of
the target markdown file under GitHub's rules: lowercase, punctuation removed except hyphens and
spaces, spaces turned into hyphens; a repeated heading gets -1, -2, ... Links inside code (fenced
blocks and `inline code`) are not links and are not checked.

    python3 tests/tools/check_links.py [REPO_ROOT]

Prints file:line and the bad link for each failure, and exits 1 if there was any.
"""
import os
import re
import sys

LINK = re.compile(r'!?\[((?:[^\[\]]|\[[^\]]*\])*)\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)')
HEADING = re.compile(r'^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$')
FENCE = re.compile(r'^ {0,3}(```|~~~)')


def strip_code(line):
    """Blanks `inline code` spans so links inside them are not seen."""
    return re.sub(r'(`+)(.+?)\1', lambda m: ' ' * len(m.group(0)), line)


def lines_outside_fences(text):
    """Yields (line number, line) for the lines outside fenced code blocks."""
    fence = None
    for n, line in enumerate(text.split('\n'), 1):
        m = FENCE.match(line)
        if m:
            if fence is None:
                fence = m.group(1)
            elif m.group(1) == fence:
                fence = None
            continue
        if fence is None:
            yield n, line


def slug(heading):
    """GitHub's anchor for a heading's text."""
    text = re.sub(r'!?\[([^\]]*)\]\([^)]*\)', r'\1', heading)  # a link in a heading: its text
    text = re.sub(r'<[^>]+>', '', text)                          # html tags
    text = text.lower()
    text = ''.join(c for c in text if c.isalnum() or c in '-_ ')
    return text.replace(' ', '-')


def anchors(path, cache={}):
    if path not in cache:
        seen = {}
        found = set()
        with open(path, encoding='utf-8') as f:
            for _, line in lines_outside_fences(f.read()):
                m = HEADING.match(line)
                if not m:
                    continue
                base = slug(m.group(2))
                count = seen.get(base, 0)
                found.add(base if count == 0 else f'{base}-{count}')
                seen[base] = count + 1
        cache[path] = found
    return cache[path]


def check(root):
    files = [os.path.join(root, name) for name in ('README.md', 'CONTRIBUTING.md')]
    docs = os.path.join(root, 'docs')
    if os.path.isdir(docs):
        files += sorted(os.path.join(docs, f) for f in os.listdir(docs) if f.endswith('.md'))
    errors, links = [], 0
    for path in files:
        if not os.path.exists(path):
            errors.append(f'{os.path.relpath(path, root)}: missing')
            continue
        with open(path, encoding='utf-8') as f:
            text = f.read()
        rel = os.path.relpath(path, root)
        for n, line in lines_outside_fences(text):
            for m in LINK.finditer(strip_code(line)):
                target = m.group(2)
                if re.match(r'^(https?:|mailto:)', target, re.I) or not target:
                    continue
                links += 1
                file_part, _, anchor = target.partition('#')
                dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
                if not os.path.exists(dest):
                    errors.append(f'{rel}:{n}: {target}: no such file {os.path.relpath(dest, root)}')
                    continue
                if anchor:
                    if os.path.isdir(dest) or not dest.endswith('.md'):
                        errors.append(f'{rel}:{n}: {target}: an anchor into a file that is not markdown')
                    elif anchor not in anchors(dest):
                        errors.append(f'{rel}:{n}: {target}: no heading in {os.path.relpath(dest, root)} '
                                      f'makes the anchor #{anchor}')
    for e in errors:
        print(e)
    print(f'check_links: {len(files)} files, {links} relative links, {len(errors)} broken')
    return 1 if errors else 0


if __name__ == '__main__':
    sys.exit(check(os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else '.')))
