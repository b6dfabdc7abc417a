/** The engine's C++ sources and the project headers they include, read as text (test/project/'s checks of the tree). */
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';

const root = path.resolve(__dirname, '..', '..');
export const csrc = path.join(root, 'csrc');

/** The tree's files, relative to its root: tracked, and new ones not ignored. */
export function treeFiles(): string[] {
  return execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard'], { cwd: root, encoding: 'utf8' })
    .trim()
    .split('\n')
    .filter((f) => fs.existsSync(path.join(root, f)));
}

/** Every file under `dir` whose name matches `name`, recursively. */
export function filesUnder(dir: string, name: RegExp): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? filesUnder(p, name) : name.test(e.name) ? [p] : [];
  });
}

/**
 * The first of `file` and the project headers it includes (`#include "..."`, found beside the including file or under
 * csrc/, followed through headers, each looked at once) whose text matches `pattern`; null when none does.
 */
export function firstReaching(file: string, pattern: RegExp, seen = new Set<string>()): string | null {
  if (seen.has(file)) return null;
  seen.add(file);
  const text = fs.readFileSync(file, 'utf8');
  if (pattern.test(text)) return file;
  for (const [, name] of text.matchAll(/#include\s*"([^"]+)"/g)) {
    const local = [path.join(path.dirname(file), name), path.join(csrc, name)].find((p) => fs.existsSync(p));
    const found = local ? firstReaching(path.normalize(local), pattern, seen) : null;
    if (found) return found;
  }
  return null;
}
