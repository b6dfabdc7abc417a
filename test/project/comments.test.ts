/**
 * Comments say what is: every repository path a source comment names exists (a moved or renamed file leaves
 * its old name in comments, which then send a reader nowhere), and no comment of src/ or csrc/ names an issue
 * (what an issue asked for is history, which belongs in commits and bench/history/).
 */
import * as fs from 'fs';
import * as path from 'path';
import { treeFiles } from '../helpers/source-tree';

const root = path.resolve(__dirname, '..', '..');
const files = treeFiles();
const folders = new Set(files.flatMap((f) => f.split('/').slice(0, -1)));
const sources = files.filter((f) => /^(src|csrc|test|bench|scripts)\/.*\.(ts|cpp|h|cu|py|sh|mjs|js)$/.test(f));

/** A file name in a comment: a path of folders and a name with a source or document extension. */
const NAMED = /(?<![\w@./*-])((?:[\w-]+\/)*[\w-]+(?:\.[\w-]+)*\.(?:ts|cpp|h|cu|py|md|sh|mjs|js))(?![\w/])/g;
/** Names of other projects and their files, which a comment may name: not paths of this repository. */
const NOT_OURS = new Set(['llama.cpp', 'Node.js', 'cuda_runtime_api.h']);

/** The comment on `line` of `file`, or null. */
function commentOf(line: string, file: string): string | null {
  const t = line.trim();
  if (/\.(py|sh)$/.test(file)) return t.startsWith('#') ? t : null;
  if (/^(\/\/|\*|\/\*)/.test(t)) return t;
  const at = line.indexOf('// ');
  return at >= 0 ? line.slice(at) : null;
}

/**
 * Whether `named` names no file: a path whose first folder is one of the tree's, matched whole or as the end of a
 * file's path (comments name files from their room: `ops/access-log.ts`); a bare source name, by any file's name.
 * Build outputs (dist/, OUT_DIR/) and system headers are not the tree's folders or sources, so not checked.
 */
function namesNothing(named: string): boolean {
  if (NOT_OURS.has(named)) return false;
  if (!named.includes('/')) return /\.(ts|cpp|h|cu|py|sh|mjs)$/.test(named) && !files.some((f) => path.basename(f) === named);
  if (!folders.has(named.split('/')[0])) return false;
  return !files.some((f) => f === named || f.endsWith(`/${named}`));
}

function commentLines(file: string): { at: string; comment: string }[] {
  return fs.readFileSync(path.join(root, file), 'utf8').split('\n').flatMap((line, i) => {
    const comment = commentOf(line, file);
    return comment ? [{ at: `${file}:${i + 1}`, comment }] : [];
  });
}

test('every repository path a source comment names exists', () => {
  expect(sources.length).toBeGreaterThan(300);
  const missing = sources.flatMap((f) => commentLines(f).flatMap(({ at, comment }) => [...comment.matchAll(NAMED)].filter((m) => namesNothing(m[1])).map((m) => `${at}: ${m[1]}`)));
  expect(missing).toEqual([]);
});

test('the check finds a moved file, and passes a name from its room, a build output and another project', () => {
  expect(namesNothing('http/access-log.ts')).toBe(true);
  expect(namesNothing('amx_bf16_check.cpp')).toBe(true);
  expect(namesNothing('ops/access-log.ts')).toBe(false);
  expect(namesNothing('dist/tqserve.js')).toBe(false);
  expect(namesNothing('llama.cpp')).toBe(false);
});

test('no comment of src/ or csrc/ names an issue', () => {
  const naming = sources
    .filter((f) => /^c?src\//.test(f))
    .flatMap((f) => commentLines(f).filter(({ comment }) => /\bissues? \d+/i.test(comment)).map(({ at, comment }) => `${at}: ${comment}`));
  expect(naming).toEqual([]);
});
