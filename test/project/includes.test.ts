/**
 * Both builds compile the engine's sources with ATen's header precompiled and included first (CMakeLists.txt,
 * scripts/gyp-build.js), so a source that uses torch without including it still compiles there, and fails in a
 * plain `node-gyp rebuild` or any build without that header. This check stands in for such a build: every file
 * under csrc/ that names torch's namespaces includes one of torch's headers, itself or through the project's
 * headers it includes.
 */
import * as fs from 'fs';
import * as path from 'path';

const csrc = path.resolve(__dirname, '..', '..', 'csrc');

function files(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? files(p) : /\.(cpp|h)$/.test(e.name) ? [p] : [];
  });
}

/** The text without comments and string literals (a comment may name at:: without using it). */
function code(file: string): string {
  return fs.readFileSync(file, 'utf8').replace(/\/\*[\s\S]*?\*\//g, '').replace(/\/\/.*$/gm, '').replace(/"(?:[^"\\\n]|\\.)*"/g, '""');
}

const TORCH_NAMESPACE = /\b(at|c10|torch)::/;
const TORCH_HEADER = /#include\s*<(ATen|c10|torch)\//;

/** Whether `file` includes a torch header, itself or through the project headers it includes (each looked at once). */
function reachesTorch(file: string, seen = new Set<string>()): boolean {
  if (seen.has(file)) return false;
  seen.add(file);
  const text = fs.readFileSync(file, 'utf8');
  if (TORCH_HEADER.test(text)) return true;
  for (const [, name] of text.matchAll(/#include\s*"([^"]+)"/g)) {
    const local = [path.join(path.dirname(file), name), path.join(csrc, name)].find((p) => fs.existsSync(p));
    if (local && reachesTorch(local, seen)) return true;
  }
  return false;
}

test('every source that names at::, c10:: or torch:: includes a torch header, itself or through its own includes', () => {
  const all = files(csrc);
  const users = all.filter((f) => TORCH_NAMESPACE.test(code(f)));
  expect(users.length).toBeGreaterThan(40);
  expect(users.filter((f) => !reachesTorch(f)).map((f) => path.relative(csrc, f))).toEqual([]);
});
