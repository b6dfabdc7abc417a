/**
 * The documents stay true to the tree: every relative link in README.md, docs/, bench/README.md and bench/history/
 * resolves (the file, and the heading its #anchor names), every section a file cites by name (`docs/build.md, "A lean
 * libtorch_cpu"`) is there, every start-up flag has its row in docs/running.md's flag table, and every file of src/
 * and csrc/ is named in the map, docs/architecture.md.
 */
import * as fs from 'fs';
import * as path from 'path';
import { flagDefs } from '../../src/config/flags';
import { treeFiles } from '../helpers/source-tree';

const root = path.resolve(__dirname, '..', '..');
const documents = ['README.md', 'bench/README.md', ...fs.readdirSync(path.join(root, 'bench/history')).map((f) => `bench/history/${f}`), ...fs.readdirSync(path.join(root, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];

/** Markdown outside fenced code blocks (a `# comment` in a shell example is not a heading). */
function prose(markdown: string): string {
  return markdown.split(/^```.*$/m).filter((_, i) => i % 2 === 0).join('\n');
}

/** GitHub's anchor for a heading: lower case, punctuation other than '-' and '_' dropped, spaces as '-'. */
function slug(heading: string): string {
  return heading.trim().toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-');
}

function anchorsOf(file: string): Set<string> {
  const headings = prose(fs.readFileSync(file, 'utf8')).match(/^#{1,6} .*$/gm) ?? [];
  return new Set(headings.map((h) => slug(h.replace(/^#+ /, ''))));
}

/** The relative links of `markdown` (as if it were the document at `doc`) that name no file or no heading. */
function brokenLinks(doc: string, markdown: string): string[] {
  const broken: string[] = [];
  for (const [, target] of prose(markdown).matchAll(/\]\(([^)\s]+)\)/g)) {
    if (/^[a-z]+:/.test(target)) continue; // http:, https:, mailto:
    const [file, anchor] = target.split('#');
    const resolved = file ? path.resolve(path.dirname(path.join(root, doc)), file) : path.join(root, doc);
    if (!fs.existsSync(resolved)) broken.push(`${doc}: ${target} (no such file)`);
    else if (anchor !== undefined && !anchorsOf(resolved).has(anchor)) broken.push(`${doc}: ${target} (no such heading)`);
  }
  return broken;
}

test('every relative link in the documents resolves, anchors included', () => {
  expect(documents.flatMap((doc) => brokenLinks(doc, fs.readFileSync(path.join(root, doc), 'utf8')))).toEqual([]);
});

test('the link check finds a missing file and a missing heading, and passes good links', () => {
  const text = '[a](docs/nothing.md) [b](docs/running.md#no-such-heading) [c](docs/running.md#flags) [d](bench/README.md) [e](https://example.com)';
  expect(brokenLinks('README.md', text)).toEqual(['README.md: docs/nothing.md (no such file)', 'README.md: docs/running.md#no-such-heading (no such heading)']);
  expect(slug('Drop-in clients and hostile input')).toBe('drop-in-clients-and-hostile-input');
  expect(slug('Serving: `npm run bench:serving`')).toBe('serving-npm-run-benchserving');
});

test('every start-up flag is documented in docs/running.md', () => {
  const running = fs.readFileSync(path.join(root, 'docs/running.md'), 'utf8');
  const missing = flagDefs.map((f) => `--${f.name}`).filter((flag) => !running.includes(`\`${flag}\``));
  expect(missing).toEqual([]);
});

function filesUnder(dir: string): string[] {
  return fs.readdirSync(path.join(root, dir), { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? filesUnder(`${dir}/${e.name}`) : [`${dir}/${e.name}`]));
}

/** The files of `files` the map does not name: by their stem followed by an extension or `.*` (`attention.cpp`, `attention.*`). */
function unmapped(map: string, files: string[]): string[] {
  const escape = (t: string) => t.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return files.filter((f) => !new RegExp(`(?<![\\w-])${escape(path.basename(f).split('.')[0])}\\.(\\*|[a-z]+)`).test(map));
}

test('every file of src/ and csrc/ is named in docs/architecture.md', () => {
  const map = fs.readFileSync(path.join(root, 'docs/architecture.md'), 'utf8');
  expect(unmapped(map, [...filesUnder('src'), ...filesUnder('csrc')])).toEqual([]);
});

test('the map check finds a file the map does not name, and not one it names as `stem.*`', () => {
  const map = '`attention.*` (the plan), `store.ts`';
  expect(unmapped(map, ['csrc/kernels/cpu/attention/attention.h', 'src/tasks/store.ts', 'src/tasks/import.ts', 'csrc/kernels/cpu/attention/attention_plan.cpp'])).toEqual([
    'src/tasks/import.ts',
    'csrc/kernels/cpu/attention/attention_plan.cpp',
  ]);
});

/** The tree's sources and documents, tracked or new (not bench/history/ nor the GPU's results: records, left as written). */
const citing = treeFiles().filter((f) => /\.(ts|js|mjs|cpp|h|cu|py|sh|md)$|^CMakeLists\.txt$|\.gyp$/.test(f) && !/^bench\/(history|gpu\/results)\//.test(f));

/**
 * The sections `text` (the file at `file`) cites by name that `read(doc)` has neither as a heading nor as a bold label
 * (`**Where a start's CPU goes**`): `doc.md, "Name"`, with the citation's line breaks and comment marks taken out.
 */
function missingSections(file: string, text: string, read: (doc: string) => string | undefined): string[] {
  const joined = text.replace(/\n[ \t]*(\*|\/\/|#)?[ \t]*/g, ' ');
  const missing: string[] = [];
  for (const [, cited, quoted] of joined.matchAll(/([\w./-]+\.md)`?\)?,\s+"([^"]+)"/g)) {
    const doc = [path.join(path.dirname(file), cited), cited].map((d) => path.normalize(d)).find((d) => read(d) !== undefined);
    if (!doc) continue;  // another project's document, or a path the link check reports
    const name = quoted.replace(/[.,;:]$/, '');
    const markdown = read(doc)!;
    const headings = (prose(markdown).match(/^#{1,6} .*$/gm) ?? []).map((h) => h.replace(/^#+ /, '').replace(/`/g, ''));
    const labels = [...markdown.matchAll(/\*\*([^*]+)\*\*/g)].map((m) => m[1]);
    if (![...headings, ...labels].some((title) => title.startsWith(name))) missing.push(`${file}: ${doc}, "${name}"`);
  }
  return missing;
}

const readDocument = (doc: string) => (doc.endsWith('.md') && fs.existsSync(path.join(root, doc)) ? fs.readFileSync(path.join(root, doc), 'utf8') : undefined);

test('every section a source or document cites by name is a heading or a bold label of that document', () => {
  expect(citing.length).toBeGreaterThan(300);
  expect(citing.flatMap((f) => missingSections(f, fs.readFileSync(path.join(root, f), 'utf8'), readDocument))).toEqual([]);
});

test('the section check finds a name the document lacks, across a comment\'s line break, and passes headings and labels', () => {
  const doc = '# Title\n\n## The builds: `npm run x`\n\n**Where a start goes** (today): ...\n';
  const read = (d: string) => (d === 'docs/x.md' ? doc : undefined);
  const source = ' * as measured (docs/x.md, "Where a start\n * goes"); docs/x.md, "The builds"; docs/x.md, "Gone"; other/y.md, "Else"';
  expect(missingSections('src/a.ts', source, read)).toEqual(['src/a.ts: docs/x.md, "Gone"']);
});
